/**
 * How an attempt ended, as recorded (DESIGN §4 Timeouts): an attempt of a non-idempotent tool that
 * was sent and got no answer (it timed out, its connection was lost, or the process that ran it died)
 * fails `outcome_unknown`, whatever executor ran it: whether it took effect is unknown, which the model
 * and the operator must be told, and it is not run again. An idempotent tool's attempt keeps its error
 * (`timeout`, a retryable `tool_error`), so it is retried as before.
 *
 * The one place that decides it: the scheduler passes every attempt's end through `attemptOutcome`,
 * and recovery (a restart, a takeover) uses `lostAttempt` for a call that was running.
 */
import { callError, type CallError } from './errors.js';

/** An attempt's failure as an executor reports it. */
export interface AttemptFailure {
  ok: false;
  error: CallError;
  retryable?: boolean;
  retryAfterMs?: number;
  /**
   * Backpressure (DESIGN §4): the tool asked to be left alone this long (an HTTP 429, a 503 with
   * Retry-After, an MCP error result with `_meta.retryAfterMs`): the tool, or its keyed group, pauses.
   */
  pauseMs?: number;
  /** The HTTP status that asked for the pause (429, 503), if any. */
  pauseStatus?: number;
  /** The request was sent and no answer came (the connection was lost after sending). A timeout says so by its code. */
  unanswered?: true;
}

/** Whether a failure means the request went out and nothing came back. */
export function wasUnanswered(r: AttemptFailure): boolean {
  return r.unanswered === true || r.error.code === 'timeout' || r.error.code === 'interrupted';
}

/** The failure to record for an attempt of a tool (`idempotent` or not). */
export function attemptOutcome<R extends AttemptFailure>(r: R, idempotent: boolean, callId: string): R | AttemptFailure {
  if (idempotent || !wasUnanswered(r)) return r;
  return {
    ok: false,
    error: callError('outcome_unknown', `${callId} was sent and got no answer (${r.error.message}); whether it took effect is unknown`, {
      details: { cause: r.error.code, ...(r.error.details !== undefined ? { causeDetails: r.error.details } : {}) },
    }),
    retryable: false,
  };
}

/** The error of a non-idempotent call that was running when its process died (a restart, a takeover). */
export function lostAttempt(callId: string): CallError {
  return callError(
    'outcome_unknown',
    `${callId} was running when the service stopped and got no answer; whether it took effect is unknown`,
    { details: { cause: 'interrupted' } },
  );
}
