/**
 * Restore (DESIGN §8): takes a run back from its persisted events after a restart. Calls keep the
 * outcome their events gave them, reached through the same `transition` as in a live run; a call
 * that was running when the process died runs again if its tool is idempotent, and otherwise fails
 * with `interrupted` (its outcome is unknown) and the run's mode applies. A run that had been
 * cancelled or was failing fast only finishes stopping. Only what happens from here on is emitted.
 */
import type { CallStatus, RunStatus } from '../calls.js';
import { callError, type CallError } from '../errors.js';
import { checkEvent, InvalidEvent } from '../event-schema.js';
import type { CoreEvent } from '../events.js';
import { callPath, isTerminal, transition, transitionRun } from '../state.js';
import { StreamPlanner } from '../stream-plan.js';
import { RunProjection } from '../view.js';
import { SchedulerError } from './api.js';
import { lostAttempt } from '../outcome.js';
import { compensationQueue, startNextCompensation } from './compensation.js';
import { maybeReady } from './dispatch.js';
import { wire } from './planning.js';
import { applyFailureMode, arm, cancelCall, fail, failureModeOf, release, setResolved, stopRun } from './progress.js';
import { emit, markDirty, newRun, releasable, type ScheduledCall, type SchedulerState } from './records.js';
import { appendTo, sealRun } from './streamed.js';
import { pausesFor } from './pauses.js';

