/**
 * The live engine: the imperative shell around the pure scheduler. It owns the real clock, one timer,
 * the executors and AbortControllers, and a sink that makes events durable.
 *
 * Every scheduler output is handled in one order: number the events (gapless `seq` per run), hand
 * them to the sink (durable before anything else sees them), fold them into the run views, tell the
 * listeners, then abort and start attempts. So nothing is visible, and no dependent tool call starts,
 * before the state change behind it is stored.
 *
 * Outputs wait in a queue for the sink, and one commit stores everything queued (group commit): the
 * attempts that ended in one turn of the event loop, and the runs submitted with `submitGrouped` in
 * that turn, share one transaction, so with a durable store many runs share one fsync. The other
 * inputs commit at once, together with whatever is queued before them, so the store sees every run's
 * events in seq order.
 *
 * One exception to "start after the commit": a grouped submission starts its idempotent calls at once,
 * before their `call.started` is stored (see `startsEarly`). DESIGN §8 allows it: a call that was
 * running when the process died is re-run if its tool is idempotent, and a run whose submission was not
 * stored was never accepted. Their ends are still stored (in that commit or a later one) before anything
 * of them is published, so a run of instant calls needs a single commit.
 *
 * One engine holds many runs at once; limits apply across all of them.
 */
import { randomUUID } from 'node:crypto';
import type { CallInput, RunStatus } from '../core/calls.js';
import { callError } from '../core/errors.js';
import { withSeq, type CoreEvent, type RunEvent } from '../core/events.js';
import { isRunEnded } from '../core/state.js';
import { Scheduler, SchedulerError, type AbortAttempt, type AttemptEnded, type AttemptResult, type Output, type ReviewDecision, type StartAttempt } from '../core/scheduler.js';
import { RunProjection, type CallView, type RunView } from '../core/view.js';
import type { Config } from '../contract/config.js';
import type { SubmitRequest } from '../contract/submission.js';
import { createExecutors } from '../executors/index.js';
import type { PendingAppend } from '../store/types.js';
import type { ExecuteRequest, Executor } from '../executors/types.js';

/** Where events go before anything else sees them; a store makes them durable. */
export interface EventSink {
  append(events: readonly RunEvent[]): void;
  /** Optional: `append` with the commit on another thread (see `Store.appendAsync`); the group commit uses it. */
  appendAsync?(events: readonly RunEvent[]): PendingAppend;
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
  /**
   * And keep at most this many of them (the oldest go first); default 10,000. Memory then stays bounded
   * at any rate of runs (a view is a few KB); a store still has every run.
   */
  retainEndedRuns?: number;
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

/** `call`: the view of the event's call, when it has one (so a listener need not search `view.calls`). */
export type RunListener = (event: RunEvent, view: RunView, call: CallView | undefined) => void;

interface LiveRun {
  projection: RunProjection;
  seq: number;
  listeners: Set<RunListener>;
  waiters: Set<() => void>;
  endedAt?: number;
}

/** A group commit in flight (see `commitGrouped`): its outputs, and, once known, whether they are stored. */
interface Writing {
  batch: Queued[];
  pending: PendingAppend;
  settled?: { err?: unknown };
}

/** A scheduler output waiting for the next commit, its events numbered. */
interface Queued {
  events: RunEvent[];
  /** Started once the events are stored. */
  starts: readonly StartAttempt[];
  aborts: readonly AbortAttempt[];
  /** For a grouped submission: the run it creates (see `disown`). */
  creates?: string;
  /** For a grouped submission: the attempts started before the commit (see `startsEarly`). */
  early?: readonly StartAttempt[];
  /** For a grouped step: told when its events are stored, or that they could not be. */
  committed?: { resolve: () => void; reject: (err: unknown) => void };
}

interface EndedEntry {
  runId: string;
  endedAt: number;
  /** When to look at it: once `retainEndedMs` has passed. */
  due: number;
}

/** Whether a run has ended (the run state machine's word: core/state.ts). */
export const isEnded: (status: RunStatus) => boolean = isRunEnded;

export class Engine {
  readonly config: Config;
  private readonly scheduler: Scheduler;
  private readonly executor: Executor;
  private readonly ownsExecutor: boolean;
  private readonly sink: EventSink | undefined;
  private readonly clock: () => number;
  private readonly retainEndedMs: number;
  private readonly retainEndedRuns: number;
  private readonly runs = new Map<string, LiveRun>();
  /** Runs whose first event is numbered but not yet stored: not visible until it is (see `publish`). */
  private readonly unborn = new Map<string, LiveRun>();
  /** Outputs waiting for the next commit, in the order the scheduler produced them. */
  private readonly queue: Queued[] = [];
  private flushScheduled = false;
  private flushSoonScheduled = false;
  /** Attempts started early (see `startsEarly`) that have not ended: see `flushSoon`. */
  private earlyRunning = 0;
  /** The group commits the sink is writing on its own thread, oldest first (see `commitGrouped`). */
  private readonly writing: Writing[] = [];
  private readonly inflight = new Map<string, Attempt>();
  /** Attempts that ended and wait for the next group commit (see `flush`). */
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
    this.retainEndedRuns = opts.retainEndedRuns ?? 10_000;
  }

