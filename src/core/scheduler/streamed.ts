/**
 * Streamed runs (DESIGN §10): calls arrive while the run runs (`append`), planned step by step by a
 * `StreamPlanner` (stream-plan.ts), until the run is sealed (by the client, or by the open-run
 * timeout). Each step settles some calls: their edges are wired and they go on as a batch's would,
 * with plan-time failures applied in the order a batch would meet them.
 */
import type { CallInput } from '../calls.js';
import { callError, type CallError } from '../errors.js';
import { own } from '../limits.js';
import type { PlannedCall } from '../plan.js';
import type { StreamPlanner, StreamStep } from '../stream-plan.js';
import { isTerminal } from '../state.js';
import { arm, block, blockDescendantsOf, cancelCall, fail } from './progress.js';
import { appended, emit, isPending, markDirty, newCall, type ScheduledCall, type ScheduledRun, type SchedulerState } from './records.js';

/** Adds calls that arrived, in model order; `silent` (restore) rebuilds the wiring without events. */
export function appendTo(s: SchedulerState, run: ScheduledRun, calls: CallInput[], silent = false): void {
  const step = (run.stream as StreamPlanner).add(calls);
  for (const p of step.planned) {
    run.byId.set(p.id, p.index);
    const c = newCall(run, p);
    c.held = true;
    c.priority = own(run.estimates, c.tool) ?? 1;
    run.calls.push(c);
  }
  run.inputs.push(...calls);
  run.diagnostics.push(...step.diagnostics);
  if (!silent) emit(s, 'run.calls_added', run, undefined, { calls, edges: step.edges, diagnostics: step.diagnostics });
  applyStreamStep(s, run, step, silent);
}

/** Closes the run: calls still waiting on later ones are planned as a batch would plan them. */
export function sealRun(s: SchedulerState, run: ScheduledRun, silent: boolean, byTimeout = false): void {
  const step = (run.stream as StreamPlanner).seal();
  run.diagnostics.push(...step.diagnostics);
  if (!silent) {
    emit(s, 'run.sealed', run, undefined, {
      edges: step.edges,
      diagnostics: step.diagnostics,
      generations: step.plan?.generations ?? [],
      ...(byTimeout ? { reason: 'openRunTimeoutMs' as const } : {}),
    });
  }
  applyStreamStep(s, run, step, silent);
}

/** Wires the edges into the calls a stream step settled, and lets those calls go. */
function applyStreamStep(s: SchedulerState, run: ScheduledRun, step: StreamStep, silent: boolean): void {
  const doomedBy = new Map<number, ScheduledCall>();
  for (const e of step.edges) {
    const from = run.calls[run.byId.get(e.from) as number] as ScheduledCall;
    const to = run.calls[run.byId.get(e.to) as number] as ScheduledCall;
    if (e.kind === 'conflict') {
      if (from.released) continue;
      from.conflictSucc = appended(from.conflictSucc, to.index);
      to.conflictWaiting++;
      continue;
    }
    if (isTerminal(from.status) && from.status !== 'succeeded') {
      // Blocked by the predecessor whose failure a batch would have met first (`via`), if it is one.
      if (!doomedBy.has(to.index) || step.via.get(to.index) === from.id) doomedBy.set(to.index, from);
    } else if (from.status !== 'succeeded') to.dataWaiting++;
    // As in a batch (`wire`), a data or policy predecessor holds the call's release back until it is
    // released itself (see `release`): the hazard between the two may ride on this edge alone.
    if (!from.released) {
      from.dataSucc = appended(from.dataSucc, to.index);
      to.dataUnreleased++;
    }
  }
  markDirty(s, run);
  if (silent) {
    for (const p of step.settledPlans) {
      const c = run.calls[p.index] as ScheduledCall;
      c.held = false;
      c.refCalls = p.refCalls;
      c.hasRefs = p.hasRefs;
    }
    return;
  }
  const settled = step.settled.map((i) => run.calls[i] as ScheduledCall);
  const plans = new Map(step.settledPlans.map((p) => [p.index, p]));
  const planned = (c: ScheduledCall) => plans.get(c.index);
  for (const c of settled) {
    c.held = false;
    const p = planned(c) as PlannedCall;
    // The plan as of the step that settled it: the calls its references name are known now.
    c.refCalls = p.refCalls;
    c.hasRefs = p.hasRefs;
    if (p.review !== undefined) c.review = p.review;
    if (p.blockedBy && isPending(c)) block(s, run, c, p.blockedBy, false);
  }
  // Calls that arrive while a cancelled or failing-fast run waits for its aborted calls to end are
  // cancelled, as a batch's calls that had not started are (they would otherwise wait for nothing
  // and end blocked as a deadlock).
  if (run.cancelRequested || run.failFastBy !== undefined) {
    const reason = run.cancelRequested
      ? (run.cancelReason ?? callError('cancelled', 'the run was cancelled'))
      : callError('cancelled', `the run failed fast: ${run.failFastBy} failed`, { callId: run.failFastBy as string });
    for (const p of step.planned) {
      const c = run.calls[p.index] as ScheduledCall;
      if (isPending(c)) cancelCall(s, run, c, reason);
    }
  }
  // Plan-time failures take effect in original order, each blocking what depends on it at once, as
  // in a batch (`addCalls`): a call whose own error a batch would reach later than the failure of
  // a predecessor is blocked through that predecessor instead (`origin`, `via`). Then, as after a
  // batch's plan, the calls whose predecessors failed at run time already.
  const originOf = (c: ScheduledCall) => step.origin.get(c.index) ?? Infinity;
  const inherits = (c: ScheduledCall) => planned(c)?.error !== undefined && originOf(c) < c.index;
  const blockThrough = (c: ScheduledCall, from: ScheduledCall) => {
    // What a batch would have said: a call blocked by propagation passes its reason on (naming the
    // call that failed); otherwise the reason follows from the predecessor and the run's mode
    // (`dependency_failed`, `awaiting_replan`, or `dependency_blocked` after a cycle).
    const passOn = from.status === 'blocked' && from.error && from.error.code !== 'cycle' ? from.error : undefined;
    blockDescendantsOf(s, run, from, [c], passOn);
  };
  const inOrder = [...settled].sort((x, y) => originOf(x) - originOf(y) || x.index - y.index);
  for (const c of inOrder) {
    const p = planned(c);
    const from = doomedBy.get(c.index);
    const via = step.via.get(c.index);
    if (p?.error && isPending(c) && !inherits(c)) fail(s, run, c, p.error, true);
    else if (p?.blockedBy && c.status === 'blocked') blockDescendantsOf(s, run, c);
    // (A `via` settled in this step blocks it when its own turn comes.)
    else if (from && isPending(c) && (via === undefined || via === from.id)) blockThrough(c, from);
  }
  // Never left waiting: what no planned predecessor reached is blocked by the failed one, or fails.
  for (const c of inOrder) {
    if (!isPending(c)) continue;
    const from = doomedBy.get(c.index);
    if (from) blockThrough(c, from);
    else if (inherits(c)) fail(s, run, c, planned(c)?.error as CallError, true);
  }
  for (const c of settled) if (c.status === 'pending' && c.dataWaiting === 0 && !c.armed) arm(s, run, c);
}
