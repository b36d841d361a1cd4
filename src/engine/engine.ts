/**
 * The live engine: the imperative shell around the pure scheduler. It owns the real clock, one timer,
 * the executors and AbortControllers, and a sink that makes events durable.
 *
 * Every scheduler output is handled in one order: number the events (gapless `seq` per run), hand
 * them to the sink (durable before anything else sees them), fold them into the run views, tell the
 * listeners, then abort and start attempts. So nothing is visible, and no dependent tool call starts,
 * before the state change behind it is stored.
 *
 * Outputs go through the commit pipeline (commit-pipeline.ts), and one commit stores everything queued
 * (group commit): the attempts that ended in one turn of the event loop, and the runs submitted with
 * `submitGrouped` in that turn, share one transaction, so with a durable store many runs share one
 * fsync. Commands (submit, append, seal, cancel, replan, review) are sent at once, together with
 * whatever is queued before them, and resolve once stored, so the store sees every run's events in
 * seq order and a caller's answer is durable.
 *
 * One exception to "start after the commit": until a grouped submission is sent to the store, its run
 * is not accepted, and its idempotent calls start at once, before their `call.started` is stored (see
 * `startsEarly`); so do the idempotent builtin calls that become ready before it is sent, before the
 * outputs they use are stored (a builtin tool answers in this process and calls nothing outside, and a
 * tool that does would not answer within the turn anyway). A call that was running when the process
 * died is re-run if its tool is idempotent, and a run whose submission was not stored was never
 * accepted: nothing of it was visible, its caller had no answer, and all of it may run again.
 * Everything they do is still stored (in that commit or a later one) before anything of it is
 * published, so a run of instant calls, dependents included, needs a single commit. Once the submission
 * is sent, every start waits for what it depends on to be stored.
 *
 * One engine holds many runs at once; limits apply across all of them.
 */
import type { CallInput } from '../core/calls.js';
import { callError } from '../core/errors.js';
import type { RunEvent } from '../core/events.js';
import {
  Scheduler,
  SchedulerError,
  type AttemptEnded,
  type LimitInUse,
  type Output,
  type PermitRequest,
  type ReviewDecision,
  type StartAttempt,
  type WaitCounts,
} from '../core/scheduler.js';
import { RunProjection, type RunView } from '../core/view.js';
import type { Config } from '../contract/config.js';
import { createExecutors } from '../executors/index.js';
import { ClientDesk, withClientDesk, type AnswerOutcome, type ClientAnswer } from '../executors/client.js';
import { stampDispatch } from './client-dispatch.js';
import type { Executor } from '../executors/types.js';
import { startsEarly } from './attempt.js';
import type { RunListener } from './listeners.js';
import { merge } from './outputs.js';
import { newRunId } from './run-ids.js';
import { HookGate } from './hook-gate.js';
import { WakeTimer } from './wake-timer.js';
import { InFlight, refuseRun } from './in-flight.js';
import { RunViews } from './run-views.js';
import { CommitPipeline, type Commit } from './commit-pipeline.js';
import { gatedStarts, type PermitDesk } from './permit-desk.js';
import type { SubmitRequest } from '../contract/submission.js';
import type { EngineOptions, OpenRun } from './options.js';

export type { RunListener } from './listeners.js';
export { newRunId } from './run-ids.js';
export type { EngineOptions, EventSink, OpenRun, PermitAnswer, PermitGate } from './options.js';
export type { SubmitRequest } from '../contract/submission.js';
export { isEnded } from './run-views.js';

