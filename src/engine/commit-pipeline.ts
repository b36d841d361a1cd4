/**
 * The engine's commit pipeline: what makes a state change durable before anything sees it.
 *
 * The engine numbers a scheduler output's events and hands it here as a `Commit`. Commits wait in a
 * queue; `send` hands everything queued to the event log as one batch (one transaction: a group
 * commit), and does not wait for it: the next batch may be sent while one is still being written
 * (SQLite's writer thread, a PostgreSQL connection), and the log stores them in order. Each batch is
 * applied (its events published, its attempts started and aborted, its callers told) only once it and
 * every batch before it are stored, in the order they were sent.
 *
 * When a batch fails, the log refuses every later one in flight too (nothing of them is stored). The
 * pipeline then stops sending, waits for all of them to settle, and stores their commits again:
 * - all together first; while the store is away (`store_unavailable`: PostgreSQL gone, a full disk, a
 *   write that took too long) it tries again every `retryMs` (growing to `maxRetryMs`), keeping what
 *   belongs to accepted runs; nothing of them is lost and nothing is applied out of order. `unavailable`
 *   says so meanwhile, and the service answers 503 to new writes. When nothing is left to store again,
 *   the log's `ping` says when it is back;
 * - a submission whose caller still waits is not accepted yet: it is withdrawn at once (`withdraw`), its
 *   caller told `store_unavailable` (503), its run forgotten, rather than left waiting for the store. If
 *   its batch was tried, it may be stored all the same (a connection that broke after the commit, a
 *   write that lands after it timed out): once the store is back, such a run is ended `cancelled`
 *   (`endWithdrawn`), so that it never runs;
 * - when a batch breaks a rule, commit by commit, so that only the bad commit fails: a refused
 *   submission takes its run with it (`refused`), a command's caller gets the error, and anything else
 *   is a fault (the engine and the store disagree; `fault`).
 * Then it sends what queued up meanwhile.
 *
 * Without a log (an engine with no store) a commit is applied at once, in `send`.
 */
import type { RunEvent } from '../core/events.js';
import type { AbortAttempt, HookRequest, StartAttempt } from '../core/scheduler.js';
import { isLeaseLost, isStoreUnavailable } from '../store/errors.js';

/**
 * Where events become durable; a store implements it (`Store.append`). Batches handed over while
 * others are in flight are stored after them, in order; when one fails, every later one in flight fails
 * too and nothing of them is stored.
 */
export interface EventLog {
  /** A log that stores at once (in memory, for `toolgraph run`) may return nothing: the commit then applies at once. */
  append(events: readonly RunEvent[]): Promise<void> | void;
  /**
   * Resolves when the log can take a batch (the store's `ping`); asked while the store is away and the
   * pipeline holds nothing to store again. Without it, the next batch is the test.
   */
  ping?(): Promise<void>;
}

/** A scheduler output waiting to be stored, its events numbered. */
export interface Commit {
  events: RunEvent[];
  /** Started once the events are stored. */
  starts: readonly StartAttempt[];
  aborts: readonly AbortAttempt[];
  /** Hooks launched once the events are stored (DESIGN §14). */
  hooks?: readonly HookRequest[];
  /** For a submission: the run it creates (see `PipelineHooks.refused`). */
  creates?: string;
  /** For a grouped submission: the attempts started before the commit (see `startsEarly`). */
  early?: readonly StartAttempt[];
  /** For a caller that waits: told when the events are stored, or that they will not be. */
  committed?: { resolve: () => void; reject: (err: unknown) => void };
  /** Told instead, once, if the store is away: the commit is kept, to be stored once it is back. */
  onHeld?: () => void;
}

/** What the engine does with stored commits and refused ones. */
export interface PipelineHooks {
  /** The commit is stored: publish its events, start and abort its attempts. */
  apply(c: Commit): void;
  /**
   * Commits were applied (arm the timer); `landed`: a batch came back from the log, so what queued
   * meanwhile may go in the next one (at the end of this turn, so that attempts the batch started and
   * that end at once join it).
   */
  settled(landed: boolean): void;
  /**
   * The store refused the submission of this run for good: forget the run, and take its events out of
   * `held` (the commits still in hand: nothing of the run may be stored after it).
   */
  refused(runId: string, held: readonly Commit[]): void;
  /** The store refused a commit that no caller waits for: the engine and the store disagree. */
  fault(err: unknown): void;
  /**
   * Several replicas (DESIGN §12): the store fenced a batch off, since this replica's lease ended. The
   * engine abandons every run (`abandon`); nothing in hand is stored any more.
   */
  leaseLost?(err: unknown): void;
}

