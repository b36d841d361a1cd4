/**
 * What the engine keeps of one attempt it runs: `Attempt`, the request an executor gets, its key, and
 * whether it starts before its `call.started` is stored.
 */
import type { StartAttempt } from '../core/scheduler.js';
import type { ExecuteRequest } from '../executors/types.js';

/**
 * A running attempt, as the executor gets it (an `ExecuteRequest`) and as the engine aborts it. Its
 * AbortController is made only when the executor first reads `signal`: an instant tool (the builtin
 * `echo`) never does, and an AbortController is one of the dearest things a launch would make. An abort
 * before that is kept, and the signal is born aborted with the same reason.
 */
export class Attempt implements ExecuteRequest {
  readonly runId: string;
  readonly callId: string;
  readonly tool: StartAttempt['tool'];
  readonly args: Record<string, unknown>;
  readonly attempt: number;
  readonly timeoutMs: number;
  readonly dispatch?: { token: string };
  /** Started early and still counted in `earlyRunning` (see `Engine.flushSoon`). */
  early = false;
  private controller: AbortController | undefined;
  private fired: { reason: unknown } | undefined;

  constructor(s: StartAttempt) {
    this.runId = s.runId;
    this.callId = s.callId;
    this.tool = s.tool;
    this.args = s.args;
    this.attempt = s.attempt;
    this.timeoutMs = s.timeoutMs;
    if (s.dispatch !== undefined) this.dispatch = s.dispatch;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.fired) this.controller.abort(this.fired.reason);
    }
    return this.controller.signal;
  }

  aborted(): boolean {
    return this.fired !== undefined;
  }

  abort(reason?: unknown): void {
    if (this.fired) return;
    this.fired = { reason };
    this.controller?.abort(reason);
  }
}

/**
 * Whether a grouped submission starts this attempt before its `call.started` is stored: a call (not a
 * compensation) of the run just submitted, whose tool is idempotent. Such a call has no predecessor in
 * its run yet (it is ready at submission), and a crash before the commit loses nothing (the run was
 * never accepted; once it is, a running idempotent call is re-run on restart). A non-idempotent call
 * keeps write-ahead: its effect must never happen without its `call.started` stored first.
 */
export function startsEarly(s: StartAttempt, runId: string): boolean {
  return s.kind === 'call' && s.runId === runId && s.tool.idempotent;
}

/** The key of an attempt among those in flight. */
export function attemptKey(runId: string, callId: string, attempt: number, kind: 'call' | 'compensation'): string {
  return `${kind}/${runId}/${callId}/${attempt}`;
}
