/**
 * Building a run from its plan (plan.ts): the calls are added, the plan's edges wired into them
 * (successor lists and waiting counts), the calls ranked by longest remaining path, and plan-time
 * failures (cycles, unknown tools, bad args, denied calls) applied in original order. A replan plans
 * the run again with the new calls appended and wires only the edges that end in them.
 */
import type { CallInput, Edge } from '../calls.js';
import { callError } from '../errors.js';
import type { EventPayloads } from '../events.js';
import { HazardIndex, describeHazard } from '../hazards.js';
import { own } from '../limits.js';
import { buildPlan, type Plan, type PlannedCall } from '../plan.js';
import { assertUniqueIds } from './api.js';
import { arm, block, blockDescendantsOf, fail } from './progress.js';
import { appended, emit, isPending, markDirty, newCall, type ScheduledCall, type ScheduledRun, type SchedulerState } from './records.js';

/** Plans and wires `list` into the run, emits `event` with the new edges, and lets the calls go. */
export function addCalls(
  s: SchedulerState,
  run: ScheduledRun,
  list: CallInput[],
  event: 'run.started' | 'run.replanned',
  released = false,
): void {
  const { plan, base, fresh, doomedBy } = wire(s, run, list);
  const step = { edges: fresh, generations: plan.generations, diagnostics: run.diagnostics.slice(run.diagnosticsBase) };
  if (event === 'run.replanned') {
    const data: EventPayloads['run.replanned'] = { ...step, calls: list };
    emit(s, event, run, undefined, data);
  } else emit(s, event, run, undefined, released ? { ...step, released: true } : step);

  // Cycles first, so a cycle's calls all say `cycle` before anything is propagated from them. The
  // new calls are those from `base` on (indexed loops: this runs once per batch, mostly unoptimized,
  // where for…of made an iterator result per call and pass).
  const calls = run.calls;
  const end = calls.length;
  for (let i = base; i < end; i++) {
    const c = calls[i] as ScheduledCall;
    const p = plan.calls[c.index] as PlannedCall;
    if (p.blockedBy && isPending(c)) block(s, run, c, p.blockedBy, false);
  }
  for (let i = base; i < end; i++) {
    const c = calls[i] as ScheduledCall;
    const p = plan.calls[c.index] as PlannedCall;
    const from = doomedBy.size > 0 ? doomedBy.get(c.index) : undefined;
    if (p.error && isPending(c)) fail(s, run, c, p.error, true);
    else if (p.blockedBy && c.status === 'blocked') blockDescendantsOf(s, run, c);
    else if (from && isPending(c))
      blockDescendantsOf(
        s,
        run,
        from,
        [c],
        callError('dependency_failed', `${from.id} ${from.status === 'failed' ? 'failed' : `is ${from.status}`}`, { callId: from.id }),
      );
  }
  for (let i = base; i < end; i++) {
    const c = calls[i] as ScheduledCall;
    if (c.status === 'pending' && c.dataWaiting === 0 && !c.armed) arm(s, run, c);
  }
  markDirty(s, run);
}

/**
 * Plans the run's calls with `list` appended and wires the edges that end in the new calls. An edge
 * from an earlier call (a replan's calls referring to the run's results) needs no waiting: that call
 * has ended; if it did not succeed, the new call is doomed by it.
 */
