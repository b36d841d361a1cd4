/**
 * A virtual clock that drives the scheduler: each attempt takes the duration and outcome that a hook
 * decides (a script in tests, a recording in replay), and time jumps from one thing to the next.
 * Nothing here waits for real time, so a test of a 10-minute schedule runs in microseconds and asserts
 * exact start and end orders.
 *
 * Order at one instant: attempt ends (in the order their attempts started), then due timers, then the
 * actions scheduled with `at()` (in the order they were scheduled). An abort ends its attempt at once
 * with `cancelled`.
 */
import { callError } from './errors.js';
import type { CoreEvent } from './events.js';
import { MinHeap } from './heap.js';
import type { HookDecision, HookRequest } from './hooks.js';
import type { AttemptResult, Output, PermitRequest, Scheduler, StartAttempt } from './scheduler.js';

export interface SimulatedAttempt {
  durationMs: number;
  result: AttemptResult;
}

export interface SimulationHooks {
  /** Decides how long an attempt takes and how it ends. */
  attempt(start: StartAttempt, now: number): SimulatedAttempt;
  /**
   * Answers the hooks a call waits for (DESIGN §14): when, and with which decisions. Default: at once,
   * with none (the call goes on as if no hook matched).
   */
  hook?(request: HookRequest, now: number): { at: number; decisions: HookDecision[] };
  /**
   * A gated scheduler (DESIGN §12): when the cluster grants the permit a call asks for (replay: after
   * the wait the recording shows). Default: at once. Never refused.
   */
  permit?(request: PermitRequest, now: number): number;
  /** Sees every event as it is emitted (to schedule a review decision, say). */
  onEvent?(event: CoreEvent, sim: Simulation<Simulated>): void;
  /**
   * false: `events` and `starts` stay empty (`onEvent` still sees every event). For long runs whose
   * events are only counted, as the scheduler benchmark's 100k calls: keeping 300k events alive is
   * the harness's cost, not the scheduler's.
   */
  record?: boolean;
}

interface Pending {
  at: number;
  seq: number;
  kind: 'end' | 'action';
  start?: StartAttempt;
  result?: AttemptResult;
  action?: (now: number) => Output;
}

/** What the simulation drives: a `Scheduler`, or a front that stands for one (replay's). */
export type Simulated = Pick<Scheduler, 'nextWakeAt' | 'tick' | 'attemptEnded' | 'hookDecided' | 'permitGranted'>;

export interface StartRecord {
  at: number;
  start: StartAttempt;
}

export class Simulation<S extends Simulated = Scheduler> {
  now = 0;
  readonly events: CoreEvent[] = [];
  readonly starts: StartRecord[] = [];
  private readonly queue = new MinHeap<Pending>((a, b) => a.at - b.at || kindRank(a) - kindRank(b) || a.seq - b.seq);
  private seq = 0;
  /**
   * The attempt ends due, by call id: the one current per attempt (kind, run, call, attempt), which an
   * abort replaces. Keyed by the call id as it is, not by a string made of all four: making and
   * hashing that string for every attempt cost more than the rest of the bookkeeping here. Almost
   * always one attempt of a call id is in flight: then it is kept as it is, not in a list.
   */
  private readonly inFlight = new Map<string, Pending | Pending[]>();

  constructor(
    readonly scheduler: S,
    private readonly hooks: SimulationHooks,
  ) {}

  /** Runs `action` at virtual time `at` (or now, if that has passed). */
  at(at: number, action: (now: number) => Output): void {
    this.queue.push({ at: Math.max(at, this.now), seq: this.seq++, kind: 'action', action });
  }

  /** Runs until nothing is left to happen, or `maxSteps` steps (a guard against a scheduler bug). */
  run(maxSteps = 10_000_000): void {
    for (let steps = 0; steps < maxSteps; steps++) {
      const next = this.queue.peek();
      const wake = this.scheduler.nextWakeAt();
      if (!next && wake === undefined) return;
      const t = Math.max(this.now, Math.min(next?.at ?? Infinity, wake ?? Infinity));
      this.now = t;
      for (let p = this.queue.peek(); p && p.at <= t && p.kind === 'end'; p = this.queue.peek()) {
        this.queue.pop();
        const s = p.start as StartAttempt;
        if (!this.settle(p)) continue;
        const ended = {
          runId: s.runId,
          callId: s.callId,
          index: s.index,
          attempt: s.attempt,
          kind: s.kind,
          result: p.result as AttemptResult,
        };
        this.apply(this.scheduler.attemptEnded(t, ended));
      }
      const due = this.scheduler.nextWakeAt();
      if (due !== undefined && due <= t) this.apply(this.scheduler.tick(t));
      const action = this.queue.peek();
      if (action && action.at <= t && action.kind === 'action') {
        this.queue.pop();
        this.apply((action.action as (now: number) => Output)(t));
      }
    }
    throw new Error(`simulation did not settle after ${maxSteps} steps`);
  }