/** Rebuilds the run of `events` (its whole log, from `run.created`); the caller flushes. */
export function restoreRun(s: SchedulerState, events: readonly CoreEvent[]): void {
  // Read back from a store: every event is checked against the schema before any is believed.
  events.forEach((e, i) => {
    try {
      checkEvent(e);
    } catch (err) {
      if (err instanceof InvalidEvent) throw new InvalidEvent([`event ${i + 1} of the log: ${err.message}`]);
      throw err;
    }
  });
  const created = events[0] as CoreEvent;
  if (created.type !== 'run.created') throw new SchedulerError('conflict', `run ${created.runId}: the first event is not run.created`);
  if (s.runs.has(created.runId)) throw new SchedulerError('conflict', `run ${created.runId} exists already`);
  const d = created.data;
  const run = newRun(s, created.runId, d.tenant, d.failure, d.estimates ?? {});
  if (d.concurrencyKey !== undefined) run.concurrencyKey = d.concurrencyKey;
  if (d.priority !== undefined) run.priority = d.priority;
  if (d.held && !events.some((e) => e.type === 'run.started')) {
    // Still held behind an earlier run of its concurrency key (DESIGN §4): nothing of it is planned.
    run.status = 'queued';
    run.heldCalls = d.calls;
    pausesFor(s, run);
    return;
  }
  // A streamed run (DESIGN §10) is planned again step by step, as its calls arrived and as it was
  // sealed, silently: the wiring is rebuilt, the outcomes come from the events below.
  if (d.open) run.stream = new StreamPlanner(run.tenant, s.opts.catalog, s.opts.policy);
  else wire(s, run, d.calls);
  const view = RunProjection.of(events).view;
  const callOf = (callId: string | undefined) => run.calls[run.byId.get(callId as string) as number] as ScheduledCall;
  let pendingFailures: ScheduledCall[] = [];
  let over: RunStatus | undefined;
  for (const e of events) {
    switch (e.type) {
      case 'run.calls_added':
        if (run.stream) appendTo(s, run, e.data.calls, true);
        break;
      case 'run.sealed':
        if (run.stream) sealRun(s, run, true);
        break;
      case 'run.replanned':
        for (const f of pendingFailures) run.handed.add(f.index);
        pendingFailures = [];
        over = undefined;
        wire(s, run, e.data.calls);
        break;
      case 'run.completed':
        over = e.data.status;
        break;
      case 'call.cancelled':
        if (e.data.reason.code === 'cancelled' && e.data.reason.callId === undefined) {
          run.cancelRequested = true;
          run.cancelledAt ??= e.at;
        } else if (e.data.reason.code === 'superseded' && supersedingRun(e.data.reason) !== undefined) {
          // Cancelled for a newer run of its concurrency key (DESIGN §4).
          run.cancelRequested = true;
          run.cancelledAt ??= e.at;
          run.cancelReason ??= e.data.reason;
        }
        break;
      case 'call.failed': {
        const c = callOf(e.callId);
        const mode = failureModeOf(run, c);
        if (mode === 'fail_fast' && !run.cancelRequested) run.failFastBy ??= c.id;
        else if (mode === 'replan' && run.failFastBy === undefined) pendingFailures.push(c);
        break;
      }
      case 'call.compensated':
        (run.compensations ??= []).push(callOf(e.callId).index);
        break;
      case 'call.hook':
        // Its before_call hooks decided: they are not asked again, and their args stand.
        if (e.data.on === 'before_call') {
          const c = callOf(e.callId);
          c.hooked = true;
          if (e.data.args) c.hookArgs = e.data.args;
        }
        break;
      default:
        break;
    }
  }
  run.replanFailures = pendingFailures;
  const interrupted: ScheduledCall[] = [];
  for (const v of view.calls) {
    const c = callOf(v.id);
    c.attempts = v.attempts;
    if (v.resolvedArgs) setResolved(run, c, v.resolvedArgs);
    if (isTerminal(v.status)) {
      moveTo(c, v.status);
      c.armed = true;
      if (v.status === 'succeeded') c.output = v.output;
      else c.error = (v.error ?? v.blockedBy) as CallError;
      c.superseded = v.error?.code === 'superseded';
      c.endedAt = v.endedAt ? Date.parse(v.endedAt) : s.now;
    } else if (v.status === 'awaiting_review') {
      moveTo(c, 'awaiting_review');
      c.armed = true;
    } else if (v.status === 'running') interrupted.push(c);
    c.reviewed = v.review?.decision === 'approve' || v.review?.decision === 'edit';
  }
  for (const c of run.calls) if (c.status === 'succeeded') for (const i of c.dataSucc) (run.calls[i] as ScheduledCall).dataWaiting--;
  for (const c of run.calls) if (isTerminal(c.status) && releasable(c)) release(s, run, c);
  let compensate = false;
  if (run.failFastBy !== undefined && run.compensations) {
    // Compensations already reported stay done; the rest still run, newest first.
    const done = new Set(run.compensations);
    run.compensations = compensationQueue(run).filter((i) => !done.has(i));
    compensate = run.compensations.length > 0;
  }
  if (over !== undefined) {
    transitionRun(run, over);
    return;
  }
  // Taken back while it ran: what follows is this scheduler's (a recording resumes its replay here).
  emit(s, 'run.resumed', run, undefined, {});
  // Pauses in force now (this replica learned them when it connected): the recording keeps them.
  pausesFor(s, run);
  // An open run that was not sealed is still sealed by the server at its open-run timeout, counted
  // from its creation (right away when that has passed).
  if (run.stream && !run.stream.sealed)
    s.timers.push({ at: created.at + s.opts.defaults.openRunTimeoutMs, seq: s.timerSeq++, runId: run.id, seal: true });
  const stopping = run.cancelRequested || run.failFastBy !== undefined;
  if (stopping) {
    for (const c of interrupted)
      cancelCall(s, run, c, run.cancelReason ?? callError('cancelled', 'the run was stopping when the service restarted'));
  } else {
    // Every non-idempotent call that was running fails first, all of them with `outcome_unknown` (each
    // one's outcome is unknown), and only then does the run's mode apply to them: a fail-fast from
    // the first must not turn the others into `cancelled`, nor re-arm an idempotent call it stopped.
    const lost = interrupted.filter((c) => !c.manifest?.idempotent);
    for (const c of lost) fail(s, run, c, lostAttempt(c.id), false);
    for (const c of lost) applyFailureMode(s, run, c);
    // Running idempotent calls are `pending` again (not armed): they run again below, unless that
    // fail-fast has just cancelled them with the rest of the run.
  }
  if (stopping)
    stopRun(
      s,
      run,
      run.cancelReason ??
        callError(
          'cancelled',
          run.cancelRequested ? 'the run was cancelled' : `the run failed fast: ${run.failFastBy} failed`,
          run.cancelRequested ? {} : { callId: run.failFastBy as string },
        ),
    );
  for (const c of run.calls) {
    if (c.status !== 'pending' || c.dataWaiting > 0) continue;
    if (c.reviewed) {
      // Reviewed (and maybe edited) already: keep the args the reviewer saw.
      c.armed = true;
      maybeReady(s, run, c);
    } else if (!c.armed) arm(s, run, c);
  }
  if (compensate) startNextCompensation(s, run);
  markDirty(s, run);
}

/** Brings a restored call (still `pending`) to the status its events gave it, move by legal move. */
function moveTo(c: ScheduledCall, to: CallStatus): void {
  for (const step of callPath(c.status, to) ?? [to]) transition(c, step);
}

/** The newer run named by a `superseded` reason of a run cancelled for its concurrency key. */
function supersedingRun(reason: CallError): string | undefined {
  const d = reason.details as { runId?: unknown } | undefined;
  return typeof d?.runId === 'string' ? d.runId : undefined;
}
