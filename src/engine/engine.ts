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
import { Scheduler, SchedulerError, type AttemptEnded, type AttemptResult, type Output, type ReviewDecision, type StartAttempt } from '../core/scheduler.js';
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
  /** A streamed run: more calls come with `append` until `seal` (DESIGN §10). */
  open?: boolean;
}

/** A streamed run as the library offers it: add calls as the model writes them, then seal. */
export interface OpenRun {
  readonly id: string;
  /** Adds calls in model order; each starts as soon as it is safe. */
  add(...calls: CallInput[]): RunView;
  /** No more calls: what still waits on a later call is planned now. */
  seal(): RunView;
  /** Resolves with the run when it ends. */
  done(): Promise<RunView>;
}

export type RunListener = (event: RunEvent, view: RunView) => void;

interface LiveRun {
  projection: RunProjection;
  seq: number;
  listeners: Set<RunListener>;
  waiters: Set<() => void>;
  endedAt?: number;
}

interface EndedEntry {
  runId: string;
  endedAt: number;
  /** When to look at it: once `retainEndedMs` has passed. */
  due: number;
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
  /** Attempts that ended and wait for the next group commit (see flushEnded). */
  private readonly ended: AttemptEnded[] = [];
  private readonly globalListeners = new Set<RunListener>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt: number | undefined;
  /** Set by `close`: no new runs. Running calls still finish, and what they unblock still starts. */
  private accepting = true;
  /** Set once `close` has drained: nothing starts, and attempt results are no longer recorded. */
  private closed = false;
  private idle: (() => void) | undefined;
  /** Ended runs, in the order they ended, from `endedHead` on (see `forgetOldRuns`). */
  private readonly endedRuns: EndedEntry[] = [];
  private endedHead = 0;

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
    if (!this.accepting) throw new Error('the engine is closed');
    const runId = req.runId ?? newRunId();
    this.step((now) =>
      this.scheduler.submit(now, {
        runId,
        tenant: req.tenant ?? 'default',
        calls: req.calls,
        ...(req.failure ? { failure: req.failure } : {}),
        ...(req.tags ? { tags: req.tags } : {}),
        ...(req.idempotencyKey !== undefined ? { meta: { idempotencyKey: req.idempotencyKey } } : {}),
        ...(req.open ? { open: true } : {}),
      }),
    );
    return this.get(runId) as RunView;
  }

  /** Appends calls to an open run. */
  append(runId: string, calls: readonly CallInput[]): RunView {
    const ended = this.endedRun(runId);
    if (ended) throw new SchedulerError('conflict', `run ${runId} has ended (${ended.status}); it takes no more calls`);
    this.step((now) => this.scheduler.append(now, runId, calls));
    return this.get(runId) as RunView;
  }

  /** Seals an open run. */
  seal(runId: string): RunView {
    const ended = this.endedRun(runId);
    if (ended) return ended;
    this.step((now) => this.scheduler.seal(now, runId));
    return this.get(runId) as RunView;
  }

  /**
   * Opens a streamed run.
   *
   * @example
   * const run = engine.open();
   * run.add({ id: 'a', tool: 'read_file', args: { path: '/x' } }); // starts now
   * run.add({ id: 'b', tool: 'write_file', args: { path: '/x', content: '${a.output.path}' } });
   * run.seal();
   * const result = await run.done();
   */
  open(req: Omit<SubmitRequest, 'open' | 'calls'> & { calls?: CallInput[] } = {}): OpenRun {
    const view = this.submit({ ...req, calls: req.calls ?? [], open: true });
    const id = view.id;
    return {
      id,
      add: (...calls) => this.append(id, calls),
      seal: () => this.seal(id),
      done: async () => (await this.wait(id)) as RunView,
    };
  }

  /**
   * Takes back a run from its stored events after a restart: finished calls keep their outcomes,
   * running idempotent calls run again, other running calls fail with `interrupted`.
   */
  restore(events: readonly RunEvent[]): RunView {
    const first = events[0];
    if (!first) throw new Error('cannot restore a run from no events');
    const live: LiveRun = { projection: RunProjection.of(events), seq: (events[events.length - 1] as RunEvent).seq, listeners: new Set(), waiters: new Set() };
    this.runs.set(first.runId, live);
    let out: Output;
    try {
      out = this.scheduler.restore(this.clock(), events);
    } catch (e) {
      // Nothing of the run was emitted or started: forget it, so the engine does not hold a run its
      // scheduler does not know.
      this.runs.delete(first.runId);
      throw new Error(`cannot resume run ${first.runId}: ${(e as Error).message}`, { cause: e });
    }
    this.handle(out);
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

  /** Cancels a run; nothing happens to a run that has ended. */
  cancel(runId: string): void {
    if (this.endedRun(runId)) return;
    this.step((now) => this.scheduler.cancel(now, runId));
  }

  replan(runId: string, calls: readonly CallInput[]): RunView {
    const ended = this.endedRun(runId);
    if (ended) throw new SchedulerError('conflict', `run ${runId} is ${ended.status}, not needs_replan`);
    this.step((now) => this.scheduler.replan(now, runId, calls));
    return this.get(runId) as RunView;
  }

  review(decision: ReviewDecision): RunView {
    const ended = this.endedRun(decision.runId);
    if (ended) throw new SchedulerError('conflict', `run ${decision.runId} has ended (${ended.status}); call ${decision.callId} awaits no review`);
    this.step((now) => this.scheduler.decideReview(now, decision));
    return this.get(decision.runId) as RunView;
  }

  /**
   * The view of a run that has ended for good (not needs_replan): such a run takes no more input, and
   * the scheduler has already let it go (see `publish`), so the engine answers for it.
   */
  private endedRun(runId: string): RunView | undefined {
    const view = this.get(runId);
    return view && isEnded(view.status) && view.status !== 'needs_replan' ? view : undefined;
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

  /**
   * Stops taking new runs; with `drainMs`, lets running attempts finish for up to that long (their
   * results are recorded, and calls they unblock still start, so every stored `call.started` is a
   * real attempt); then aborts what still runs *without recording its end*. Those calls stay
   * `running` in the store, and the next start resumes them like after a crash (DESIGN §8): an
   * idempotent call runs again, another fails with `interrupted`. Recording the abort instead would
   * fail (or cancel) calls and runs that the restart should have resumed.
   */
  async close(opts: { drainMs?: number } = {}): Promise<void> {
    this.accepting = false;
    if (opts.drainMs && this.inflight.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, opts.drainMs);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.idle = done;
      });
      this.idle = undefined;
    }
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    // Nothing will change any more: whoever waits gets the run as it stands now (a pending wait's
    // timer would otherwise keep the process alive for up to its whole timeout).
    for (const live of this.runs.values()) for (const w of [...live.waiters]) w();
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
    // Starts before aborts: in a group commit a later step may abort what an earlier one started.
    if (!this.closed) for (const s of out.starts) this.launch(s);
    for (const a of out.aborts) this.inflight.get(attemptKey(a.runId, a.callId, a.attempt, 'call'))?.abort(a.reason);
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
      // The scheduler needs an ended run no more (it keeps a needs_replan one): dropping it at once
      // keeps its dispatch loop over live runs only. The view stays here for `retainEndedMs`.
      this.scheduler.evict(e.runId);
      this.endedRuns.push({ runId: e.runId, endedAt: e.at, due: e.at + this.retainEndedMs });
      this.forgetOldRuns(e.at);
    }
  }

  private launch(s: StartAttempt): void {
    const key = attemptKey(s.runId, s.callId, s.attempt, s.kind);
    const controller = new AbortController();
    this.inflight.set(key, controller);
    const done = (result: AttemptResult) => {
      this.inflight.delete(key);
      if (this.closed) return;
      this.ended.push({ runId: s.runId, callId: s.callId, attempt: s.attempt, kind: s.kind, result });
      if (this.ended.length === 1) setImmediate(() => this.flushEnded());
    };
    this.executor
      .execute({ runId: s.runId, callId: s.callId, tool: s.tool, args: s.args, attempt: s.attempt, signal: controller.signal, timeoutMs: s.timeoutMs })
      .then(done, (err: unknown) => done({ ok: false, error: { code: 'tool_error', message: String(err) }, retryable: false }));
  }

  /**
   * Group commit: the attempts that ended since the last turn of the event loop go through the
   * scheduler together, and their events are stored in one transaction before any of them is
   * published or any dependent call starts. Durability then costs one commit per turn, not per call.
   */
  private flushEnded(): void {
    const ends = this.ended.splice(0);
    if (this.closed || ends.length === 0) return;
    const now = this.clock();
    const merged: Output = { events: [], starts: [], aborts: [] };
    for (const e of ends) {
      const out = this.scheduler.attemptEnded(now, e);
      merged.events.push(...out.events);
      merged.starts.push(...out.starts);
      merged.aborts.push(...out.aborts);
    }
    this.handle(merged);
    if (this.inflight.size === 0) this.idle?.();
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

  /**
   * Forgets the views of runs that ended more than `retainEndedMs` ago, oldest first, from a queue in
   * the order they ended (so the cost is per forgotten run, not a scan of every run per completion).
   * A run with listeners is looked at again a period later; a needs_replan run stays until a replan,
   * after which it is queued again when it ends again.
   */
  private forgetOldRuns(now: number): void {
    const q = this.endedRuns;
    while (this.endedHead < q.length) {
      const entry = q[this.endedHead] as EndedEntry;
      if (entry.due >= now) break;
      this.endedHead++;
      const live = this.runs.get(entry.runId);
      if (!live || live.endedAt !== entry.endedAt || live.projection.view.status === 'needs_replan') continue;
      if (live.listeners.size > 0) {
        q.push({ ...entry, due: now + this.retainEndedMs });
        continue;
      }
      this.runs.delete(entry.runId);
      this.scheduler.evict(entry.runId);
    }
    if (this.endedHead > 1024 && this.endedHead * 2 > q.length) {
      q.splice(0, this.endedHead);
      this.endedHead = 0;
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
