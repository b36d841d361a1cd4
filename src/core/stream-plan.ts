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
 *
 * Appending costs what the new calls cost, not what the run holds: each call is planned on its own as
 * it arrives (`planCall`: what it is, what its references name among the calls so far), a call waits
 * on a count of the calls it still needs, and settling one looks only at the calls that wait on it.
 * The whole run is planned once, at the seal.
 */
import type { CallInput, Diagnostic, Edge } from './calls.js';
import { HazardIndex, describeHazard } from './hazards.js';
import { callError } from './errors.js';
import { MinHeap } from './heap.js';
import { buildPlan, dataReason, planCall, type Plan, type PlannedCall } from './plan.js';
import { policyFor, type CallPolicy } from './policy.js';
import { findReferences } from './references.js';
import type { Catalog, Policy, ToolManifest } from './tool.js';

export interface StreamStep {
  /**
   * The arrived calls' plans, for the calls added in this step (empty for a seal), as a batch of the
   * calls so far would plan them; except that whether a call lies on a cycle through other calls is
   * only known when it is settled (`blockedBy` here says only a reference to itself).
   */
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
  /** Tool name → its calls, as `buildPlan` indexes them. */
  private readonly byTool = new Map<string, number[]>();
  private readonly settled: boolean[] = [];
  /** Per unsettled call: the call ids it still waits for; undefined once it can only wait for the seal. */
  private readonly waitsFor = new Map<number, Set<string> | undefined>();
  /** Per unsettled call that waits for ids: how many of them are not settled yet. */
  private readonly missing = new Map<number, number>();
  /** Call id (arrived or not) → the unsettled calls that wait for it, by index. */
  private readonly waiters = new Map<string, number[]>();
  private readonly hazards = new HazardIndex();
  /**
   * Calls that will never run by the plan (a plan-time error, a cycle, or a data or policy predecessor
   * that will never run) → the index of the first call, in original order, whose failure reaches them.
   * A batch fails its calls with plan errors in original order and blocks what depends on each at
   * once, so a call with an error of its own is blocked instead when an earlier one reaches it first.
   */
  private readonly origin = new Map<string, number>();
  private readonly policies = new Map<ToolManifest, CallPolicy>();
  private readonly policyOf = (m: ToolManifest): CallPolicy => {
    let cp = this.policies.get(m);
    if (!cp) this.policies.set(m, (cp = policyFor(m, this.tenant, this.policy)));
    return cp;
  };
  private latest: Plan | undefined;
  /** Whether calls were added or the run sealed (before that, there is no plan). */
  private touched = false;
  /**
   * What the planner has done so far, for tests that hold it to its cost: whole-run plans built, calls
   * planned on their own, waiting calls looked at to see whether they could settle, and edges followed
   * to spread origins at the seal.
   */
  readonly work = { plans: 0, calls: 0, visits: 0, spread: 0 };
  sealed = false;

  constructor(
    private readonly tenant: string,
    private readonly catalog: Catalog,
    private readonly policy: Policy,
  ) {}

  add(calls: readonly CallInput[]): StreamStep {
    const base = this.inputs.length;
    for (const c of calls) {
      const i = this.inputs.length;
      this.ids.set(c.id, i);
      this.inputs.push(c);
      this.settled.push(false);
      const users = this.byTool.get(c.tool);
      if (users) users.push(i);
      else this.byTool.set(c.tool, [i]);
    }
    this.latest = undefined;
    this.touched = true;
    // What each new call is (tool, access, errors that cannot change), as a batch of the calls so far
    // would plan it.
    const planned: PlannedCall[] = [];
    for (let i = base; i < this.inputs.length; i++) planned.push(this.planOne(i));
    const step: StreamStep = { planned, edges: [], settled: [], settledPlans: [], origin: new Map(), via: new Map(), diagnostics: [] };
    // A call that fails at plan time whatever arrives later still waits for the calls it refers to, as
    // any other: a batch gives it their data edges, and blocks it when one of them can never run.
    const ready: number[] = [];
    for (let i = base; i < this.inputs.length; i++) {
      const waits = this.openQuestions(planned[i - base] as PlannedCall);
      this.waitsFor.set(i, waits);
      if (waits === undefined) continue;
      let missing = 0;
      for (const id of waits) {
        const t = this.ids.get(id);
        if (t !== undefined && this.settled[t]) continue;
        missing++;
        const list = this.waiters.get(id);
        if (list) list.push(i);
        else this.waiters.set(id, [i]);
      }
      this.missing.set(i, missing);
      if (missing === 0) ready.push(i);
    }
    this.settleReady(ready, base, planned, step);
    return step;
  }

