/**
 * Planning a streamed run (DESIGN §10): calls arrive in model order, a few at a time, and each should
 * start as soon as it is safe, before the batch is complete.
 *
 * A call is *settled* once nothing that arrives later can give it a predecessor: every reference names
 * a call id that has arrived and is settled itself, it has no reference by tool name (which a later
 * call of that tool could make ambiguous), and no `after`/`requires` ordering (which a later call could
 * satisfy). A settled call gets its data edges and takes its place in the conflict order then, so
 * conflicting calls are ordered by arrival and a call never gains a predecessor after it is settled.
 * Calls that are not settled wait for the seal; they are then planned as one batch would plan them
 * (references, policy, cycles), and take their places in the conflict order in the stable topological
 * order of the whole run.
 */
import type { CallInput, Diagnostic, Edge } from './calls.js';
import { HazardIndex, describeHazard } from './hazards.js';
import { buildPlan, dataReason, type Plan, type PlannedCall } from './plan.js';
import { policyFor } from './policy.js';
import { findReferences } from './references.js';
import type { Catalog, Policy } from './tool.js';

export interface StreamStep {
  /** The arrived calls' plans, for the calls added in this step (empty for a seal). */
  planned: PlannedCall[];
  /** Edges that end in calls settled in this step. */
  edges: Edge[];
  /** Calls settled in this step, in the order they were settled, with their plans as of now. */
  settled: number[];
  settledPlans: PlannedCall[];
  /**
   * Per settled call that will never run (see `StreamPlanner.origin`): the index of the call whose
   * plan-time failure a batch would meet first, its own index when that is its own. Plan-time
   * failures take effect in this order, as a batch applies them in original order.
   */
  origin: Map<number, number>;
  /** Per settled call that depends on calls that will never run: the one whose failure reaches it first. */
  via: Map<number, string>;
  /** At a seal: the whole run's plan, whose errors and cycles apply to the calls settled now. */
  plan?: Plan;
  diagnostics: Diagnostic[];
}

export class StreamPlanner {
  private readonly inputs: CallInput[] = [];
  private readonly ids = new Map<string, number>();
  private readonly settled: boolean[] = [];
  /** Per unsettled call: the call ids it still waits for; undefined once it can only wait for the seal. */
  private readonly waitsFor = new Map<number, Set<string> | undefined>();
  private readonly hazards = new HazardIndex();
  /**
   * Calls that will never run by the plan (a plan-time error, a cycle, or a data or policy predecessor
   * that will never run) → the index of the first call, in original order, whose failure reaches them.
   * A batch fails its calls with plan errors in original order and blocks what depends on each at
   * once, so a call with an error of its own is blocked instead when an earlier one reaches it first.
   */
  private readonly origin = new Map<string, number>();
  private latest: Plan | undefined;
  sealed = false;

  constructor(
    private readonly tenant: string,
    private readonly catalog: Catalog,
    private readonly policy: Policy,
  ) {}

  add(calls: readonly CallInput[]): StreamStep {
    const base = this.inputs.length;
    for (const c of calls) {
      this.ids.set(c.id, this.inputs.length);
      this.inputs.push(c);
      this.settled.push(false);
    }
    // The arrived calls as a batch: what each new call is (tool, access, errors that cannot change).
    const plan = buildPlan({ calls: this.inputs, tenant: this.tenant, catalog: this.catalog, policy: this.policy });
    this.latest = plan;
    const step: StreamStep = { planned: plan.calls.slice(base), edges: [], settled: [], settledPlans: [], origin: new Map(), via: new Map(), diagnostics: [] };
    // A call that fails at plan time whatever arrives later still waits for the calls it refers to, as
    // any other: a batch gives it their data edges, and blocks it when one of them can never run.
    for (let i = base; i < this.inputs.length; i++) this.waitsFor.set(i, this.openQuestions(plan.calls[i] as PlannedCall));
    this.settleReady(plan, step);
    return step;
  }

