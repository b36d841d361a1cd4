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
import { buildPlan, type Plan, type PlannedCall } from './plan.js';
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
    const step: StreamStep = { planned: plan.calls.slice(base), edges: [], settled: [], settledPlans: [], diagnostics: [] };
    for (let i = base; i < this.inputs.length; i++) {
      const p = plan.calls[i] as PlannedCall;
      const open = this.openQuestions(p);
      this.waitsFor.set(i, open);
      if (p.error && !isProvisional(p.error.code)) {
        // Fails now, whatever arrives later: it holds no resources and is settled at once.
        this.settled[i] = true;
        this.waitsFor.delete(i);
        step.settled.push(i);
        step.settledPlans.push(p);
        step.diagnostics.push({ code: p.error.code, message: p.error.message, callId: p.id });
      }
    }
    this.settleReady(plan, step);
    return step;
  }

  seal(): StreamStep {
    this.sealed = true;
    const plan = buildPlan({ calls: this.inputs, tenant: this.tenant, catalog: this.catalog, policy: this.policy });
    this.latest = plan;
    const step: StreamStep = { planned: [], edges: [], settled: [], settledPlans: [], plan, diagnostics: [] };
    const rest = new Set(this.waitsFor.keys());
    for (const d of plan.diagnostics) {
      if (d.callId !== undefined ? rest.has(this.ids.get(d.callId) as number) : (d.callIds ?? []).some((id) => rest.has(this.ids.get(id) as number))) {
        step.diagnostics.push(d);
      }
    }
    const inOrder = new Set(plan.order);
    const sequence = [...plan.order.filter((i) => rest.has(i)), ...[...rest].filter((i) => !inOrder.has(i))];
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
        for (const [target, id] of p.targets) {
          if (id !== p.id) step.edges.push({ from: id, to: p.id, kind: 'data', reason: `${p.id} uses \${${target}.output}` });
        }
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
    const doomed = p.error !== undefined || p.blockedBy !== undefined;
    if (doomed) {
      if (live) step.diagnostics.push({ code: (p.error ?? p.blockedBy)?.code as string, message: (p.error ?? p.blockedBy)?.message as string, callId: p.id });
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

/** Errors that a later call can still change: a reference or requirement not satisfied yet. */
function isProvisional(code: string): boolean {
  return code === 'unresolved_reference' || code === 'ambiguous_reference' || code === 'missing_required_predecessor';
}