export class Engine {
  readonly config: Config;
  /** Replaced by `abandon`. */
  private scheduler: Scheduler;
  private readonly makeScheduler: () => Scheduler;
  /** Several replicas: where calls take cluster-wide permits (permit-desk.ts). */
  private readonly desk: PermitDesk | undefined;
  private readonly permits: EngineOptions['permits'];
  private readonly executor: Executor;
  private readonly ownsExecutor: boolean;
  /** The attempts of client tools that wait for their agent (DESIGN §17); see `EngineOptions.clients`. */
  private readonly clients: ClientDesk | undefined;
  /** How `enqueue` stamps the starts of client tools (made once: it runs for every output). */
  private readonly stamping: Parameters<typeof stampDispatch>[1];
  private readonly clock: () => number;
  private readonly views: RunViews;
  private readonly pipeline: CommitPipeline;
  private flushScheduled = false;
  private flushSoonScheduled = false;
  /**
   * Runs whose grouped submission is queued and not sent to the store yet: not accepted, so their
   * idempotent calls start at once, and so do builtin ones as they become ready (see `enqueue`).
   */
  private readonly unsent = new Set<string>();
  /** The attempts running; those started early (see `startsEarly`) are counted: see `flushSoon`. */
  private readonly inflight: InFlight;
  /** Attempts that ended and wait for the next group commit (see `flush`). */
  private readonly ended: AttemptEnded[] = [];
  /** Runs hooks (DESIGN §14); their answers wait for the next group commit like attempts' ends. */
  private readonly hooks: HookGate | undefined;
  private readonly timer: WakeTimer;
  /** Set by `close`: no new runs. Running calls still finish, and what they unblock still starts. */
  private accepting = true;
  /** Set once `close` has drained: nothing starts, and attempt results are no longer recorded. */
  private closed = false;
  private idle: (() => void) | undefined;

  constructor(opts: EngineOptions) {
    this.config = opts.config;
    this.makeScheduler = () =>
      new Scheduler({
        catalog: opts.config.catalog,
        policy: opts.config.policy,
        limits: opts.config.limits,
        defaults: opts.config.defaults,
        explainWaits: true,
        ...(opts.config.hooks ? { hooks: opts.config.hooks } : {}),
        ...(opts.permits ? { gated: true } : {}),
      });
    this.scheduler = this.makeScheduler();
    this.permits = opts.permits;
    // Backpressure another replica got (DESIGN §4): its tool starts nothing here until the pause ends.
    opts.permits?.onPaused?.((p) => {
      if (this.closed) return;
      this.enqueue(this.scheduler.paused(this.clock(), p));
      this.scheduleFlush();
    });
    this.desk =
      opts.permits &&
      gatedStarts(opts.permits, {
        scheduler: () => this.scheduler,
        now: () => this.clock(),
        closed: () => this.closed,
        step: (out) => {
          this.enqueue(out);
          this.scheduleFlush();
        },
      });
    this.ownsExecutor = !opts.executor;
    const base = opts.executor ?? createExecutors();
    this.clients = (opts.clients ?? !opts.executor) ? new ClientDesk() : undefined;
    const clients = this.clients;
    this.stamping = clients && { announce: (s) => clients.announce(s.runId, s.callId, s.attempt, (s.dispatch as { token: string }).token) };
    const executor = clients ? withClientDesk(base, clients) : base;
    this.executor = opts.instrument ? opts.instrument(executor) : executor;
    this.inflight = new InFlight(this.executor, (s, result, wasEarly) => {
      if (s.permit) this.desk?.release(s.runId, s.callId);
      if (this.closed) return;
      this.ended.push({ runId: s.runId, callId: s.callId, index: s.index, attempt: s.attempt, kind: s.kind, result });
      this.scheduleFlush();
      if (wasEarly && this.inflight.early === 0) this.flushSoon();
    });
    this.pipeline = new CommitPipeline(
      opts.sink,
      {
        apply: (c) => this.apply(c),
        settled: (landed) => {
          this.arm();
          if (landed) this.scheduleFlush();
        },
        refused: (runId, held) => this.disown(runId, held),
        leaseLost: (err) => {
          this.abandon(err);
          opts.onLeaseLost?.(err);
        },
        fault:
          opts.onFault ??
          ((err) =>
            setImmediate(() => {
              throw err;
            })),
      },
      { clock: () => this.clock() },
    );
    // The scheduler's clock only goes on (DESIGN §8: a recording's times are one clock): a timer that
    // fires a little early ticks at its due time, and what comes after is never given an earlier one.
    const wall = opts.clock ?? Date.now;
    let latest = Number.NEGATIVE_INFINITY;
    this.clock = () => {
      const t = wall();
      if (t > latest) latest = t;
      return latest;
    };
    this.timer = new WakeTimer(this.clock, (at) => {
      if (at > latest) latest = at;
      this.enqueue(this.scheduler.tick(this.clock()));
      this.send();
    });
    this.hooks = HookGate.of(opts.config, opts.hooks, this.clock, () => this.scheduleFlush());
    this.views = new RunViews(opts.retainEndedMs ?? 10 * 60_000, opts.retainEndedRuns ?? 10_000, (runId) => this.scheduler.evict(runId));
  }

