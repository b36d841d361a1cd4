/**
 * The engine's attempts in flight: started on the executor, not ended yet. Each is keyed by run, call,
 * attempt and kind; one that is taken out (its run refused by the store, or abandoned) is the engine's
 * no more, and its end is ignored when it comes. Attempts started early (before their submission is
 * stored, see `startsEarly`) are counted, so that the engine knows when all of them have ended.
 *
 * `refuseRun`: what becomes of the attempts and the scheduler's state of a run the store refused.
 */
import { callError } from '../core/errors.js';
import type { AttemptResult, Output, Scheduler, StartAttempt } from '../core/scheduler.js';
import type { Executor } from '../executors/types.js';
import { Attempt, attemptKey } from './attempt.js';
import { merge, strip } from './outputs.js';

/** Told of an attempt that ended while still in flight; `wasEarly`: it was started early. */
export type AttemptDone = (s: StartAttempt, result: AttemptResult, wasEarly: boolean) => void;

export class InFlight {
  private readonly map = new Map<string, Attempt>();
  /** Attempts started early that have not ended. */
  early = 0;

  constructor(
    private readonly executor: Executor,
    private readonly done: AttemptDone,
  ) {}

  get size(): number {
    return this.map.size;
  }

  /** Starts an attempt; `early`: before its submission is stored. */
  launch(s: StartAttempt, early = false): void {
    const key = attemptKey(s.runId, s.callId, s.attempt, s.kind);
    const attempt = new Attempt(s);
    if (early) {
      attempt.early = true;
      this.early++;
    }
    this.map.set(key, attempt);
    const ended = (result: AttemptResult) => {
      // Not ours any more (see `take`).
      if (this.map.get(key) !== attempt) return;
      this.map.delete(key);
      const wasEarly = attempt.early;
      this.leaveEarly(attempt);
      this.done(s, result, wasEarly);
    };
    this.executor
      .execute(attempt)
      .then(ended, (err: unknown) => ended({ ok: false, error: { code: 'tool_error', message: String(err) }, retryable: false }));
  }

  /** Aborts a call's attempt (it ends as its executor reports it). */
  abort(runId: string, callId: string, attempt: number, reason: unknown): void {
    this.map.get(attemptKey(runId, callId, attempt, 'call'))?.abort(reason);
  }

  /** Takes an attempt out and aborts it: its end will be ignored. False when it was not running (never launched, or ended). */
  take(s: StartAttempt, reason: unknown): boolean {
    const key = attemptKey(s.runId, s.callId, s.attempt, s.kind);
    const attempt = this.map.get(key);
    if (!attempt) return false;
    attempt.abort(reason);
    this.map.delete(key);
    this.leaveEarly(attempt);
    return true;
  }

  /** Aborts every attempt; `forget`: and takes them all out (their ends ignored). */
  abortAll(reason?: unknown, forget = false): void {
    const all = [...this.map.values()];
    if (forget) {
      this.map.clear();
      this.early = 0;
    }
    for (const a of all) a.abort(reason);
  }

  private leaveEarly(attempt: Attempt): void {
    if (!attempt.early) return;
    attempt.early = false;
    this.early--;
  }
}

/**
 * A run whose submission the store refused (see `Engine.disown`): its events, starts and aborts leave
 * the commits still in hand (`held`), and the attempts it started are taken out. The scheduler lets a
 * run go only once it has ended, so it is cancelled there, and every attempt it counts as running ends
 * as cancelled. Returns what that changes for other runs (a limit slot freed, say), to be queued.
 */
export function refuseRun<E extends { runId: string }>(
  scheduler: Scheduler,
  now: number,
  runId: string,
  held: readonly {
    events: E[];
    starts: readonly StartAttempt[];
    aborts: readonly Output['aborts'][number][];
    early?: readonly StartAttempt[];
  }[],
  inflight: InFlight,
  /** Gives back the permit of a start taken out (it never ran, or its end is ignored). */
  release?: (s: StartAttempt) => void,
): Output {
  const reason = callError('cancelled', `the store refused run ${runId}`);
  const refused: AttemptResult = { ok: false, error: reason, retryable: false };
  // An early attempt that ended already gave its permit back as it ended; the others (still running,
  // or never launched) give it back here.
  const early = new Set(held.flatMap((q) => q.early ?? []));
  const toEnd: StartAttempt[] = [];
  for (const q of held) toEnd.push(...strip(q, runId));
  for (const s of toEnd) {
    const running = inflight.take(s, reason);
    if (s.permit && (running || !early.has(s))) release?.(s);
  }
  const rest: Output = { events: [], starts: [], aborts: [] };
  const keep = (out: Output) => {
    for (const s of strip(out, runId)) {
      toEnd.push(s);
      if (s.permit) release?.(s);
    }
    merge(rest, out);
  };
  keep(scheduler.cancel(now, runId));
  for (let s = toEnd.shift(); s; s = toEnd.shift()) {
    keep(scheduler.attemptEnded(now, { runId, callId: s.callId, index: s.index, attempt: s.attempt, kind: s.kind, result: refused }));
  }
  scheduler.evict(runId);
  return rest;
}