  seal(): StreamStep {
    this.sealed = true;
    this.touched = true;
    const plan = this.wholePlan();
    const step: StreamStep = {
      planned: [],
      edges: [],
      settled: [],
      settledPlans: [],
      origin: new Map(),
      via: new Map(),
      plan,
      diagnostics: [],
    };
    const rest = new Set(this.waitsFor.keys());
    for (const d of plan.diagnostics) {
      if (
        d.callId !== undefined
          ? rest.has(this.ids.get(d.callId) as number)
          : (d.callIds ?? []).some((id) => rest.has(this.ids.get(id) as number))
      ) {
        step.diagnostics.push(d);
      }
    }
    const inOrder = new Set(plan.order);
    const sequence = [...plan.order.filter((i) => rest.has(i)), ...[...rest].filter((i) => !inOrder.has(i))];
    // The data and policy edges into each call that settles now, in the plan's order.
    const into = new Map<number, number[]>();
    plan.edges.forEach((e, k) => {
      const to = plan.edgeCalls[2 * k + 1] as number;
      if (e.kind === 'conflict' || !rest.has(to)) return;
      const list = into.get(to);
      if (list) list.push(k);
      else into.set(to, [k]);
    });
    // Calls on a cycle come last in `sequence` (they have no place in the order), yet what depends on
    // them must know that they never run: find the origins of the rest first (the least fixpoint of
    // `settle`'s rule over the data and policy edges).
    for (const i of rest) {
      const p = plan.calls[i] as PlannedCall;
      if (p.blockedBy || p.error) this.origin.set(p.id, i);
    }
    this.spreadOrigins(plan, rest);
    for (const i of sequence) {
      const p = plan.calls[i] as PlannedCall;
      const from = step.edges.length;
      for (const k of into.get(i) ?? []) step.edges.push(plan.edges[k] as Edge);
      this.settle(i, p, step, false, from);
    }
    this.waitsFor.clear();
    this.missing.clear();
    this.waiters.clear();
    return step;
  }

  /**
   * The least fixpoint of: a call of `rest` that is not on a cycle takes the smallest origin among its
   * own and those of its data and policy predecessors. Origins only spread downwards, so spreading
   * them from the smallest up reaches each call with its final origin first, and once.
   */
  private spreadOrigins(plan: Plan, rest: Set<number>): void {
    const succ = new Map<number, number[]>();
    plan.edges.forEach((e, k) => {
      const to = plan.edgeCalls[2 * k + 1] as number;
      if (e.kind === 'conflict' || !rest.has(to) || (plan.calls[to] as PlannedCall).blockedBy) return;
      const from = plan.edgeCalls[2 * k] as number;
      const list = succ.get(from);
      if (list) list.push(to);
      else succ.set(from, [to]);
    });
    const value = (i: number) => this.origin.get((plan.calls[i] as PlannedCall).id) ?? Infinity;
    const sources = [...succ.keys()].filter((i) => value(i) !== Infinity).sort((a, b) => value(a) - value(b));
    for (const s of sources) {
      const o = value(s);
      const stack = [s];
      while (stack.length > 0) {
        const v = stack.pop() as number;
        for (const w of succ.get(v) ?? []) {
          this.work.spread++;
          if (o >= value(w)) continue;
          this.origin.set((plan.calls[w] as PlannedCall).id, o);
          stack.push(w);
        }
      }
    }
  }

  /** A call's plan as a batch of the calls so far would make it (see `StreamStep.planned`). */
  private planOne(i: number): PlannedCall {
    this.work.calls++;
    const p = planCall(i, { calls: this.inputs, byId: this.ids, byTool: this.byTool }, this.catalog, this.policyOf);
    // A reference to itself is a cycle of its own, known now; a cycle through later calls is not.
    if (!p.error && p.refCalls.includes(i)) {
      const ids = [p.id, p.id];
      p.blockedBy = callError('cycle', `${p.id} is on the cycle ${ids.join(' → ')}`, { details: { cycle: ids } });
    }
    return p;
  }