  /**
   * Submits a batch in a commit of its own (sent at once); resolves with the run's view once it is
   * stored and its first calls have started. Rejects if the store refuses it.
   */
  async submit(req: SubmitRequest): Promise<RunView> {
    const runId = req.runId ?? newRunId();
    const out = this.submission(runId, req);
    await this.command(out, { creates: runId });
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
    const out = this.submission(runId, req);
    await new Promise<void>((resolve, reject) => {
      this.enqueue(out(this.clock()), { creates: runId, committed: { resolve, reject }, early: true });
      this.scheduleFlush();
      if (this.inflight.early === 0) this.flushSoon();
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
        ...(req.idempotencyKey !== undefined || req.traceparent !== undefined || req.concurrencyKey !== undefined
          ? {
              meta: {
                ...(req.idempotencyKey !== undefined ? { idempotencyKey: req.idempotencyKey } : {}),
                ...(req.traceparent !== undefined ? { traceparent: req.traceparent } : {}),
                ...(req.concurrencyKey !== undefined ? { concurrencyKey: req.concurrencyKey } : {}),
              },
            }
          : {}),
        ...(req.open ? { open: true } : {}),
        ...(req.held ? { held: true } : {}),
        ...(req.priority !== undefined ? { priority: req.priority } : {}),
      });
  }

  /** Appends calls to an open run; resolves once they are stored. */
  async append(runId: string, calls: readonly CallInput[]): Promise<RunView> {
    const ended = this.endedRun(runId);
    if (ended) throw new SchedulerError('conflict', `run ${runId} has ended (${ended.status}); it takes no more calls`);
    await this.command((now) => this.scheduler.append(now, runId, calls));
    return this.get(runId) as RunView;
  }

  /** Seals an open run. */
  async seal(runId: string): Promise<RunView> {
    const ended = this.endedRun(runId);
    if (ended) return ended;
    await this.command((now) => this.scheduler.seal(now, runId));
    return this.get(runId) as RunView;
  }

  /**
   * Opens a streamed run.
   *
   * @example
   * const run = engine.open();
   * await run.add({ id: 'a', tool: 'read_file', args: { path: '/x' } }); // starts now
   * await run.add({ id: 'b', tool: 'write_file', args: { path: '/x', content: '${a.output.path}' } });
   * await run.seal();
   * const result = await run.done();
   */
  open(req: Omit<SubmitRequest, 'open' | 'calls'> & { calls?: CallInput[] } = {}): OpenRun {
    const id = req.runId ?? newRunId();
    const opened = this.submit({ ...req, runId: id, calls: req.calls ?? [], open: true });
    // Whoever uses the run hears of a refusal from add, seal or done.
    opened.catch(() => {});
    return {
      id,
      add: (...calls) => this.append(id, calls),
      seal: () => this.seal(id),
      done: async () => {
        await opened;
        return (await this.wait(id)) as RunView;
      },
    };
  }

  /**
   * Takes back a run from its stored events after a restart: finished calls keep their outcomes,
   * running idempotent calls run again, other running calls fail with `interrupted`. Resolves once
   * what that changes is stored.
   */
  async restore(events: readonly RunEvent[]): Promise<RunView> {
    const first = events[0];
    if (!first) throw new Error('cannot restore a run from no events');
    // One this engine holds (stored, say, but its commit not applied here yet) is not taken back twice.
    if (this.knows(first.runId)) return this.views.get(first.runId) ?? RunProjection.of(events).view;
    const view = this.views.adopt(events);
    let out: Output;
    try {
      out = this.scheduler.restore(this.clock(), events);
    } catch (e) {
      // Nothing of the run was emitted or started: forget it, so the engine does not hold a run its
      // scheduler does not know.
      this.views.forget(first.runId);
      throw new Error(`cannot resume run ${first.runId}: ${(e as Error).message}`, { cause: e });
    }
    await this.command(() => out, { orHeld: true }); // with the store away: held, stored once it is back
    return this.views.get(first.runId) ?? view;
  }

  /**
   * The error that says the store is away, while it is (the engine keeps what it could not store and
   * tries again); `undefined` when the store writes.
   */
  storeUnavailable(): unknown {
    return this.pipeline.unavailable;
  }

  /** Whether the engine holds this run (live, or ended recently). */
  has(runId: string): boolean {
    return this.views.has(runId);
  }