export interface PipelineOptions {
  /** First pause before storing again while the store is away (ms); default 200. */
  retryMs?: number;
  /** The pause grows to this (ms); default 1000, so a store that comes back is seen within a second. */
  maxRetryMs?: number;
  /** Epoch milliseconds, for the events the pipeline writes itself (see `endWithdrawn`); default `Date.now`. */
  clock?: () => number;
}

/** A batch in flight, and, once known, whether it is stored. */
interface Writing {
  batch: Commit[];
  settled?: { err?: unknown };
  /** Set once an append of it failed after being tried (not refused for an earlier one): it may be stored. */
  tried?: boolean;
  /** Resolves once `settled` is set. */
  done?: Promise<void>;
}

export class CommitPipeline {
  private readonly queue: Commit[] = [];
  private readonly writing: Writing[] = [];
  /** Set while failed batches are stored again: nothing is sent meanwhile. */
  private repairing = false;
  private outage: unknown;
  private readonly retryMs: number;
  private readonly maxRetryMs: number;
  private readonly clock: () => number;
  /** Resolved when the pipeline holds nothing (see `drained`). */
  private empties: (() => void)[] = [];
  /** Set once the log stored a batch at once (returned no promise). */
  private syncLog = false;
  /**
   * Runs withdrawn from a batch that was tried (see `withdraw`), with the seqs their last stored event
   * may have: ended once the store is back (`endWithdrawn`).
   */
  private maybeStored: { runId: string; lastSeqs: number[]; at: number }[] = [];
  /** Grows with each `abandon`: what was in hand before it is never stored or applied. */
  private generation = 0;

  constructor(
    private readonly log: EventLog | undefined,
    private readonly hooks: PipelineHooks,
    opts: PipelineOptions = {},
  ) {
    this.retryMs = opts.retryMs ?? 200;
    this.maxRetryMs = opts.maxRetryMs ?? 1000;
    this.clock = opts.clock ?? Date.now;
  }

  /** Whether the log writes on its own (so a batch may be sent early, while this thread goes on). */
  get async(): boolean {
    return this.log !== undefined && !this.syncLog;
  }

  /** The error that says the store is away, while it is; `undefined` when it writes. */
  get unavailable(): unknown {
    return this.outage;
  }

  /** Commits queued and not sent yet, oldest first. */
  get queued(): readonly Commit[] {
    return this.queue;
  }

  get idle(): boolean {
    return this.queue.length === 0 && this.writing.length === 0 && !this.repairing;
  }

  push(c: Commit): void {
    this.queue.push(c);
    if (this.outage !== undefined) held(c);
  }

  /** Hands every queued commit to the log as one batch (unless failed batches are being stored again). */
  send(): void {
    if (this.repairing || this.queue.length === 0) return;
    const batch = this.queue.splice(0);
    if (!this.log) {
      for (const c of batch) this.applyOne(c);
      this.hooks.settled(false);
      this.checkEmpty();
      return;
    }
    let stored: Promise<void> | void;
    try {
      stored = this.log.append(eventsOf(batch));
    } catch (err) {
      stored = Promise.reject(err);
    }
    if (stored === undefined) {
      // Stored at once (a log that does so has nothing in flight before it): apply it now.
      this.syncLog = true;
      for (const c of batch) this.applyOne(c);
      this.hooks.settled(false);
      this.checkEmpty();
      return;
    }
    const w: Writing = { batch };
    this.writing.push(w);
    w.done = stored.then(
      () => this.landed(w, {}),
      (err: unknown) => this.landed(w, { err }),
    );
  }

  /** Resolves once everything queued or in flight now (and what that leads to) is stored or refused. */
  drained(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((resolve) => this.empties.push(resolve));
  }

  /**
   * Drops everything in hand (see `PipelineHooks.leaseLost`): queued commits and batches in flight are
   * never applied, and their callers hear `reason`.
   */
  abandon(reason: unknown): void {
    this.generation++;
    const dropped = [...this.queue.splice(0), ...this.writing.splice(0).flatMap((w) => w.batch)];
    this.repairing = false;
    this.outage = undefined;
    this.maybeStored = [];
    for (const c of dropped) c.committed?.reject(reason);
    this.checkEmpty();
  }

