/**
 * The live engine: the imperative shell around the pure scheduler. It owns the real clock, one timer,
 * the executors and AbortControllers, and a sink that makes events durable.
 *
 * Every scheduler output is handled in one order: number the events (gapless `seq` per run), hand
 * them to the sink (durable before anything else sees them), fold them into the run views, tell the
 * listeners, then abort and start attempts. So nothing is visible, and no dependent tool call starts,
 * before the state change behind it is stored.
 *
 * One engine holds many runs at once; limits apply across all of them.
 */
import { randomUUID } from 'node:crypto';
import type { CallInput, RunStatus } from '../core/calls.js';
import type { CoreEvent, RunEvent } from '../core/events.js';
import { Scheduler, type AttemptResult, type Output, type ReviewDecision, type StartAttempt } from '../core/scheduler.js';
import type { FailureMode } from '../core/tool.js';
import { RunProjection, type RunView } from '../core/view.js';
import type { Config } from '../config/types.js';
import { createExecutors } from '../executors/index.js';
import type { Executor } from '../executors/types.js';

/** Where events go before anything else sees them; a store makes them durable. */
export interface EventSink {
  append(events: readonly RunEvent[]): void;
}

export interface EngineOptions {
  config: Config;
  /** Runs the attempts; default: builtin, http and worker executors. */
  executor?: Executor;
  sink?: EventSink;
  /** Epoch milliseconds; default `Date.now`. */
  clock?: () => number;
  /** Keep ended runs' views in memory for this long (ms) so `get` and `wait` find them; default 10 min. */
  retainEndedMs?: number;
}

export interface SubmitRequest {
  runId?: string;
  tenant?: string;
  calls: readonly CallInput[];
  failure?: FailureMode;
  tags?: Record<string, string>;
  /** Stored with the run so that a repeated request finds it (`Idempotency-Key`). */
  idempotencyKey?: string;
}

export type RunListener = (event: RunEvent, view: RunView) => void;

interface LiveRun {
  projection: RunProjection;
  seq: number;
  listeners: Set<RunListener>;
  waiters: Set<() => void>;
  endedAt?: number;
}

const ENDED: ReadonlySet<RunStatus> = new Set(['succeeded', 'partial', 'failed', 'needs_replan', 'deadlocked', 'cancelled']);

export function isEnded(status: RunStatus): boolean {
  return ENDED.has(status);
}

export class Engine {
  readonly config: Config;
  private readonly scheduler: Scheduler;
  private readonly executor: Executor;
  private readonly ownsExecutor: boolean;
  private readonly sink: EventSink | undefined;
  private readonly clock: () => number;
  private readonly retainEndedMs: number;
  private readonly runs = new Map<string, LiveRun>();
  private readonly inflight = new Map<string, AbortController>();
  private readonly globalListeners = new Set<RunListener>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt: number | undefined;
  private closed = false;

  constructor(opts: EngineOptions) {
    this.config = opts.config;
    this.scheduler = new Scheduler({
      catalog: opts.config.catalog,
      policy: opts.config.policy,
      limits: opts.config.limits,
      defaults: opts.config.defaults,
    });
    this.ownsExecutor = !opts.executor;
    this.executor = opts.executor ?? createExecutors();
    this.sink = opts.sink;
    this.clock = opts.clock ?? Date.now;
    this.retainEndedMs = opts.retainEndedMs ?? 10 * 60_000;
  }

  /** Submits a batch; returns the run's view as it stands once the first calls have started. */
  submit(req: SubmitRequest): RunView {
    if (this.closed) throw new Error('the engine is closed');
    const runId = req.runId ?? newRunId();
    this.step((now) =>
      this.scheduler.submit(now, {
        runId,
        tenant: req.tenant ?? 'default',
        calls: req.calls,
        ...(req.failure ? { failure: req.failure } : {}),
        ...(req.tags ? { tags: req.tags } : {}),
        ...(req.idempotencyKey !== undefined ? { meta: { idempotencyKey: req.idempotencyKey } } : {}),
      }),
    );
    return this.get(runId) as RunView;
  }

  /**
   * Takes back a run from its stored events after a restart: finished calls keep their outcomes,
   * running idempotent calls run again, other running calls fail with `interrupted`.
   */
  restore(events: readonly RunEvent[]): RunView {
    const first = events[0] as RunEvent;
    const live: LiveRun = { projection: RunProjection.of(events), seq: (events[events.length - 1] as RunEvent).seq, listeners: new Set(), waiters: new Set() };
    this.runs.set(first.runId, live);
    this.step((now) => this.scheduler.restore(now, events));
    return live.projection.view;
  }

  /** Whether the engine holds this run (live, or ended recently). */
  has(runId: string): boolean {
    return this.runs.has(runId);
  }

  get(runId: string): RunView | undefined {
    return this.runs.get(runId)?.projection.view;
  }

  projection(runId: string): RunProjection | undefined {
    return this.runs.get(runId)?.projection;
  }