  get(runId: string): RunView | undefined {
    return this.views.get(runId);
  }

  projection(runId: string): RunProjection | undefined {
    return this.views.projection(runId);
  }

  /** Resolves with the run's view when it ends, or as it stands after `timeoutMs`. */
  wait(runId: string, timeoutMs = Infinity): Promise<RunView | undefined> {
    return this.views.wait(runId, timeoutMs);
  }

  /**
   * An agent's answer for the waiting attempt of a client tool's call (DESIGN §17): taken if `token`
   * is that attempt's (its `call.started` carries it), and the attempt then ends as any other does;
   * otherwise (a wrong token, an earlier attempt's, one that timed out or was cancelled) nothing
   * changes.
   */
  answer(runId: string, callId: string, token: string, answer: ClientAnswer): AnswerOutcome {
    return this.clients?.answer(runId, callId, token, answer) ?? { accepted: false };
  }

  /** How many attempts of client tools wait for their agent (announced or running here). */
  clientsWaiting(): number {
    return this.clients?.size ?? 0;
  }

  /** Listens to one run's events (after they are durable). Returns an unsubscribe function. */
  subscribe(runId: string, listener: RunListener): () => void {
    return this.views.subscribe(runId, listener);
  }

  /** Listens to every run's events. */
  onEvent(listener: RunListener): () => void {
    return this.views.onEvent(listener);
  }

  /** Cancels a run; nothing happens to a run that has ended. Resolves once the cancel is stored. */
  async cancel(runId: string, supersededBy?: string): Promise<void> {
    if (this.endedRun(runId)) return;
    await this.command((now) => this.scheduler.cancel(now, runId, supersededBy));
  }

  /** Starts a run held behind an earlier run of its concurrency key (DESIGN §4); resolves once stored. */
  async release(runId: string): Promise<void> {
    if (this.endedRun(runId) || !this.has(runId)) return;
    await this.command((now) => this.scheduler.release(now, runId));
  }

  /** The runs this engine holds behind an earlier run of their concurrency key, oldest first. */
  heldRuns(): { runId: string; tenant: string; concurrencyKey: string }[] {
    return this.scheduler.heldRuns();
  }

  async replan(runId: string, calls: readonly CallInput[]): Promise<RunView> {
    const ended = this.endedRun(runId);
    if (ended) throw new SchedulerError('conflict', `run ${runId} is ${ended.status}, not needs_replan`);
    await this.command((now) => this.scheduler.replan(now, runId, calls));
    return this.get(runId) as RunView;
  }

  async review(decision: ReviewDecision): Promise<RunView> {
    const ended = this.endedRun(decision.runId);
    if (ended)
      throw new SchedulerError('conflict', `run ${decision.runId} has ended (${ended.status}); call ${decision.callId} awaits no review`);
    await this.command((now) => this.scheduler.decideReview(now, decision));
    return this.get(decision.runId) as RunView;
  }

  /** The view of a run that has ended for good: the engine answers for it (see `RunViews.endedForGood`). */
  private endedRun(runId: string): RunView | undefined {
    return this.views.endedForGood(runId);
  }

  activeRuns(tenant?: string): number {
    return this.scheduler.activeRuns(tenant);
  }

  runningAttempts(): number {
    return this.inflight.size;
  }

  limitUsage = () => this.scheduler.limitUsage();
  limitsInUse = (): LimitInUse[] => this.scheduler.limitsInUse(this.clock());
  /** The ready calls that wait, by what they wait for, and the engine's time (several replicas publish them). */
  waitCounts = (): { counts: WaitCounts; now: number } => ({ counts: this.scheduler.waitCounts(), now: this.clock() });

  /**
   * Several replicas (DESIGN §12): this replica lost its lease, so another may own its runs now. Every
   * run is dropped: nothing more of it is stored, published or started; its attempts are aborted and
   * their ends not recorded; whoever waits on it hears `reason`. The engine starts afresh, and the
   * cluster takes runs back under a new lease, resumed from the store like after a crash (DESIGN §8).
   */
  abandon(reason: unknown): void {
    this.pipeline.abandon(reason);
    this.ended.splice(0);
    this.inflight.abortAll(callError('interrupted', 'this replica lost its lease; another takes the run over'), true);
    this.views.forgetAll();
    this.scheduler = this.makeScheduler();
    this.hooks?.forget();
    this.clients?.forgetUnrun();
    this.timer.clear();
  }

