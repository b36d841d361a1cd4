/**
 * Shared plumbing for executors: one AbortSignal that fires on the request's abort or on the attempt's
 * time budget (remembering which came first), and the ExecuteResults for both outcomes.
 */
import { callError } from '../core/errors.js';
import type { ExecuteRequest, ExecuteResult } from './types.js';

export type AbortCause = 'cancelled' | 'timeout';

export interface Deadline {
  /** Aborts on the request's signal or when the budget runs out. */
  readonly signal: AbortSignal;
  /** Which of the two fired first, or null while neither has. */
  cause(): AbortCause | null;
  /** The budget that applies, in ms (Infinity for none). */
  readonly timeoutMs: number;
  /** Clears the timer and the listener on the request's signal. */
  dispose(): void;
}

const MAX_TIMER_MS = 2 ** 31 - 1;

/** The attempt's budget: the request's `timeoutMs`, else the tool's, else none. */
export function budgetOf(request: ExecuteRequest): number {
  if (isBudget(request.timeoutMs)) return request.timeoutMs;
  const ms = request.tool?.timeoutMs;
  return isBudget(ms) ? ms : Infinity;
}

function isBudget(ms: unknown): ms is number {
  return typeof ms === 'number' && Number.isFinite(ms) && ms > 0;
}

export function deadline(request: ExecuteRequest): Deadline {
  const controller = new AbortController();
  const timeoutMs = budgetOf(request);
  let cause: AbortCause | null = null;
  const fire = (c: AbortCause) => {
    if (cause !== null) return;
    cause = c;
    controller.abort(c === 'timeout' ? new Error(`timed out after ${timeoutMs} ms`) : request.signal.reason);
  };
  const onAbort = () => fire('cancelled');
  let timer: NodeJS.Timeout | undefined;
  if (request.signal.aborted) fire('cancelled');
  else {
    request.signal.addEventListener('abort', onAbort, { once: true });
    if (timeoutMs !== Infinity) timer = setTimeout(() => fire('timeout'), Math.min(timeoutMs, MAX_TIMER_MS));
  }
  return {
    signal: controller.signal,
    cause: () => cause,
    timeoutMs,
    dispose() {
      if (timer) clearTimeout(timer);
      request.signal.removeEventListener('abort', onAbort);
    },
  };
}

export function cancelledResult(message = 'the call was cancelled'): ExecuteResult {
  return { ok: false, error: callError('cancelled', message), retryable: false };
}

export function timeoutResult(timeoutMs: number): ExecuteResult {
  return { ok: false, error: callError('timeout', `timed out after ${timeoutMs} ms`), retryable: true };
}

export function abortResult(d: Deadline): ExecuteResult {
  return d.cause() === 'timeout' ? timeoutResult(d.timeoutMs) : cancelledResult();
}

/** A retryable `tool_error` for a request that was sent and got no answer (see `ExecuteResult.unanswered`). */
export function lostAnswer(message: string, details?: unknown): ExecuteResult {
  return {
    ok: false,
    error: callError('tool_error', message, details === undefined ? {} : { details }),
    retryable: true,
    unanswered: true,
  };
}

export function toolError(message: string, retryable: boolean, details?: unknown, retryAfterMs?: number, pauseMs?: number): ExecuteResult {
  const error = callError('tool_error', message, details === undefined ? {} : { details });
  const out: ExecuteResult = retryAfterMs === undefined ? { ok: false, error, retryable } : { ok: false, error, retryable, retryAfterMs };
  // Backpressure (DESIGN §4): the tool asked to be left alone this long.
  if (pauseMs !== undefined && !out.ok) out.pauseMs = pauseMs;
  return out;
}

export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return typeof err === 'string' ? err : String(err);
}