  /** The call ids a call waits for, or undefined when only the seal can settle it. */
  private openQuestions(p: PlannedCall): Set<string> | undefined {
    if (p.manifest) {
      const cp = this.policyOf(p.manifest);
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

  /**
   * Settles every call whose waited-for calls have all arrived and settled, until none is left: in
   * passes over the waiting calls by index, where settling a call lets the calls after it that waited
   * only for it settle in the same pass, and those before it in the next (the order in which a scan of
   * every waiting call, again and again, would settle them). `ready`: the new calls that wait for
   * nothing unsettled, ascending; `planned`: the plans of the calls from `base` on.
   */
  private settleReady(ready: number[], base: number, planned: PlannedCall[], step: StreamStep): void {
    for (let pass = ready; pass.length > 0; ) {
      const heap = new MinHeap<number>((a, b) => a - b);
      for (const i of pass) heap.push(i);
      const next: number[] = [];
      while (heap.size > 0) {
        const i = heap.pop() as number;
        this.work.visits++;
        // The plan as of now: a call that arrived earlier may name calls that have arrived since.
        const p = i >= base ? (planned[i - base] as PlannedCall) : this.planOne(i);
        const from = step.edges.length;
        // (A reference to itself is a cycle: the call is blocked, and the edge shows why, as in a batch.)
        for (const [target, id] of p.targets) step.edges.push({ from: id, to: p.id, kind: 'data', reason: dataReason(p.id, target) });
        this.settle(i, p, step, true, from);
        this.waitsFor.delete(i);
        this.missing.delete(i);
        const waiting = this.waiters.get(p.id);
        if (!waiting) continue;
        this.waiters.delete(p.id);
        for (const w of waiting) {
          this.work.visits++;
          const left = (this.missing.get(w) as number) - 1;
          this.missing.set(w, left);
          if (left > 0) continue;
          if (w > i) heap.push(w);
          else next.push(w);
        }
      }
      pass = next.sort((a, b) => a - b);
    }
  }

  /** `from`: where the edges into the call start in `step.edges` (all of them are pushed together). */
  private settle(i: number, p: PlannedCall, step: StreamStep, live: boolean, from: number): void {
    this.settled[i] = true;
    step.settled.push(i);
    step.settledPlans.push(p);
    // As in a batch, a call that will never run holds no place in the conflict order: one that fails
    // or is blocked at plan time, and one that depends (data, policy) on such a call.
    // Of the predecessors that the first failure reaches it through, `via` names one settled before
    // it when there is one: a call on a cycle settles later, and its origin may have come through
    // this very call (c5 ⇄ c7, both reached from c0: c5's way is c0, not c7).
    let first = Infinity;
    let viaSettled = false;
    for (let k = from; k < step.edges.length; k++) {
      const e = step.edges[k] as Edge;
      const o = e.kind !== 'conflict' ? this.origin.get(e.from) : undefined;
      if (o === undefined || o > first) continue;
      const settledBefore = e.from !== p.id && this.settled[this.ids.get(e.from) as number] === true;
      if (o < first || (settledBefore && !viaSettled)) {
        first = o;
        viaSettled = settledBefore;
        step.via.set(i, e.from);
      }
    }
    if (p.blockedBy)
      first = i; // on a cycle: blocked from the start, so nothing reaches it through others
    else if (p.error) first = Math.min(first, i);
    if (first !== Infinity) {
      this.origin.set(p.id, first);
      step.origin.set(i, first);
      if (live && (p.error || p.blockedBy))
        step.diagnostics.push({
          code: (p.error ?? p.blockedBy)?.code as string,
          message: (p.error ?? p.blockedBy)?.message as string,
          callId: p.id,
        });
      return;
    }
    const seen = new Set<string>();
    for (let k = from; k < step.edges.length; k++) seen.add((step.edges[k] as Edge).from);
    for (const h of this.hazards.add(i, p.access)) {
      const from = (this.inputs[h.from] as CallInput).id;
      if (!seen.has(from)) step.edges.push({ from, to: p.id, kind: 'conflict', reason: describeHazard(h.kind, h.key) });
    }
  }

  /** The whole run's plan (built once for the calls so far). */
  private wholePlan(): Plan {
    if (!this.latest) {
      this.work.plans++;
      this.latest = buildPlan({ calls: this.inputs, tenant: this.tenant, catalog: this.catalog, policy: this.policy });
    }
    return this.latest;
  }

  /** The whole-run plan of the calls so far (built on first use after an append, for generations). */
  get plan(): Plan | undefined {
    return this.touched ? this.wholePlan() : undefined;
  }
}