  private landed(w: Writing, outcome: { err?: unknown }): void {
    w.settled = outcome;
    if (outcome.err !== undefined && !isRefusedForAnEarlier(outcome.err)) w.tried = true;
    if (!this.writing.includes(w)) return;
    if (isLeaseLost(outcome.err)) {
      this.hooks.leaseLost?.(outcome.err);
      return;
    }
    if (this.repairing) return;
    let applied = false;
    while (this.writing.length > 0) {
      const head = this.writing[0] as Writing;
      if (!head.settled) break;
      if (head.settled.err !== undefined) {
        void this.repair();
        return;
      }
      this.writing.shift();
      for (const c of head.batch) this.applyOne(c);
      applied = true;
    }
    if (applied) this.outage = undefined;
    this.hooks.settled(true);
    this.checkEmpty();
  }

  /** Settles every batch in flight, then stores the failed ones again (see the top of the file). */
  private async repair(): Promise<void> {
    const generation = this.generation;
    this.repairing = true;
    try {
      await Promise.all(this.writing.map((w) => w.done));
      if (generation !== this.generation) return;
      const ws = this.writing.splice(0);
      for (const [i, w] of ws.entries()) {
        if (w.settled?.err === undefined) {
          for (const c of w.batch) this.applyOne(c);
          continue;
        }
        await this.storeAgain(
          w,
          ws.slice(i + 1).filter((x) => x.settled?.err !== undefined),
          w.settled.err,
        );
        if (generation !== this.generation) return;
      }
    } finally {
      if (generation === this.generation) this.repairing = false;
    }
    this.hooks.settled(true);
    this.checkEmpty();
  }

  /** Stores a failed batch's commits again: together while the store is away, then one by one. */
  private async storeAgain(w: Writing, later: readonly Writing[], first: unknown): Promise<void> {
    const generation = this.generation;
    const batch = w.batch;
    let err: unknown = first;
    let pause = this.retryMs;
    while (isStoreUnavailable(err) || isRefusedForAnEarlier(err)) {
      if (isStoreUnavailable(err)) {
        this.outage = err;
        this.withdraw(err, [w, ...later]);
        await sleep(pause);
        pause = Math.min(pause * 2, this.maxRetryMs);
      }
      if (generation !== this.generation) return;
      // Nothing left to store (its submissions were withdrawn): the log says when it is back.
      err = eventsOf(batch).length === 0 && this.outage !== undefined ? await this.probe() : await this.tryAppend(batch, w);
      if (generation !== this.generation) return;
      if (err === undefined) {
        this.outage = undefined;
        for (const c of batch) this.applyOne(c);
        await this.endWithdrawn();
        return;
      }
    }
    if (isLeaseLost(err)) {
      this.hooks.leaseLost?.(err);
      return;
    }
    // A rule is broken: commit by commit, so that only the bad one fails.
    for (const [i, c] of batch.entries()) {
      pause = this.retryMs;
      for (;;) {
        if (generation !== this.generation) return;
        const e = await this.tryAppend([c], w);
        if (generation !== this.generation) return;
        if (isLeaseLost(e)) {
          this.hooks.leaseLost?.(e);
          return;
        }
        if (e === undefined) {
          this.outage = undefined;
          this.applyOne(c);
          break;
        }
        if (isStoreUnavailable(e)) {
          this.outage = e;
          await sleep(pause);
          pause = Math.min(pause * 2, this.maxRetryMs);
          continue;
        }
        this.refuse(c, e, [c, ...batch.slice(i + 1), ...later.flatMap((x) => x.batch), ...this.queue]);
        break;
      }
    }
    await this.endWithdrawn();
  }

  /**
   * The store is away: takes every submission whose caller waits out of the failed batches and the
   * queue, and refuses it with `err` (its caller answers 503; the engine forgets its run); so is a
   * caller that waits for nothing of its own. What belongs to accepted runs stays (a command on one, its
   * caller too: it is applied already). A run withdrawn from a batch that was tried is noted in `maybeStored`, with
   * the last seq it may have in the store after each such batch.
   */
  private withdraw(err: unknown, failed: readonly Writing[]): void {
    const lists = [...failed.map((x) => x.batch), this.queue];
    const all = lists.flat();
    for (const [n, list] of lists.entries()) {
      for (let i = 0; i < list.length; ) {
        const c = list[i] as Commit;
        if (c.committed && c.creates === undefined && c.events.length + c.starts.length + c.aborts.length === 0) {
          // A caller that waits only for what came before it (a command that changed nothing): nothing to undo.
          list.splice(i, 1);
          c.committed.reject(err);
          continue;
        }
        if (c.creates === undefined || !c.committed) {
          held(c);
          i++;
          continue;
        }
        const lastSeqs = new Set<number>();
        let last = 0;
        for (const x of failed.slice(n)) {
          for (const d of x.batch) for (const e of d.events) if (e.runId === c.creates && e.seq > last) last = e.seq;
          if (x.tried && last > 0) lastSeqs.add(last);
        }
        if (lastSeqs.size > 0) this.maybeStored.push({ runId: c.creates, lastSeqs: [...lastSeqs], at: this.clock() });
        list.splice(i, 1);
        this.refuse(c, err, all);
      }
    }
  }