export function wire(s: SchedulerState, run: ScheduledRun, list: CallInput[]) {
  const base = run.calls.length;
  // `concat`, not a spread of both: a spread goes through the iterator, a result object per call.
  const inputs = run.inputs.concat(list);
  const plan = buildPlan({ calls: inputs, tenant: run.tenant, catalog: s.opts.catalog, policy: s.opts.policy });
  // A call is named by its id in every attempt end, review and reference: two calls with one id
  // could never both end (the API rejects such a batch too; this guards library callers). The plan
  // indexes ids anyway, so a duplicate shows as fewer ids than calls.
  if (plan.byId.size !== inputs.length) assertUniqueIds(inputs, undefined, run.id);
  run.inputs = inputs;
  // The plan indexes every call of the run, the earlier ones as they were.
  run.byId = plan.byId;
  for (let i = base; i < inputs.length; i++) run.calls.push(newCall(run, plan.calls[i] as PlannedCall));
  const { edges: fresh, ends } = base === 0 ? { edges: plan.edges, ends: plan.edgeCalls } : replanEdges(plan, base);
  const doomedBy = new Map<number, ScheduledCall>();
  for (let k = 0; k < fresh.length; k++) {
    const from = run.calls[ends[2 * k] as number] as ScheduledCall;
    const to = run.calls[ends[2 * k + 1] as number] as ScheduledCall;
    if (from.index < base) {
      if ((fresh[k] as Edge).kind !== 'conflict' && from.status !== 'succeeded' && !doomedBy.has(to.index)) doomedBy.set(to.index, from);
      continue;
    }
    if ((fresh[k] as Edge).kind === 'conflict') {
      from.conflictSucc = appended(from.conflictSucc, to.index);
      to.conflictWaiting++;
    } else {
      from.dataSucc = appended(from.dataSucc, to.index);
      to.dataWaiting++;
      to.dataUnreleased++;
    }
  }
  rank(run, plan, base);
  const isNew = (id: string) => (run.byId.get(id) as number) >= base;
  run.diagnosticsBase = run.diagnostics.length;
  run.diagnostics.push(...plan.diagnostics.filter((d) => (d.callId !== undefined ? isNew(d.callId) : (d.callIds ?? []).some(isNew))));
  return { plan, base, fresh, doomedBy };
}

/**
 * The edges into a replan's calls (with their call indexes, as `Plan.edgeCalls`). Every earlier call
 * has ended, so conflicts are only among the new calls: they are ordered by a hazard index of their
 * own, in the plan's order. (The whole run's conflict edges would not do: an old call between two new
 * ones in that order would stand in for the edge between them, and it is no longer there to wait for.)
 */
function replanEdges(plan: Plan, base: number): { edges: Edge[]; ends: number[] } {
  const edges: Edge[] = [];
  const ends: number[] = [];
  plan.edges.forEach((e, k) => {
    const to = plan.edgeCalls[2 * k + 1] as number;
    if (e.kind === 'conflict' || to < base) return;
    edges.push(e);
    ends.push(plan.edgeCalls[2 * k] as number, to);
  });
  const linked = new Set(edges.map((e) => `${e.from}>${e.to}`));
  const hazards = new HazardIndex();
  for (const i of plan.order) {
    const p = plan.calls[i] as PlannedCall;
    if (i < base || p.error || p.blockedBy) continue;
    const found = hazards.scan(i, p.access);
    for (let j = 0; j < found; j++) {
      const h = hazards.from(j);
      const from = (plan.calls[h] as PlannedCall).id;
      if (linked.has(`${from}>${p.id}`)) continue;
      edges.push({ from, to: p.id, kind: 'conflict', reason: describeHazard(hazards.kind(j), hazards.key(j)) });
      ends.push(h, i);
    }
  }
  return { edges, ends };
}

/** Longest remaining path, in estimated ms, for the calls from `base` on (reverse topological order). */
function rank(run: ScheduledRun, plan: Plan, base: number): void {
  const est = (c: ScheduledCall) => own(run.estimates, c.tool) ?? 1;
  const { start, list } = plan.adjacency;
  for (let k = plan.order.length - 1; k >= 0; k--) {
    const i = plan.order[k] as number;
    if (i < base) continue;
    const c = run.calls[i] as ScheduledCall;
    let tail = 0;
    for (let e = start[i] as number; e < (start[i + 1] as number); e++) {
      const t = list[e] as number;
      if (t >= base) tail = Math.max(tail, (run.calls[t] as ScheduledCall).priority);
    }
    c.priority = est(c) + tail;
  }
}
