/**
 * A run that cannot be recovered (DESIGN §4): when a restart cannot take a run back from its events
 * (a log the scheduler does not understand, a bug), the run must not stop the server from starting.
 * It ends `failed` instead: every call not yet ended fails with `unrecoverable`, and `run.completed`
 * carries a diagnostic saying why. Its events are kept; these come after them.
 */
import type { Diagnostic } from './calls.js';
import { callError } from './errors.js';
import type { CoreEvent, RunEvent } from './events.js';
import { isTerminal } from './state.js';
import { RunProjection } from './view.js';

/** The events that end a run given up on, numbered after its last stored one. */
export function unrecoverableEnd(events: readonly RunEvent[], reason: string, now: number): RunEvent[] {
  const last = events[events.length - 1];
  if (!last) return [];
  const runId = last.runId;
  const message = `the run could not be recovered after a restart: ${reason}`;
  const out: CoreEvent[] = [];
  let calls: { id: string; status: Parameters<typeof isTerminal>[0] }[] = [];
  try {
    calls = RunProjection.of(events).view.calls;
  } catch {
    // Not even a view can be made of the log: the run ends, its calls as they were.
  }
  for (const c of calls) {
    if (isTerminal(c.status)) continue;
    out.push({ type: 'call.failed', runId, callId: c.id, at: now, data: { error: callError('unrecoverable', `${c.id}: ${message}`) } });
  }
  const diagnostic: Diagnostic = { code: 'unrecoverable', message };
  out.push({ type: 'run.completed', runId, at: now, data: { status: 'failed', diagnostics: [diagnostic] } });
  return out.map((e, i) => ({ ...e, seq: last.seq + 1 + i }));
}