  /** Whether the run is in hand (held, unborn, withdrawn and to be ended): never resumed from the store. */
  knows(runId: string): boolean {
    return this.views.knows(runId) || this.scheduler.has(runId) || this.pipeline.withdrawing(runId);
  }

  /** The ids of the runs this engine holds and has not ended. */
  liveRuns(): string[] {
    return this.scheduler.liveRuns();
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
    // What is queued (grouped submissions, ends) is stored before the engine stops; they start nothing
    // now: the next start resumes them, as it does every call that was running. A store that is away
    // gets a while to come back; what it then still lacks is resumed like after a crash.
    this.send();
    await within(this.pipeline.drained(), Math.max(5000, opts.drainMs ?? 0));
    this.closed = true;
    this.timer.clear();
    // Nothing will change any more: whoever waits gets the run as it stands now (a pending wait's
    // timer would otherwise keep the process alive for up to its whole timeout).
    this.views.wakeAll();
    this.inflight.abortAll();
    await this.hooks?.close();
    if (this.ownsExecutor) await this.executor.close();
  }

  // ---- the loop ------------------------------------------------------------------------------

  /**
   * Feeds the scheduler and sends its output at once (after whatever is queued); resolves once it is
   * stored, rejects if the store refuses it (or the scheduler the input).
   */
  private command(input: (now: number) => Output, { creates, orHeld }: Pick<Commit, 'creates'> & { orHeld?: boolean } = {}): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.enqueue(input(this.clock()), {
        ...(creates === undefined ? {} : { creates }),
        committed: { resolve, reject },
        ...(orHeld ? { onHeld: resolve } : {}),
      });
      this.send();
    });
  }

  /** Hands what is queued to the store (see `CommitPipeline.send`): the runs it submits are sent. */
  private send(): void {
    this.unsent.clear();
    this.pipeline.send();
  }

  /**
   * Numbers the output's events and queues it for the next commit. `creates`: the output submits that
   * run (see `disown`). A grouped submission (`early`) is not sent yet: its run's idempotent calls start
   * now, as its commit is still to come (see `startsEarly`), and so do the idempotent builtin calls that
   * become ready before it is sent; everything else starts once stored. Returns how many attempts
   * started early.
   */
  private enqueue(out: Output, submission: Pick<Commit, 'creates' | 'committed' | 'onHeld'> & { early?: boolean } = {}): number {
    if (out.permits && out.permits.length > 0) out = this.grantedAtOnce(out);
    if (this.stamping && out.starts.length > 0) stampDispatch(out, this.stamping);
    const q: Commit = { events: out.events.map((e) => this.views.number(e)), starts: out.starts, aborts: out.aborts };
    if (out.hooks) q.hooks = out.hooks;
    if (submission.creates !== undefined) q.creates = submission.creates;
    if (submission.committed) q.committed = submission.committed;
    if (submission.onHeld) q.onHeld = submission.onHeld;
    const runId = submission.creates;
    if (submission.early && runId !== undefined) this.unsent.add(runId);
    if (this.unsent.size > 0 && out.starts.length > 0) {
      // The submission's own starts: any idempotent call. Later ones (dependents): builtin tools only.
      const early: StartAttempt[] = [];
      const rest: StartAttempt[] = [];
      for (const s of out.starts) {
        const ahead = this.unsent.has(s.runId) && startsEarly(s, s.runId) && (s.runId === runId || s.tool.executor.kind === 'builtin');
        if (ahead) early.push(s);
        else rest.push(s);
      }
      if (early.length > 0) {
        q.early = early;
        q.starts = rest;
      }
    }
    this.pipeline.push(q);
    for (const s of q.early ?? []) this.inflight.launch(s, true);
    if (out.permits && out.permits.length > 0) this.desk?.ask(out.permits);
    if (out.pauses && this.permits?.pause) for (const p of out.pauses) this.permits.pause(p);
    return q.early?.length ?? 0;
  }

  /**
   * The permits the gate grants at once (a replica's slices) go into the same output: their calls start
   * with it, early too when it is a grouped submission's, as they would without a gate. The rest of
   * `out.permits` is asked for as before.
   */
  private grantedAtOnce(out: Output): Output {
    const asked = out.permits ?? [];
    const granted = this.closed ? undefined : this.permits?.grantNow?.(asked);
    if (!granted?.some(Boolean)) return out;
    const now = this.clock();
    const merged: Output = { ...out, events: [...out.events], starts: [...out.starts], aborts: [...out.aborts], permits: [] };
    asked.forEach((r, i) => {
      if (!granted[i]) (merged.permits as PermitRequest[]).push(r);
      else {
        const o = this.scheduler.permitGranted(now, r.runId, r.callId);
        if (o) merge(merged, o);
        else this.permits?.release([r]);
      }
    });
    return merged;
  }

  /** One flush per turn of the event loop, after the I/O callbacks that queued work in it. */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush(true);
    });
  }

  /**
   * A flush as soon as the current callback is done, for a grouped submission whose early attempts
   * have all ended (a run of instant tools): its commit then starts at once, while this thread goes on
   * with the other requests of the turn (their commits follow it), instead of after all of them.
   * Without a store, flushes stay one per turn.
   */
  private flushSoon(): void {
    if (this.flushSoonScheduled || !this.pipeline.async) return;
    this.flushSoonScheduled = true;
    queueMicrotask(() => {
      this.flushSoonScheduled = false;
      this.flush(false);
    });
  }

  /**
   * Group commit: the attempts that ended since the last turn go through the scheduler together, and
   * their events are sent in one batch with the grouped submissions of this turn, before any of them
   * is published or any dependent call starts. Durability then costs one commit per turn, not per call
   * or per run.
   *
   * `endOfTurn`: the flush at the end of the turn, which always sends. An earlier one (`flushSoon`)
   * that started calls early (the next calls of runs not sent yet) leaves the batch to the flush after
   * they end, or to the end of the turn at the latest: a run of instant tools then takes one commit.
   */
  private flush(endOfTurn: boolean): void {
    const ends = this.ended.splice(0);
    const answers = this.hooks?.answered() ?? [];
    let early = 0;
    if (!this.closed && ends.length + answers.length > 0) {
      const now = this.clock();
      const merged: Output = { events: [], starts: [], aborts: [] };
      for (const e of ends) merge(merged, this.scheduler.attemptEnded(now, e));
      for (const a of answers) merge(merged, this.scheduler.hookDecided(now, a));
      early = this.enqueue(merged);
    }
    if (early > 0 && !endOfTurn) {
      this.scheduleFlush();
      return;
    }
    this.send();
    if (this.inflight.size === 0) this.idle?.();
  }

  /** A stored commit: publishes its events, then starts and aborts its attempts. */
  private apply(q: Commit): void {
    for (const e of q.events) this.views.publish(e);
    // Starts before aborts: in a group commit a later step may abort what an earlier one started.
    if (!this.closed) for (const s of q.starts) this.inflight.launch(s);
    if (q.hooks) for (const h of q.hooks) this.hooks?.launch(h);
    for (const a of q.aborts) this.inflight.abort(a.runId, a.callId, a.attempt, a.reason);
  }

  /**
   * Forgets a run whose submission the store refused: nothing of it is stored, so nothing of it may be
   * stored, published or started later either. Its events, starts and aborts leave the outputs still in
   * hand (`held`: the refused one, and every later one, since nothing of the run was stored); the
   * attempts it started early are aborted and their ends ignored (see `InFlight.take`). The scheduler lets a run
   * go only once it has ended, so it is cancelled there, and every attempt it counts as running (any the
   * held outputs started) ends as cancelled; what that changes for other runs (a limit slot freed, say)
   * is queued like any output.
   */
  private disown(runId: string, held: readonly Commit[]): void {
    this.views.forget(runId);
    this.clients?.forgetUnrun(runId);
    const rest = refuseRun(this.scheduler, this.clock(), runId, held, this.inflight, (s) => this.desk?.release(s.runId, s.callId));
    if (rest.events.length + rest.starts.length + rest.aborts.length + (rest.hooks?.length ?? 0) > 0) {
      this.enqueue(rest);
      this.scheduleFlush();
    }
  }

  /** Keeps exactly one timer, for the scheduler's next wake-up. */
  private arm(): void {
    this.timer.set(this.closed ? undefined : this.scheduler.nextWakeAt());
  }
}

/** Resolves when `p` does, or after `ms`, whichever comes first. */
function within(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]).finally(() => clearTimeout(timer));
}
