/**
 * How a run ends (DESIGN §6): once nothing of it runs, it either waits (a streamed run not sealed, a
 * call awaiting review or a retry), runs its compensations (fail-fast), or ends with the status its
 * calls and mode give it, through `transitionRun`. A run with pending calls that nothing can move
 * any more is deadlocked: they are blocked, and a diagnostic says what each waits on.
 */
import type { Diagnostic, RunStatus } from '../calls.js';
import { callError } from '../errors.js';
import type { EventPayloads } from '../events.js';
import { isTerminal, transitionRun } from '../state.js';
import { compensationQueue, startNextCompensation } from './compensation.js';
import { block } from './progress.js';
import { emit, isPending, writesSomething, type ScheduledCall, type ScheduledRun, type SchedulerState } from './records.js';

/** Looks at every run marked since the last time: each may have ended. */
export function finishRuns(s: SchedulerState): void {
  // A run marked again while this runs (after its flag was cleared) is looked at again, later.
  for (let i = 0; i < s.dirtyCount; i++) {
    const run = s.dirty[i] as ScheduledRun;
    s.dirty[i] = undefined;
    run.dirty = false;
    maybeEnd(s, run);
  }
  s.dirtyCount = 0;
}

function maybeEnd(s: SchedulerState, run: ScheduledRun): void {
  if (run.status !== 'running' || run.running > 0 || run.compensating !== undefined) return;
  if (run.stream && !run.stream.sealed && !run.cancelRequested && run.failFastBy === undefined) return;
  if (run.failFastBy !== undefined && run.compensations === undefined) {
    run.compensations = compensationQueue(run);
    startNextCompensation(s, run);
    if (run.compensating !== undefined) return;
  }
  const live = run.calls.filter((c) => !isTerminal(c.status));
  if (live.length > 0) {
    if (live.some((c) => c.status === 'ready' || c.status === 'awaiting_review' || c.retrying)) return;
    deadlock(s, run, live);
  }
  const status = finalStatus(run);
  transitionRun(run, status);
  if (status === 'needs_replan') {
    const waiting = run.calls.filter((c) => c.status === 'blocked' && c.error?.code === 'awaiting_replan').map((c) => c.id);
    const sideEffects = run.calls.filter((c) => c.status === 'succeeded' && c.manifest && writesSomething(c.manifest)).map((c) => c.id);
    const failed = run.replanFailures.map((c) => ({ callId: c.id, error: c.error as NonNullable<ScheduledCall['error']> }));
    emit(s, 'run.needs_replan', run, undefined, { replanContext: { failed, waiting, sideEffects } });
  }
  const completed: EventPayloads['run.completed'] = { status };
  if (run.cancelledAt !== undefined) completed.cancelledAt = run.cancelledAt;
  if (run.endDiagnostics.length > 0) completed.diagnostics = run.endDiagnostics.splice(0);
  emit(s, 'run.completed', run, undefined, completed);
}

/** Pending calls that nothing can move any more: block them and say what each waits on. */
function deadlock(s: SchedulerState, run: ScheduledRun, live: ScheduledCall[]): void {
  run.deadlocked = true;
  const waits = live.map((c) => {
    const on = run.calls.filter((p) => (p.dataSucc.includes(c.index) || p.conflictSucc.includes(c.index)) && !p.released).map((p) => p.id);
    return { callId: c.id, waitsOn: on };
  });
  const diagnostic: Diagnostic = {
    code: 'deadlock',
    message: `nothing can run: ${waits.map((w) => `${w.callId} waits on ${w.waitsOn.join(', ') || 'nothing'}`).join('; ')}`,
    callIds: live.map((c) => c.id),
  };
  run.diagnostics.push(diagnostic);
  run.endDiagnostics.push(diagnostic);
  for (const w of waits) {
    const c = run.calls[run.byId.get(w.callId) as number] as ScheduledCall;
    if (isPending(c))
      block(
        s,
        run,
        c,
        callError(
          'dependency_blocked',
          `${c.id} waits on ${w.waitsOn.join(', ')}, which cannot end`,
          w.waitsOn[0] ? { callId: w.waitsOn[0] } : {},
        ),
        false,
      );
  }
}

function finalStatus(run: ScheduledRun): RunStatus {
  if (run.cancelRequested) return 'cancelled';
  if (run.failFastBy !== undefined) return 'failed';
  if (run.deadlocked || run.calls.some((c) => c.status === 'blocked' && c.error?.code === 'cycle')) return 'deadlocked';
  if (run.replanFailures.length > 0) return 'needs_replan';
  // Counted, not filtered: two lists of a big run's calls to know two numbers.
  let counted = 0;
  let ok = 0;
  // Indexed: once per run, mostly unoptimized, where for…of made an iterator result per call.
  const calls = run.calls;
  const handed = run.handed.size > 0;
  for (let i = 0; i < calls.length; i++) {
    const c = calls[i] as ScheduledCall;
    if (c.superseded || (handed && run.handed.has(c.index))) continue;
    counted++;
    if (c.status === 'succeeded') ok++;
  }
  if (ok === counted) return 'succeeded';
  return ok === 0 ? 'failed' : 'partial';
}
