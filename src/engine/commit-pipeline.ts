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
 * - all together first; while the store is away (`store_unavailable`: PostgreSQL gone, a full disk) it
 *   tries again every `retryMs` (growing to `maxRetryMs`), keeping everything; nothing is lost and
 *   nothing is applied out of order. `unavailable` says so meanwhile, and the service answers 503 to
 *   new writes;
 * - when a batch breaks a rule, commit by commit, so that only the bad commit fails: a refused
 *   submission takes its run with it (`refused`), a command's caller gets the error, and anything else
 *   is a fault (the engine and the store disagree; `fault`).
 * Then it sends what queued up meanwhile.
 *
 * Without a log (an engine with no store) a commit is applied at once, in `send`.
 */
import type { RunEvent } from '../core/events.js';
import type { AbortAttempt, StartAttempt } from '../core/scheduler.js';
import { isLeaseLost, isStoreUnavailable } from '../store/errors.js';

/**
 * Where events become durable; a store implements it (`Store.append`). Batches handed over while
 * others are in flight are stored after them, in order; when one fails, every later one in flight fails
 * too and nothing of them is stored.
 */
export interface EventLog {
  /** A log that stores at once (in memory, for `toolgraph run`) may return nothing: the commit then applies at once. */
  append(events: readonly RunEvent[]): Promise<void> | void;
}

/** A scheduler output waiting to be stored, its events numbered. */
export interface Commit {
  events: RunEvent[];
  /** Started once the events are stored. */
  starts: readonly StartAttempt[];
  aborts: readonly AbortAttempt[];
  /** For a submission: the run it creates (see `PipelineHooks.refused`). */
  creates?: string;
  /** For a grouped submission: the attempts started before the commit (see `startsEarly`). */
  early?: readonly StartAttempt[];
  /** For a caller that waits: told when the events are stored, or that they will not be. */
  committed?: { resolve: () => void; reject: (err: unknown) => void };
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
}

/** A batch in flight, and, once known, whether it is stored. */
interface Writing {
  batch: Commit[];
  settled?: { err?: unknown };
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
  /** Resolved when the pipeline holds nothing (see `drained`). */
  private empties: (() => void)[] = [];
  /** Set once the log stored a batch at once (returned no promise). */
  private syncLog = false;
  /** Grows with each `abandon`: what was in hand before it is never stored or applied. */
  private generation = 0;

  constructor(
    private readonly log: EventLog | undefined,
    private readonly hooks: PipelineHooks,
    opts: PipelineOptions = {},
  ) {
    this.retryMs = opts.retryMs ?? 200;
    this.maxRetryMs = opts.maxRetryMs ?? 1000;
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
    for (const c of dropped) c.committed?.reject(reason);
    this.checkEmpty();
  }

  private landed(w: Writing, outcome: { err?: unknown }): void {
    w.settled = outcome;
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
    this.repairing = true;
    const generation = this.generation;
    try {
      await Promise.all(this.writing.map((w) => w.done));
      if (generation !== this.generation) return;
      const ws = this.writing.splice(0);
      for (const [i, w] of ws.entries()) {
        if (w.settled?.err === undefined) {
          for (const c of w.batch) this.applyOne(c);
          continue;
        }
        const later = ws.slice(i + 1).flatMap((x) => (x.settled?.err === undefined ? [] : x.batch));
        await this.storeAgain(w.batch, later, w.settled.err);
        if (generation !== this.generation) return;
      }
    } finally {
      if (generation === this.generation) this.repairing = false;
    }
    this.hooks.settled(true);
    this.checkEmpty();
  }

  /** Stores a failed batch's commits again: together while the store is away, then one by one. */
  private async storeAgain(batch: Commit[], later: readonly Commit[], first: unknown): Promise<void> {
    const generation = this.generation;
    let err: unknown = first;
    let pause = this.retryMs;
    while (isStoreUnavailable(err) || isRefusedForAnEarlier(err)) {
      if (isStoreUnavailable(err)) {
        this.outage = err;
        await sleep(pause);
        pause = Math.min(pause * 2, this.maxRetryMs);
      }
      if (generation !== this.generation) return;
      err = await this.tryAppend(batch);
      if (generation !== this.generation) return;
      if (err === undefined) {
        this.outage = undefined;
        for (const c of batch) this.applyOne(c);
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
        const e = await this.tryAppend([c]);
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
        this.refuse(c, e, [c, ...batch.slice(i + 1), ...later, ...this.queue]);
        break;
      }
    }
  }

  private refuse(c: Commit, err: unknown, held: readonly Commit[]): void {
    if (c.creates !== undefined) this.hooks.refused(c.creates, held);
    if (c.committed) c.committed.reject(err);
    else if (c.creates === undefined) this.hooks.fault(err);
  }

  private async tryAppend(batch: readonly Commit[]): Promise<unknown> {
    const events = eventsOf(batch);
    if (events.length === 0) return undefined;
    try {
      await (this.log as EventLog).append(events);
      return undefined;
    } catch (err) {
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

function eventsOf(batch: readonly Commit[]): RunEvent[] {
  if (batch.length === 1) return (batch[0] as Commit).events;
  const out: RunEvent[] = [];
  for (const c of batch) for (const e of c.events) out.push(e);
  return out;
}

/** The writer refused a batch only because one before it failed: storing it again may well succeed. */
function isRefusedForAnEarlier(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'batch_refused';
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