  /** Resolves with the run's view when it ends, or as it stands after `timeoutMs`. */
  wait(runId: string, timeoutMs = Infinity): Promise<RunView | undefined> {
    const live = this.runs.get(runId);
    if (!live) return Promise.resolve(undefined);
    if (isEnded(live.projection.view.status) || timeoutMs <= 0) return Promise.resolve(live.projection.view);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        if (timer) clearTimeout(timer);
        live.waiters.delete(done);
        resolve(live.projection.view);
      };
      live.waiters.add(done);
      if (Number.isFinite(timeoutMs)) timer = setTimeout(done, timeoutMs);
    });
  }

  cancel(runId: string): void {
    this.step((now) => this.scheduler.cancel(now, runId));
  }

  replan(runId: string, calls: readonly CallInput[]): RunView {
    this.step((now) => this.scheduler.replan(now, runId, calls));
    return this.get(runId) as RunView;
  }

  review(decision: ReviewDecision): RunView {
    this.step((now) => this.scheduler.decideReview(now, decision));
    return this.get(decision.runId) as RunView;
  }

  /** Listens to one run's events (after they are durable). Returns an unsubscribe function. */
  subscribe(runId: string, listener: RunListener): () => void {
    const live = this.runs.get(runId);
    if (!live) return () => {};
    live.listeners.add(listener);
    return () => live.listeners.delete(listener);
  }

  /** Listens to every run's events. */
  onEvent(listener: RunListener): () => void {
    this.globalListeners.add(listener);
    return () => this.globalListeners.delete(listener);
  }

  activeRuns(tenant?: string): number {
    return this.scheduler.activeRuns(tenant);
  }

  runningAttempts(): number {
    return this.inflight.size;
  }

  limitUsage() {
    return this.scheduler.limitUsage();
  }

  /** Stops starting anything; aborts running attempts unless `drain`, which waits for them first. */
  async close(opts: { drainMs?: number } = {}): Promise<void> {
    this.closed = true;
    if (opts.drainMs && this.inflight.size > 0) {
      const deadline = Date.now() + opts.drainMs;
      while (this.inflight.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    }
    if (this.timer) clearTimeout(this.timer);
    for (const c of this.inflight.values()) c.abort();
    if (this.ownsExecutor) await this.executor.close();
  }

  // ---- the loop ------------------------------------------------------------------------------

  private step(input: (now: number) => Output): void {
    this.handle(input(this.clock()));
  }

  private handle(out: Output): void {
    const numbered: RunEvent[] = out.events.map((e) => this.number(e));
    if (numbered.length > 0) this.sink?.append(numbered);
    for (const e of numbered) this.publish(e);
    for (const a of out.aborts) this.inflight.get(attemptKey(a.runId, a.callId, a.attempt, 'call'))?.abort(a.reason);
    if (!this.closed) for (const s of out.starts) this.launch(s);
    this.arm();
  }

  private number(e: CoreEvent): RunEvent {
    let live = this.runs.get(e.runId);
    if (!live) {
      live = { projection: new RunProjection(e), seq: 0, listeners: new Set(), waiters: new Set() };
      this.runs.set(e.runId, live);
    }
    live.seq += 1;
    return { seq: live.seq, ...e };
  }

  private publish(e: RunEvent): void {
    const live = this.runs.get(e.runId) as LiveRun;
    if (e.seq > 1) live.projection.apply(e);
    const view = live.projection.view;
    for (const l of live.listeners) safely(() => l(e, view));
    for (const l of this.globalListeners) safely(() => l(e, view));
    if (e.type === 'run.replanned') delete live.endedAt;
    if (e.type === 'run.completed') {
      live.endedAt = e.at;
      for (const w of [...live.waiters]) w();
      this.forgetOldRuns(e.at);
    }
  }

  private launch(s: StartAttempt): void {
    const key = attemptKey(s.runId, s.callId, s.attempt, s.kind);
    const controller = new AbortController();
    this.inflight.set(key, controller);
    const done = (result: AttemptResult) => {
      this.inflight.delete(key);
      if (this.closed && !this.ownsExecutor) return;
      this.step((now) => this.scheduler.attemptEnded(now, { runId: s.runId, callId: s.callId, attempt: s.attempt, kind: s.kind, result }));
    };
    this.executor
      .execute({ runId: s.runId, callId: s.callId, tool: s.tool, args: s.args, attempt: s.attempt, signal: controller.signal, timeoutMs: s.timeoutMs })
      .then(done, (err: unknown) => done({ ok: false, error: { code: 'tool_error', message: String(err) }, retryable: false }));
  }

  /** Keeps exactly one timer, for the scheduler's next wake-up. */
  private arm(): void {
    const at = this.scheduler.nextWakeAt();
    if (at === this.timerAt) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = at;
    if (at === undefined || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = undefined;
      this.step((now) => this.scheduler.tick(Math.max(now, at)));
    }, Math.max(0, at - this.clock()));
  }

  private forgetOldRuns(now: number): void {
    for (const [id, live] of this.runs) {
      const old = live.endedAt !== undefined && now - live.endedAt > this.retainEndedMs;
      if (old && live.listeners.size === 0 && live.projection.view.status !== 'needs_replan') {
        this.runs.delete(id);
        this.scheduler.evict(id);
      }
    }
  }
}

function attemptKey(runId: string, callId: string, attempt: number, kind: 'call' | 'compensation'): string {
  return `${kind}/${runId}/${callId}/${attempt}`;
}

function safely(f: () => void): void {
  try {
    f();
  } catch {
    // A listener cannot throw into the engine.
  }
}

export function newRunId(): string {
  return `run_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
}