  /** Feeds a scheduler output back in: records events, starts attempts, ends aborted ones. */
  apply(out: Output): void {
    const record = this.hooks.record !== false;
    for (const e of out.events) {
      if (record) this.events.push(e);
      this.hooks.onEvent?.(e, this);
    }
    for (const s of out.starts) {
      if (record) this.starts.push({ at: this.now, start: s });
      const a = this.hooks.attempt(s, this.now);
      const p: Pending = { at: this.now + Math.max(0, a.durationMs), seq: this.seq++, kind: 'end', start: s, result: a.result };
      this.track(p);
      this.queue.push(p);
    }
    for (const h of out.hooks ?? []) {
      const a = this.hooks.hook?.(h, this.now) ?? { at: this.now, decisions: [] };
      this.at(a.at, (t) =>
        this.scheduler.hookDecided(t, { on: h.on, runId: h.runId, callId: h.callId, index: h.index, decisions: a.decisions }),
      );
    }
    for (const p of out.permits ?? []) {
      const at = this.hooks.permit?.(p, this.now) ?? this.now;
      this.at(at, (t) => this.scheduler.permitGranted(t, p.runId, p.callId) ?? NOTHING);
    }
    for (const a of out.aborts) {
      const due = this.inFlight.get(a.callId);
      const p = (Array.isArray(due) ? due : due ? [due] : []).find((x) => isAttempt(x.start as StartAttempt, 'call', a.runId, a.attempt));
      if (!p) continue;
      // As a live executor does (executors/deadline.ts): an aborted attempt ends `cancelled`, whatever
      // asked for it (the scheduler tells why, e.g. `superseded`, with the call's own error).
      const error =
        a.reason.code === 'cancelled'
          ? a.reason
          : callError('cancelled', a.reason.message, a.reason.details !== undefined ? { details: a.reason.details } : {});
      const ended: Pending = { ...p, at: this.now, seq: this.seq++, result: { ok: false, error } };
      this.track(ended);
      this.queue.push(ended);
    }
  }

  /** Makes `p` the end due of its attempt (replacing the one there was). */
  private track(p: Pending): void {
    const s = p.start as StartAttempt;
    const due = this.inFlight.get(s.callId);
    if (!due) {
      this.inFlight.set(s.callId, p);
      return;
    }
    const list = Array.isArray(due) ? due : [due];
    const i = list.findIndex((x) => isAttempt(x.start as StartAttempt, s.kind, s.runId, s.attempt));
    if (i >= 0) list[i] = p;
    else list.push(p);
    this.inFlight.set(s.callId, list.length === 1 ? (list[0] as Pending) : list);
  }

  /** Whether `p` is still the end due of its attempt; if so, the attempt is no longer in flight. */
  private settle(p: Pending): boolean {
    const s = p.start as StartAttempt;
    const due = this.inFlight.get(s.callId);
    if (due === p) {
      this.inFlight.delete(s.callId);
      return true;
    }
    if (!Array.isArray(due)) return false;
    const i = due.indexOf(p);
    if (i < 0) return false;
    due.splice(i, 1);
    if (due.length === 1) this.inFlight.set(s.callId, due[0] as Pending);
    return true;
  }
}

function isAttempt(s: StartAttempt, kind: StartAttempt['kind'], runId: string, attempt: number): boolean {
  return s.kind === kind && s.runId === runId && s.attempt === attempt;
}

/** What a grant does for a call that no longer waits for it. */
const NOTHING: Output = Object.freeze({ events: [], starts: [], aborts: [] }) as unknown as Output;

function kindRank(p: Pending): number {
  return p.kind === 'end' ? 0 : 1;
}