  seal(): StreamStep {
    this.sealed = true;
    const plan = buildPlan({ calls: this.inputs, tenant: this.tenant, catalog: this.catalog, policy: this.policy });
    this.latest = plan;
    const step: StreamStep = { planned: [], edges: [], settled: [], settledPlans: [], origin: new Map(), via: new Map(), plan, diagnostics: [] };
    const rest = new Set(this.waitsFor.keys());
    for (const d of plan.diagnostics) {
      if (d.callId !== undefined ? rest.has(this.ids.get(d.callId) as number) : (d.callIds ?? []).some((id) => rest.has(this.ids.get(id) as number))) {
        step.diagnostics.push(d);
      }
    }
    const inOrder = new Set(plan.order);
    const sequence = [...plan.order.filter((i) => rest.has(i)), ...[...rest].filter((i) => !inOrder.has(i))];
    // Calls on a cycle come last in `sequence` (they have no place in the order), yet what depends on
    // them must know that they never run: find the origins of the rest first (the least fixpoint of
    // `settle`'s rule over the data and policy edges).
    for (const i of rest) {
      const p = plan.calls[i] as PlannedCall;
      if (p.blockedBy || p.error) this.origin.set(p.id, i);
    }
    for (let changed = true; changed; ) {
      changed = false;
      for (const e of plan.edges) {
        const to = this.ids.get(e.to) as number;
        const o = this.origin.get(e.from);
        if (e.kind === 'conflict' || o === undefined || !rest.has(to) || (plan.calls[to] as PlannedCall).blockedBy) continue;
        if (o < (this.origin.get(e.to) ?? Infinity)) {
          this.origin.set(e.to, o);
          changed = true;
        }
      }
    }
    for (const i of sequence) {
      const p = plan.calls[i] as PlannedCall;
      for (const e of plan.edges) if (e.to === p.id && e.kind !== 'conflict') step.edges.push(e);
      this.settle(i, p, step, false);
    }
    this.waitsFor.clear();
    return step;
  }

  /** The call ids a call waits for, or undefined when only the seal can settle it. */
  private openQuestions(p: PlannedCall): Set<string> | undefined {
    if (p.manifest) {
      const cp = policyFor(p.manifest, this.tenant, this.policy);
      if (cp.after.length > 0 || cp.requires.length > 0) return undefined;
    }
    const waits = new Set<string>();
    for (const ref of findReferences(p.args).refs) {
      const target = this.ids.get(ref.target);
      if (target === undefined || !this.isCallId(ref.target)) {
        // Not arrived yet, or a tool name: a later call decides what it names.
        if (this.looksLikeToolReference(ref.target)) return undefined;
        waits.add(ref.target);
      } else if (target !== p.index) waits.add(ref.target);
    }
    return waits;
  }

  private isCallId(target: string): boolean {
    return this.ids.has(target);
  }

  /** A target that is no call id and is the name of a tool in the catalog refers by tool name. */
  private looksLikeToolReference(target: string): boolean {
    return !this.ids.has(target) && this.catalog.get(target) !== undefined;
  }

  /** Settles every call whose waited-for calls have all arrived and settled, until none is left. */
  private settleReady(plan: Plan, step: StreamStep): void {
    for (let progress = true; progress; ) {
      progress = false;
      for (const [i, waits] of [...this.waitsFor].sort(([a], [b]) => a - b)) {
        if (waits === undefined) continue;
        let ready = true;
        for (const id of waits) {
          const t = this.ids.get(id);
          if (t === undefined || !this.settled[t]) ready = false;
        }
        if (!ready) continue;
        const p = plan.calls[i] as PlannedCall;
        // (A reference to itself is a cycle: the call is blocked, and the edge shows why, as in a batch.)
        for (const [target, id] of p.targets) step.edges.push({ from: id, to: p.id, kind: 'data', reason: dataReason(p.id, target) });
        this.settle(i, p, step, true);
        this.waitsFor.delete(i);
        progress = true;
      }
    }
  }

  private settle(i: number, p: PlannedCall, step: StreamStep, live: boolean): void {
    this.settled[i] = true;
    step.settled.push(i);
    step.settledPlans.push(p);
    // As in a batch, a call that will never run holds no place in the conflict order: one that fails
    // or is blocked at plan time, and one that depends (data, policy) on such a call.
    let first = Infinity;
    for (const e of step.edges) {
      const o = e.to === p.id && e.kind !== 'conflict' ? this.origin.get(e.from) : undefined;
      if (o !== undefined && o < first) {
        first = o;
        step.via.set(i, e.from);
      }
    }
    if (p.blockedBy) first = i; // on a cycle: blocked from the start, so nothing reaches it through others
    else if (p.error) first = Math.min(first, i);
    if (first !== Infinity) {
      this.origin.set(p.id, first);
      step.origin.set(i, first);
      if (live && (p.error || p.blockedBy)) step.diagnostics.push({ code: (p.error ?? p.blockedBy)?.code as string, message: (p.error ?? p.blockedBy)?.message as string, callId: p.id });
      return;
    }
    const seen = new Set(step.edges.filter((e) => e.to === p.id).map((e) => e.from));
    for (const h of this.hazards.add(i, p.access)) {
      const from = (this.inputs[h.from] as CallInput).id;
      if (!seen.has(from)) step.edges.push({ from, to: p.id, kind: 'conflict', reason: describeHazard(h.kind, h.key) });
    }
  }

  /** The latest whole-run plan (for generations). */
  get plan(): Plan | undefined {
    return this.latest;
  }
}