  /**
   * Ends the withdrawn runs that may be stored (see `withdraw`): a `run.completed` (`cancelled`) after
   * the last seq each may have. A run that is not there, or not with that seq, refuses it: at most one
   * of them is stored, and only for a run whose submission was stored after all.
   */
  private async endWithdrawn(): Promise<void> {
    const generation = this.generation;
    while (this.maybeStored.length > 0 && generation === this.generation) {
      // The same event each time (its time too), so that a try that landed after it timed out is known.
      const { runId, lastSeqs, at } = this.maybeStored[0] as { runId: string; lastSeqs: number[]; at: number };
      for (let i = 0; i < lastSeqs.length; ) {
        const seq = (lastSeqs[i] as number) + 1;
        const end = { seq, type: 'run.completed', runId, at, data: { status: 'cancelled', diagnostics: [WITHDRAWN] } } as RunEvent;
        const err = await this.tryAppend([{ events: [end], starts: [], aborts: [] }]);
        if (generation !== this.generation) return;
        if (isLeaseLost(err)) {
          this.hooks.leaseLost?.(err);
          return;
        }
        if (isStoreUnavailable(err)) {
          this.outage = err;
          await sleep(this.maxRetryMs);
          continue;
        }
        this.outage = undefined;
        i++;
      }
      this.maybeStored.shift();
    }
  }

  /** Whether the pipeline will end this withdrawn run once the store is back (see `endWithdrawn`). */
  withdrawing(runId: string): boolean {
    return this.maybeStored.some((m) => m.runId === runId);
  }

  /** Asks the log whether it is back; `undefined` when it is. */
  private async probe(): Promise<unknown> {
    if (!this.log?.ping) return undefined;
    try {
      await this.log.ping();
      return undefined;
    } catch (err) {
      return err ?? new Error('the store did not answer');
    }
  }

  private refuse(c: Commit, err: unknown, held: readonly Commit[]): void {
    if (c.creates !== undefined) this.hooks.refused(c.creates, held);
    if (c.committed) c.committed.reject(err);
    else if (c.creates === undefined) this.hooks.fault(err);
  }

  /** `w`: the batch in flight these commits came from, marked `tried` when the append fails after trying. */
  private async tryAppend(batch: readonly Commit[], w?: Writing): Promise<unknown> {
    const events = eventsOf(batch);
    if (events.length === 0) return undefined;
    try {
      await (this.log as EventLog).append(events);
      return undefined;
    } catch (err) {
      if (w && !isRefusedForAnEarlier(err)) w.tried = true;
      return err ?? new Error('the store refused a batch');
    }
  }

  private applyOne(c: Commit): void {
    this.hooks.apply(c);
    c.committed?.resolve();
  }

  private checkEmpty(): void {
    if (!this.idle || this.empties.length === 0) return;
    const waiting = this.empties.splice(0);
    for (const resolve of waiting) resolve();
  }
}

/** Tells a commit's caller that waits only until it is held (see `Commit.onHeld`) that it is. */
function held(c: Commit): void {
  const told = c.onHeld;
  delete c.onHeld;
  told?.();
}

function eventsOf(batch: readonly Commit[]): RunEvent[] {
  if (batch.length === 1) return (batch[0] as Commit).events;
  const out: RunEvent[] = [];
  for (const c of batch) for (const e of c.events) out.push(e);
  return out;
}

/** Why a run withdrawn while the store was away, and stored all the same, ended without running. */
const WITHDRAWN = {
  code: 'store_unavailable',
  message: 'the store could not confirm the submission in time; its caller was answered 503, so the run does not run',
};

/** The writer refused a batch only because one before it failed: storing it again may well succeed. */
function isRefusedForAnEarlier(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'batch_refused';
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