  /** Submits a batch; returns the run's view as it stands once the first calls have started. */
  submit(req: SubmitRequest): RunView {
    const runId = req.runId ?? newRunId();
    this.enqueue(this.submission(runId, req)(this.clock()), { creates: runId });
    this.commit();
    return this.get(runId) as RunView;
  }

  /**
   * Submits a batch like `submit`, but its events join the next group commit (at the end of this turn
   * of the event loop) instead of taking a commit of their own: a server that takes many runs at once
   * pays one fsync for all of them. Resolves with the run's view once it is stored and its first calls
   * have started; until then the run is invisible (`get` and `has` do not know it). Rejects if the
   * store refuses it.
   */
  async submitGrouped(req: SubmitRequest): Promise<RunView> {
    const runId = req.runId ?? newRunId();
    const out = this.submission(runId, req)(this.clock());
    await new Promise<void>((resolve, reject) => {
      this.enqueue(out, { creates: runId, committed: { resolve, reject } });
      this.scheduleFlush();
      if (this.earlyRunning === 0) this.flushSoon();
    });
    return this.get(runId) as RunView;
  }

  private submission(runId: string, req: SubmitRequest): (now: number) => Output {
    if (!this.accepting) throw new Error('the engine is closed');
    return (now) =>
      this.scheduler.submit(now, {
        runId,
        tenant: req.tenant ?? 'default',
        calls: req.calls,
        ...(req.failure ? { failure: req.failure } : {}),
        ...(req.tags ? { tags: req.tags } : {}),
        ...(req.idempotencyKey !== undefined ? { meta: { idempotencyKey: req.idempotencyKey } } : {}),
        ...(req.open ? { open: true } : {}),
      });
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
    this.enqueue(out);
    this.commit();
    return live.projection.view;
  }

  /** Stores (and then publishes and starts) what waits for the group commit, now. */
  commitQueued(): void {
    this.commit();
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
    // Grouped submissions still queued are stored before the engine stops (they start nothing now:
    // the next start resumes them, as it does every call that was running).
    this.commit();
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

  /** Feeds the scheduler and commits at once (with whatever was queued before); throws if the store refuses. */
  private step(input: (now: number) => Output): void {
    this.enqueue(input(this.clock()));
    this.commit();
  }

  /**
   * Numbers the output's events and queues it for the next commit. `creates`: the output submits that
   * run (see `disown`). A grouped submission (`committed`) starts its early attempts now, as its commit
   * is still to come (see `startsEarly`); everything else starts once stored.
   */
  private enqueue(out: Output, submission: Pick<Queued, 'creates' | 'committed'> = {}): void {
    const q: Queued = { events: out.events.map((e) => this.number(e)), starts: out.starts, aborts: out.aborts, ...submission };
    const runId = submission.creates;
    if (submission.committed && runId !== undefined) {
      const early = out.starts.filter((s) => startsEarly(s, runId));
      if (early.length > 0) {
        q.early = early;
        q.starts = out.starts.filter((s) => !early.includes(s));
      }
    }
    this.queue.push(q);
    for (const s of q.early ?? []) this.launch(s, true);
  }

  /** One flush per turn of the event loop, after the I/O callbacks that queued work in it. */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  /**
   * A flush as soon as the current callback is done, for a grouped submission whose early attempts
   * have all ended (a run of instant tools): with a sink that writes on its own thread, its commit then
   * starts at once, while this thread goes on with the other requests of the turn (their commits follow
   * it, see `commitGrouped`), instead of after all of them. Without such a sink, flushes stay one per
   * turn, so that runs share a commit.
   */
  private flushSoon(): void {
    if (this.flushSoonScheduled || !this.sink?.appendAsync) return;
    this.flushSoonScheduled = true;
    queueMicrotask(() => {
      this.flushSoonScheduled = false;
      this.flush();
    });
  }

  /**
   * Group commit: the attempts that ended since the last turn go through the scheduler together, and
   * their events are stored in one transaction with the grouped submissions of this turn, before any
   * of them is published or any dependent call starts. Durability then costs one commit per turn, not
   * per call or per run.
   */
  private flush(): void {
    this.flushScheduled = false;
    const ends = this.ended.splice(0);
    if (!this.closed && ends.length > 0) {
      const now = this.clock();
      const merged: Output = { events: [], starts: [], aborts: [] };
      for (const e of ends) merge(merged, this.scheduler.attemptEnded(now, e));
      this.enqueue(merged);
    }
    this.commitGrouped();
    if (this.inflight.size === 0) this.idle?.();
  }

  /**
   * Stores every queued event now (after the group commits under way, if any, which hold earlier
   * outputs), then publishes them and starts and aborts attempts (see `apply`).
   */
  private commit(): void {
    this.settleWriting();
    const batch = this.queue.splice(0);
    if (batch.length > 0) this.apply(batch, this.store(batch));
  }

  /**
   * The group commit of a turn. With a sink that can write on another thread (`appendAsync`), the
   * commit and its fsync happen there while this thread goes on; and the next turn's group commit does
   * not wait for it, but is handed over at once, stored after it (in the same transaction, if it is
   * still waiting: the sink's thread takes what waits together). So neither thread waits for the
   * other. Each is applied (published, its attempts started, its submissions resolved) only once it
   * and every one before it is stored, in order (see `drainWriting`). Without such a sink, this is
   * `commit`.
   */
  private commitGrouped(): void {
    const sink = this.sink;
    if (!sink?.appendAsync) return this.commit();
    if (this.queue.length === 0) return;
    const batch = this.queue.splice(0);
    const w: Writing = { batch, pending: sink.appendAsync(batch.flatMap((q) => q.events)) };
    this.writing.push(w);
    // The next group commit goes at the end of a turn (scheduleFlush), not at once: attempts that this
    // one starts and that end at once (a no-op tool) then go in it, rather than in one of their own.
    w.pending.done.then(
      () => this.landed(w, {}),
      (err: unknown) => this.landed(w, { err }),
    );
  }

  private landed(w: Writing, outcome: { err?: unknown }): void {
    w.settled ??= outcome;
    this.drainWriting();
    this.scheduleFlush();
  }

  /**
   * Applies the group commits at the head of the line that are stored, in order. Once the head one
   * failed, every one after it is settled first (the sink refuses those stored on top of it), then all
   * are applied in order, the failed ones stored again output by output (see `settleWriting`).
   */
  private drainWriting(): void {
    while (this.writing.length > 0) {
      const head = this.writing[0] as Writing;
      if (!head.settled) return;
      if (head.settled.err !== undefined) return this.settleWriting();
      this.writing.shift();
      this.apply(head.batch, []);
    }
  }

  /**
   * Blocks until every group commit under way is settled, and applies them in order. Nothing of a
   * failed one was stored: its outputs are stored one by one, so that only a bad one fails (those of
   * later failed ones too, since they may hold events of a run the bad one submitted).
   */
  private settleWriting(): void {
    if (this.writing.length === 0) return;
    for (const w of this.writing) {
      if (w.settled) continue;
      try {
        w.pending.wait();
        w.settled = {};
      } catch (err) {
        w.settled = { err };
      }
    }
    const ws = this.writing.splice(0);
    ws.forEach((w, i) => {
      if (w.settled?.err === undefined) return this.apply(w.batch, []);
      const later = ws.slice(i + 1).flatMap((x) => (x.settled?.err === undefined ? [] : x.batch));
      this.apply(w.batch, this.storeEach(w.batch, later));
    });
  }

  /**
   * Publishes the stored outputs' events and starts and aborts their attempts, output by output in the
   * order they were queued. A grouped step learns here whether it was stored; a failure of any other
   * step is thrown (to the caller of a direct step; out of a group commit it ends the process, which
   * then resumes from what the store holds).
   */
  private apply(batch: readonly Queued[], errors: readonly unknown[]): void {
    let thrown: { err: unknown } | undefined;
    batch.forEach((q, i) => {
      const err = errors[i];
      if (err === undefined) {
        for (const e of q.events) this.publish(e);
        // Starts before aborts: in a group commit a later step may abort what an earlier one started.
        if (!this.closed) for (const s of q.starts) this.launch(s);
        for (const a of q.aborts) this.inflight.get(attemptKey(a.runId, a.callId, a.attempt, 'call'))?.abort(a.reason);
        q.committed?.resolve();
      } else if (q.committed) q.committed.reject(err);
      else thrown ??= { err };
    });
    this.arm();
    if (thrown) throw thrown.err;
  }

  /**
   * Hands the batch's events to the sink in one transaction; if that fails, output by output (see
   * `storeEach`). Returns each output's error, if it has one.
   */
  private store(batch: readonly Queued[]): unknown[] {
    if (batch.length > 1) {
      try {
        this.toSink(batch.flatMap((q) => q.events));
        return [];
      } catch {
        // Stored output by output below, so that only the bad one fails.
      }
    }
    return this.storeEach(batch);
  }

  /**
   * Stores outputs one by one, so that one bad output (a duplicate idempotency key, say) fails alone, not
   * the runs that shared its commit. A refused submission takes its run with it (see `disown`), out of
   * the outputs after it too (`later`: those of later group commits still to be stored again), which
   * would otherwise fail for want of their run.
   */
  private storeEach(batch: readonly Queued[], later: readonly Queued[] = []): unknown[] {
    return batch.map((q, i) => {
      try {
        this.toSink(q.events);
        return undefined;
      } catch (err) {
        if (q.creates !== undefined) this.disown(q.creates, [q, ...batch.slice(i + 1), ...later, ...this.queue]);
        return err;
      }
    });
  }

  /**
   * Forgets a run whose submission the store refused: nothing of it is stored, so nothing of it may be
   * stored, published or started later either. Its events, starts and aborts leave the outputs still in
   * hand (`held`: the refused one, and every later one, since nothing of the run was stored); the
   * attempts it started early are aborted and their ends ignored (see `launch`). The scheduler lets a run
   * go only once it has ended, so it is cancelled there, and every attempt it counts as running (any the
   * held outputs started) ends as cancelled; what that changes for other runs (a limit slot freed, say)
   * is queued like any output.
   */
  private disown(runId: string, held: readonly Queued[]): void {
    this.unborn.delete(runId);
    const reason = callError('cancelled', `the store refused run ${runId}`);
    const refused: AttemptResult = { ok: false, error: reason, retryable: false };
    const toEnd: StartAttempt[] = [];
    for (const q of held) toEnd.push(...strip(q, runId));
    for (const s of toEnd) {
      const key = attemptKey(s.runId, s.callId, s.attempt, s.kind);
      const attempt = this.inflight.get(key);
      if (!attempt) continue;
      attempt.abort(reason);
      this.inflight.delete(key);
      this.leaveEarly(attempt);
    }
    const now = this.clock();
    const rest: Output = { events: [], starts: [], aborts: [] };
    const keep = (out: Output) => {
      toEnd.push(...strip(out, runId));
      merge(rest, out);
    };
    keep(this.scheduler.cancel(now, runId));
    for (let s = toEnd.shift(); s; s = toEnd.shift()) {
      keep(this.scheduler.attemptEnded(now, { runId, callId: s.callId, index: s.index, attempt: s.attempt, kind: s.kind, result: refused }));
    }
    this.scheduler.evict(runId);
    if (rest.events.length + rest.starts.length + rest.aborts.length > 0) {
      this.enqueue(rest);
      this.scheduleFlush();
    }
  }

  private toSink(events: RunEvent[]): void {
    if (events.length > 0) this.sink?.append(events);
  }

  private number(e: CoreEvent): RunEvent {
    let live = this.runs.get(e.runId) ?? this.unborn.get(e.runId);
    if (!live) {
      live = { projection: new RunProjection(e), seq: 0, listeners: new Set(), waiters: new Set() };
      this.unborn.set(e.runId, live);
    }
    live.seq += 1;
    return withSeq(e, live.seq);
  }

  private publish(e: RunEvent): void {
    let live = this.runs.get(e.runId);
    if (!live) {
      // The run's first event is stored: from now on the run is visible.
      live = this.unborn.get(e.runId) as LiveRun;
      this.unborn.delete(e.runId);
      this.runs.set(e.runId, live);
    }
    if (e.seq > 1) live.projection.apply(e);
    const view = live.projection.view;
    const call = e.callId === undefined ? undefined : live.projection.call(e.callId);
    for (const l of live.listeners) tell(l, e, view, call);
    for (const l of this.globalListeners) tell(l, e, view, call);
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

  /** `early`: started before its submission is stored (see `startsEarly`). */
  private launch(s: StartAttempt, early = false): void {
    const key = attemptKey(s.runId, s.callId, s.attempt, s.kind);
    const attempt = new Attempt(s);
    if (early) {
      attempt.early = true;
      this.earlyRunning++;
    }
    this.inflight.set(key, attempt);
    const done = (result: AttemptResult) => {
      // Not ours any more: its run was refused by the store (see `disown`).
      if (this.inflight.get(key) !== attempt) return;
      this.inflight.delete(key);
      const wasEarly = attempt.early;
      this.leaveEarly(attempt);
      if (this.closed) return;
      this.ended.push({ runId: s.runId, callId: s.callId, index: s.index, attempt: s.attempt, kind: s.kind, result });
      this.scheduleFlush();
      if (wasEarly && this.earlyRunning === 0) this.flushSoon();
    };
    this.executor.execute(attempt).then(done, (err: unknown) => done({ ok: false, error: { code: 'tool_error', message: String(err) }, retryable: false }));
  }

  /** An attempt leaves the engine's hands: it counts no more among the early ones running. */
  private leaveEarly(attempt: Attempt): void {
    if (!attempt.early) return;
    attempt.early = false;
    this.earlyRunning--;
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
   * Forgets the views of runs that ended more than `retainEndedMs` ago, or beyond the newest
   * `retainEndedRuns`, oldest first, from a queue in the order they ended (so the cost is per forgotten
   * run, not a scan of every run per completion). A run with listeners is looked at again a period
   * later; a needs_replan run stays until a replan, after which it is queued again when it ends again.
   */
  private forgetOldRuns(now: number): void {
    const q = this.endedRuns;
    // Each entry is looked at once per call: one that is put back (listeners) is not looked at again.
    const end = q.length;
    while (this.endedHead < end) {
      const entry = q[this.endedHead] as EndedEntry;
      if (entry.due >= now && q.length - this.endedHead <= this.retainEndedRuns) break;
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

/**
 * A running attempt, as the executor gets it (an `ExecuteRequest`) and as the engine aborts it. Its
 * AbortController is made only when the executor first reads `signal`: an instant tool (the builtin
 * `echo`) never does, and an AbortController is one of the dearest things a launch would make. An abort
 * before that is kept, and the signal is born aborted with the same reason.
 */
class Attempt implements ExecuteRequest {
  readonly runId: string;
  readonly callId: string;
  readonly tool: StartAttempt['tool'];
  readonly args: Record<string, unknown>;
  readonly attempt: number;
  readonly timeoutMs: number;
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
function startsEarly(s: StartAttempt, runId: string): boolean {
  return s.kind === 'call' && s.runId === runId && s.tool.idempotent;
}

function merge(into: Output, out: Output): void {
  into.events.push(...out.events);
  into.starts.push(...out.starts);
  into.aborts.push(...out.aborts);
}

/** Takes a run's events, starts and aborts out of an output; returns the starts taken (early ones too). */
function strip<E extends { runId: string }>(
  q: { events: E[]; starts: readonly StartAttempt[]; aborts: readonly AbortAttempt[]; early?: readonly StartAttempt[] },
  runId: string,
): StartAttempt[] {
  const taken = [...(q.early ?? []), ...q.starts].filter((s) => s.runId === runId);
  q.events = q.events.filter((e) => e.runId !== runId);
  q.starts = q.starts.filter((s) => s.runId !== runId);
  q.aborts = q.aborts.filter((a) => a.runId !== runId);
  if (q.early) q.early = q.early.filter((s) => s.runId !== runId);
  return taken;
}

function attemptKey(runId: string, callId: string, attempt: number, kind: 'call' | 'compensation'): string {
  return `${kind}/${runId}/${callId}/${attempt}`;
}

function tell(listener: RunListener, e: RunEvent, view: RunView, call: CallView | undefined): void {
  try {
    listener(e, view, call);
  } catch {
    // A listener cannot throw into the engine.
  }
}

export function newRunId(): string {
  // The first 20 hex digits of a random UUID (which is 8-4-4-4-12), without a regex per run.
  const u = randomUUID();
  return `run_${u.slice(0, 8)}${u.slice(9, 13)}${u.slice(14, 18)}${u.slice(19, 23)}`;
}
