/**
 * Cluster-wide permits (DESIGN §12): the engine's `PermitGate` on PostgreSQL, without a cluster-wide
 * lock.
 *
 * An ask is one transaction that locks only the rows its calls name (permit-plan.ts): a counter per
 * limit key (`tenant:<t>`, `tool:<t>`, `resource:<key>`), the lock nodes of their resource keys and
 * the keys' ancestors (reader–writer locks of `tenant` and `global` scope, as multi-granularity
 * locking), and the rate buckets of rated calls (on the database's clock). It decides the batch in the
 * order asked, all or nothing per call, as one replica's limiter does, and writes the increments and a
 * permit row per granted call (what it took, so that the give-back takes exactly that back). Asks for
 * different keys never wait on each other, and a granted ask reads no other call's permit: holders are
 * read only to explain a refusal (its `waitingFor`: the limit or lock, its key, capacity and use, and
 * the oldest running calls of any replica that hold it) and for `GET /v1/limits`. A call refused by a
 * lock marks the lock rows it waits for (permit-waits.ts), so that younger conflicting calls of any
 * replica wait behind it: first come, first served across replicas, and no writer starves.
 *
 * Giving permits back deletes the rows, takes their counts off and NOTIFYs `toolgraph_permits`, so that
 * replicas with refused calls ask again at once (`onFreed`); they also ask again every `retryMs`, in
 * case a notification was missed. Asks and give-backs go through one queue, in order: a call's next
 * attempt never asks before its last attempt's permit is given back. The permits of an instance whose
 * lease ended are given back by whichever replica's scan notices first (`freeDead`, store/postgres/permits-free.ts), once.
 */
import type { PgPool } from '../store/pg-pool.js';
import type { Pause } from '../core/limits.js';
import { DEFAULT_PRIORITY_AGING_MS } from '../core/scheduler.js';
import type { PermitRequest } from '../core/scheduler.js';
import { MAX_HOLDERS, type WaitReason } from '../core/waiting.js';
import type { Limits } from '../core/tool.js';
import type { Catalog } from '../core/tool.js';
import type { PermitAnswer, PermitGate } from '../engine/engine.js';
import * as free from '../store/postgres/permits-free.js';
import * as sql from '../store/postgres/permits.js';
import * as slicesSql from '../store/postgres/slices.js';
import type { Notifications } from './notifications.js';
import { claimOf, decide, rowsToLock, SEP, sharedLimits, type Claim, type Decided, type Rates } from './permit-plan.js';
import { answersOf, slicedRefusal } from './permit-answers.js';
import { ClusterPauses } from './pauses.js';
import { CounterQueue, DEFAULT_PRIORITY, type CounterMark } from './permit-priority.js';
import { HANDOFF_MS, SliceBook, type SliceOptions } from './permit-slices.js';
import { bucketNames, ClusterRates, copyNodes, counterMarksOf, marksOf, marksText, pausedIn } from './permit-rows.js';
import { LockQueue } from './permit-waits.js';

const GRANTED: PermitAnswer = Object.freeze({ granted: true });
const REFUSED: PermitAnswer = Object.freeze({ granted: false });

/**
 * A give-back waits up to this many turns of the event loop for the asks it makes possible on this
 * replica (an attempt's end reaches the scheduler in one turn, its next asks the gate in the next).
 */
const HANDOFF_HOPS = 3;

/** At most this many waiting calls' places in line are kept (past it, they start again). */
const MAX_WAITING_KEPT = 100_000;

/** No rated call in the ask. */
const NO_RATES: Rates = { check: () => ({ ok: true }), take: () => {} };

type Op =
  | {
      kind: 'acquire';
      requests: readonly PermitRequest[];
      /** Their claims, when the slices worked them out already. */
      claims?: readonly Claim[];
      resolve: (answers: PermitAnswer[]) => void;
      reject: (err: unknown) => void;
    }
  | { kind: 'release'; permits: { runId: string; callId: string }[] }
  | { kind: 'slices' };

export interface PermitStats {
  /** Asks answered, and how long each took (ms), for the metrics. */
  asked(ms: number, granted: number, refused: number): void;
  /** Calls granted from this replica's slices, with no round trip. */
  sliced?(granted: number): void;
}

export interface ClusterPermitsOptions {
  /** Refused calls ask again at least this often (ms; default 1000). */
  retryMs?: number;
  stats?: PermitStats;
  /**
   * Slices of counted limits (permit-slices.ts): off unless given. `holds`: whether this replica's lease
   * surely holds now (nothing is granted from a slice otherwise).
   */
  slices?: Partial<SliceOptions> & { holds: () => boolean };
}

/** Calls of a key the database refused lately, or of a contended key, ask it at most this often (ms; one batch per key). */
const PROBE_MS = 25;

/** How soon the calls granted from slices are listed (ms): those that end sooner are never written. */
const LIST_AFTER_MS = 100;

export class ClusterPermits implements PermitGate {
  private readonly ops: Op[] = [];
  private running = false;
  private readonly freed = new Set<() => void>();
  private retry: NodeJS.Timeout | undefined;
  private retryAt = 0;
  private sweptAt = 0;
  private waitingSince = new Map<string, number>();
  private readonly limits: Limits;
  /** `limits.priorityAgingMs`: a waiting call's level drops one per this many ms (permit-priority.ts). */
  private readonly agingMs: number;

  private readonly retryMs: number;
  private readonly stats: PermitStats | undefined;
  /** Slices (permit-slices.ts), when on; `sliceOf`: the instance they belong to. */
  private readonly book: SliceBook | undefined;
  private sliceOf: string | undefined;
  private readonly leaseHolds: () => boolean;
  /** Backpressure pauses (DESIGN §4): the calls of a paused tool are not granted from slices. */
  private readonly pauses: ClusterPauses;
  /** A call was refused since places last freed here: a place freed in a slice tells the engine. */
  private refusedSinceFreed = false;
  private slicesTimer: NodeJS.Timeout | undefined;
  private slicesQueued = false;
  /**
   * Keys this replica said it waits for, when, and for which priority (`toolgraph_wants`, at most once
   * per `retryMs / 2` each, unless for a more urgent call).
   */
  private readonly toldWants = new Map<string, { at: number; priority: number }>();
  /**
   * Counter key → why the database refused a call of it, until an ask grants one (what the calls that
   * wait here for a probe are told; a place freed in the cluster lets the next batch probe at once).
   */
  private readonly full = new Map<string, WaitReason>();

  constructor(
    private readonly pool: PgPool,
    private readonly instance: () => string | undefined,
    limits: Limits,
    private readonly catalog: Catalog,
    notifications: Notifications,
    opts: ClusterPermitsOptions = {},
  ) {
    this.limits = sharedLimits(limits);
    this.agingMs = limits.priorityAgingMs ?? DEFAULT_PRIORITY_AGING_MS;
    this.retryMs = opts.retryMs ?? 1000;
    this.stats = opts.stats;
    const sl = opts.slices;
    this.book = sl ? new SliceBook({ contendMs: sl.contendMs ?? this.retryMs * 3, idleMs: sl.idleMs ?? this.retryMs * 2 }) : undefined;
    this.leaseHolds = sl?.holds ?? (() => false);
    notifications.on('toolgraph_permits', () => this.heardFreed());
    notifications.on('toolgraph_wants', (payload) => this.heardWants(payload));
    notifications.on('resync', () => this.heardFreed());
    this.pauses = new ClusterPauses(pool, notifications);
  }

  /** Backpressure (DESIGN §4): records a pause this replica's call got, and tells every replica. */
  pause(p: Pause): void {
    this.pauses.pause(p);
  }

  /** `listener` is told of every pause in force: those other replicas got, and those there when it (re)connects. */
  onPaused(listener: (p: Pause) => void): void {
    this.pauses.onPaused(listener);
  }

  onFreed(listener: () => void): void {
    this.freed.add(listener);
  }

  acquire(requests: readonly PermitRequest[]): Promise<PermitAnswer[]> {
    const local = this.fromSlices(requests);
    const keep = (_: unknown, i: number) => local?.answers[i] === undefined;
    const rest = local ? requests.filter(keep) : requests;
    if (local && rest.length === 0) return Promise.resolve(local.answers as PermitAnswer[]);
    const asked = new Promise<PermitAnswer[]>((resolve, reject) => {
      const claims = local?.claims.filter(keep);
      this.ops.push({ kind: 'acquire', requests: rest, ...(claims ? { claims } : {}), resolve, reject });
      void this.run();
    });
    if (!local || rest.length === requests.length) return asked;
    return asked.then((answers) => {
      let j = 0;
      return local.answers.map((a) => a ?? answers[j++] ?? REFUSED);
    });
  }

  /** Grants at once what this replica's slices can (the engine then starts those calls with the output that asked). */
  grantNow(requests: readonly PermitRequest[]): boolean[] | undefined {
    const local = this.fromSlices(requests, false);
    return local && local.granted > 0 ? local.answers.map((a) => a?.granted === true) : undefined;
  }

  /**
   * The calls granted from this replica's slices now, and those that wait here (refused with no round
   * trip): for a place of a slice that is the whole limit (`SliceBook.holdsAllOf`), and, between two
   * probes of the database (`PROBE_MS`), for a key it said is full or past this replica's share of a
   * contended key (`asking`: for an ask, which probes; `grantNow` only grants). `undefined` for the
   * rest, which ask the database. With the claims of all (an ask of the rest takes them as they are).
   * Undefined without slices.
   */
  private fromSlices(
    requests: readonly PermitRequest[],
    asking = true,
  ): { answers: (PermitAnswer | undefined)[]; claims: Claim[]; granted: number } | undefined {
    const book = this.book;
    if (!book || !this.leaseHolds() || !this.slicesHere()) return undefined;
    const now = performance.now();
    const wall = Date.now();
    let granted = 0;
    let refused = 0;
    const probing = new Set<string>();
    const claims = requests.map((r) => claimOf(r, this.limits, this.catalog));
    const answers = claims.map((c): PermitAnswer | undefined => {
      if (!sliceable(c) || this.pauses.paused(c.request.tool, wall)) return undefined;
      const keys = c.counters.map((k) => k.key);
      if (
        book.tryGrant(
          c.request,
          keys,
          now,
          c.counters.map((k) => k.cap),
        )
      ) {
        granted++;
        return GRANTED;
      }
      const full = c.counters.find((k) => book.holdsAllOf(k.key, k.cap, now));
      if (full !== undefined) {
        refused++;
        return { granted: false, waitingFor: [slicedRefusal(full, book.holdersOf(full.key, MAX_HOLDERS), now, wall)] };
      }
      // Of a key the database refused last (no place freed since that this replica heard of), or past
      // this replica's share of a contended key, the calls of one batch ask the database at most once
      // per PROBE_MS; the others wait here, as the database last said why.
      const capped = c.counters.find((k) => this.full.has(k.key) || book.isContended(k.key, now));
      // `grantNow` only grants: the probe is for the ask that follows it.
      if (capped === undefined || !asking || probing.has(capped.key)) return undefined;
      if (book.probe(capped.key, now, PROBE_MS)) {
        probing.add(capped.key);
        return undefined;
      }
      refused++;
      const why = this.full.get(capped.key) ?? slicedRefusal(capped, book.holdersOf(capped.key, MAX_HOLDERS), now, wall);
      return { granted: false, waitingFor: [why] };
    });
    if (granted > 0) {
      this.stats?.sliced?.(granted);
      this.slicesSoon(LIST_AFTER_MS);
    }
    if (refused > 0) {
      // A place of the slice that frees asks them again (`freedInSlices`), and so does a place freed in
      // the cluster (`heardFreed`, which lets the next batch probe at once); `retryMs` should neither come.
      this.refusedSinceFreed = true;
      this.askAgainLater();
    }
    return { answers, claims, granted };
  }

  /** Whether the slices belong to this replica's instance now; a new instance starts with none. */
  private slicesHere(): boolean {
    const instance = this.instance();
    if (instance === undefined) return false;
    if (this.sliceOf !== instance) {
      this.book?.clear();
      this.sliceOf = instance;
    }
    return true;
  }

  /** Another replica waits for keys: this one gives back what it holds of them past its share (permit-slices.ts). */
  private heardWants(payload: string): void {
    if (!this.book) return;
    try {
      const x = JSON.parse(payload) as { instance?: unknown; keys?: unknown; priority?: unknown };
      if (x.instance === this.instance() || typeof x.instance !== 'string' || !Array.isArray(x.keys)) return;
      const keys = x.keys.filter((k): k is string => typeof k === 'string');
      const priority = new Map<string, number>();
      if (x.priority && typeof x.priority === 'object')
        for (const [k, v] of Object.entries(x.priority)) if (typeof v === 'number') priority.set(k, v);
      if (this.book.wanted(keys, performance.now(), { instance: x.instance, priority })) this.slicesSoon(0);
    } catch {
      // Not ours.
    }
  }

  /** Gives back and lists what the slices say (one op in the queue, after what is queued before it). */
  private slicesSoon(ms: number): void {
    if (ms === 0) {
      if (this.slicesTimer) clearTimeout(this.slicesTimer);
      this.slicesTimer = undefined;
      if (this.slicesQueued) return;
      this.slicesQueued = true;
      this.ops.push({ kind: 'slices' });
      void this.run();
      return;
    }
    if (this.slicesTimer || this.slicesQueued) return;
    this.slicesTimer = setTimeout(() => {
      this.slicesTimer = undefined;
      this.slicesSoon(0);
    }, ms);
    this.slicesTimer.unref();
  }

  /** Writes what the slices give back and list; what failed (the database away) waits for the lease to end it. */
  private async writeSlices(): Promise<void> {
    this.slicesQueued = false;
    const book = this.book;
    const instance = this.instance();
    if (!book || instance === undefined || instance !== this.sliceOf) return;
    const now = performance.now();
    const cuts = book.cuts(now);
    const rows = book.takeRows(now, LIST_AFTER_MS);
    try {
      await slicesSql.cutSlices(this.pool, instance, cuts);
      await slicesSql.writeHolders(this.pool, instance, rows.started, rows.ended);
    } catch {
      // Counted until the lease ends, or given back by the next cut; rows are for views only.
    }
    if (book.keeps(performance.now())) this.slicesSoon(HANDOFF_MS);
    else if (book.hasFree() || book.hasRows()) this.slicesSoon(book.hasRows() ? LIST_AFTER_MS : this.retryMs);
  }

  release(permits: readonly { runId: string; callId: string }[]): void {
    if (this.book) {
      const now = performance.now();
      let freed: 'freed' | 'contended' | undefined;
      const rest = permits.filter((p) => {
        const r = this.book?.release(p.runId, p.callId, now);
        if (r) freed = freed === 'contended' ? freed : r;
        return !r;
      });
      if (freed) this.freedInSlices(freed === 'contended');
      if (rest.length === 0) return;
      permits = rest;
    }
    // Give-backs queued behind the op under way are one (one statement, one commit, one NOTIFY): the
    // queue never holds the op under way (run() takes it out first), so the last one has not started.
    const last = this.ops[this.ops.length - 1];
    if (last?.kind === 'release') last.permits.push(...permits);
    else this.ops.push({ kind: 'release', permits: [...permits] });
    void this.run();
  }

  /** Places freed in slices: contended ones go back at once, and calls refused here ask again. */
  private freedInSlices(contended: boolean): void {
    this.slicesSoon(contended ? 0 : LIST_AFTER_MS);
    if (!this.refusedSinceFreed) return;
    this.refusedSinceFreed = false;
    setImmediate(() => this.tellFreed());
  }

  /** Gives back every permit of an instance (a replica that stops, or one that lost its lease), and its slices. */
  async releaseAll(instance: string): Promise<void> {
    if (instance === this.sliceOf) this.book?.clear();
    await free.giveBack(this.pool, instance, 'all', SEP);
  }

  /**
   * Gives back the permits of instances whose lease ended (whoever notices first; each once), and every
   * `sweepMs` deletes the counter and lock rows that count nothing.
   */
  async freeDead(sweepMs = 60_000): Promise<string[]> {
    const freed = await free.freeDead(this.pool, SEP);
    if (performance.now() - this.sweptAt >= sweepMs) {
      this.sweptAt = performance.now();
      await free.sweepIdle(this.pool);
      await sql.sweepPauses(this.pool);
    }
    return freed;
  }

  close(): void {
    if (this.retry) clearTimeout(this.retry);
    this.retry = undefined;
    if (this.slicesTimer) clearTimeout(this.slicesTimer);
    this.slicesTimer = undefined;
    this.freed.clear();
    this.pauses.close();
  }

  private async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    /** Permits were given back quietly: other replicas are told once this replica's next ask holds its counters. */
    let untold = false;
    try {
      for (let op = this.ops.shift(); op; op = this.ops.shift()) {
        if (op.kind === 'slices') await this.writeSlices();
        else if (op.kind === 'release') {
          // Hand-off (DESIGN §12): the calls that waited here behind these (not marked in the cluster: this
          // replica's own limits held them) ask before other replicas hear that places freed; the marked
          // waiters of every replica still go first (permit-priority.ts).
          for (let i = 0; i < HANDOFF_HOPS && !this.ops.some((o) => o.kind === 'acquire'); i++) await new Promise((r) => setImmediate(r));
          const quiet = this.ops.some((o) => o.kind === 'acquire');
          const permits = op.permits;
          await this.give(permits, !quiet).then(
            () => (untold ||= quiet),
            () => this.giveLater(permits),
          );
        } else {
          const started = performance.now();
          try {
            // Told once this ask holds its counters: the others' asks then queue behind it on those rows,
            // their way here (the notification, their turn) overlapping with it.
            const told = untold
              ? () => {
                  untold = false;
                  void this.tell();
                }
              : undefined;
            const { answers, tokenInMs } = await this.take(op.requests, told, op.claims);
            const n = answers.filter((a) => a.granted).length;
            this.stats?.asked(performance.now() - started, n, answers.length - n);
            if (n < answers.length) {
              this.refusedSinceFreed = true;
              this.askAgainLater(tokenInMs);
            }
            op.resolve(answers);
          } catch (err) {
            this.askAgainLater();
            op.reject(err);
          }
          if (untold) untold = !(await this.tell());
        }
      }
      if (untold) await this.tell();
    } finally {
      this.running = false;
    }
  }

  /** Tells every replica that permits of this one freed; false when it could not (the database away). */
  private async tell(): Promise<boolean> {
    const instance = this.instance();
    if (instance === undefined) return true;
    return free.tellFreed(this.pool, instance).then(
      () => true,
      () => false,
    );
  }

  /** A give-back that failed (the database away) is tried again; the lease ends them anyway. */
  private giveLater(permits: { runId: string; callId: string }[]): void {
    setTimeout(() => this.release(permits), this.retryMs).unref();
  }

  /** When each call that waits for a lock was first refused (its place in line), as the last ask left it. */
  private keepWaiting(since: Map<string, number>): void {
    // Calls that stopped waiting without a grant (cancelled) are forgotten after a while.
    if (since.size > MAX_WAITING_KEPT) since.clear();
    this.waitingSince = since;
  }

  private async give(permits: readonly { runId: string; callId: string }[], notify = true): Promise<void> {
    for (const p of permits) this.waitingSince.delete(`${p.runId}\u0000${p.callId}`);
    const instance = this.instance();
    if (instance === undefined || permits.length === 0) return;
    await free.giveBack(this.pool, instance, permits, SEP, notify);
  }

  /**
   * Grants what fits, and says what refused the rest (their `waitingFor`); `tokenInMs`: when a rate
   * limit that refused one has a token again.
   */
  private async take(
    requests: readonly PermitRequest[],
    locked?: () => void,
    known?: readonly Claim[],
  ): Promise<{ answers: PermitAnswer[]; tokenInMs?: number }> {
    const instance = this.instance();
    if (instance === undefined) return { answers: requests.map(() => REFUSED) };
    const claims = known ?? requests.map((r) => claimOf(r, this.limits, this.catalog));
    const toLock = rowsToLock(claims);
    const ask = await sql.withAsk(this.pool, async (tx) => {
      const clock = await tx.begin(instance, [...new Set(requests.map((r) => r.tool))]);
      // An instance whose lease ended may not know it yet: its permits are free again, so it gets none
      // (its lease watchdog ends its runs).
      if (!clock.alive) return undefined;
      const counters = await tx.lockCounters(toLock.counters);
      locked?.();
      const counterMarks = counterMarksOf(counters.marks);
      const nodes = await tx.lockNodes(toLock.nodes, SEP);
      const rated = claims.filter((c) => c.rated);
      const buckets = rated.length > 0 ? await tx.lockBuckets(bucketNames(rated, this.limits)) : [];
      const run = (mine?: ReadonlyMap<string, readonly string[]>) => {
        const rates = rated.length > 0 ? new ClusterRates(this.limits, buckets, clock.now) : undefined;
        const since = new Map(this.waitingSince);
        const queue = new LockQueue(marksOf(nodes.marks), clock.now, this.retryMs * 3, since, this.agingMs);
        const rows = { counters: new Map(counters.counts), nodes: copyNodes(nodes.counts) };
        const urgent = new CounterQueue(
          new Map([...counterMarks].map(([k, l]) => [k, [...l]])),
          clock.now,
          this.retryMs * 3,
          this.agingMs,
          instance,
        );
        const decided = decide(claims, rows, rates ?? NO_RATES, mine, queue, pausedIn(clock.pauses), urgent);
        return { rates, decided, queue, since, urgent };
      };
      let { rates, decided, queue, since, urgent } = run();
      // A lock looked taken: maybe by the asking run itself, which never waits for its own calls.
      if (decided.needMine.size > 0) ({ rates, decided, queue, since, urgent } = run(await tx.heldLocks([...decided.needMine])));
      await tx.writeMarks(marksText(queue.changed()), SEP);
      await tx.writeCounterMarks(new Map([...urgent.changed()].map(([k, l]) => [k, l.length > 0 ? JSON.stringify(l) : null])));
      const { grabs, open } = this.grabs(claims, decided, toLock.counters, counters.counts, (k, priority) =>
        othersAhead(counterMarks.get(k), instance, clock.now, priority, urgent),
      );
      // A granted call whose counters are all open to the slices takes its places into them: it is
      // granted from the slices (held there, listed later), so that its places stay with this replica
      // when it ends instead of going back to the database one give-back at a time; a replica alone on
      // a limit ends up holding all of it (`SliceBook.holdsAllOf`), and replicas that share a contended
      // limit each their share. Into a slice this replica holds, one that grows now, or one of a key the
      // database refused it lately (a call granted on a free key stays a permit of its own, listed now).
      const sliced = (k: string) => open.has(k) && (grabs.has(k) || this.book?.has(k) === true || this.full.has(k));
      const moved = new Set(
        claims.filter((c, i) => decided.decisions[i]?.granted && sliceable(c) && c.counters.every((k) => sliced(k.key))),
      );
      const permits = claims
        .filter((c, i) => decided.decisions[i]?.granted && !moved.has(c))
        .map((c) => ({ ...c.request, keys: c.counters.map((k) => k.key), locks: c.lockEntries }));
      const counterDelta = new Map(decided.counterDelta);
      for (const [k, n] of grabs) counterDelta.set(k, (counterDelta.get(k) ?? 0) + n);
      const slices = new Map(grabs);
      for (const c of moved) for (const k of c.counters) slices.set(k.key, (slices.get(k.key) ?? 0) + 1);
      await tx.write(
        {
          instance,
          now: clock.now,
          permits,
          counterDelta,
          nodeDelta: decided.nodeDelta,
          buckets: rates?.buckets() ?? [],
          slices,
        },
        SEP,
      );
      return { now: clock.now, decided, since, slices, moved };
    });
    if (ask === undefined) return { answers: requests.map(() => REFUSED) };
    const mine = this.sliceOf === instance ? this.book : undefined;
    if (ask.slices.size > 0) mine?.grew(ask.slices, performance.now(), new Map(toLock.counters.map((c) => [c.key, c.cap])));
    // The moved calls take their places in the slices now (nothing ran since they grew). Should the
    // slices be another instance's by now, they are refused: their places go with that instance's lease.
    const lost = new Set<Claim>();
    for (const c of ask.moved)
      if (
        !mine?.tryGrant(
          c.request,
          c.counters.map((k) => k.key),
          performance.now(),
        )
      )
        lost.add(c);
    this.wantKeys(instance, claims, ask.decided);
    this.keepWaiting(ask.since);
    const out = await answersOf(this.pool, claims, ask.decided, ask.now);
    this.noteFull(claims, ask.decided, out.answers);
    if (ask.moved.size > 0) this.slicesSoon(LIST_AFTER_MS);
    if (lost.size === 0) return out;
    return { ...out, answers: out.answers.map((a, i) => (lost.has(claims[i] as Claim) ? REFUSED : a)) };
  }

  /**
   * The places this ask takes into the slices (`grabs`): of the counters its sliceable calls name, those
   * `open` to the slices (no live waiter mark of another instance's call more urgent than the ask's,
   * `marked`; below this replica's share when contended) with room to spare and no refusal in this ask
   * (permit-slices.ts).
   */
  private grabs(
    claims: readonly Claim[],
    decided: Decided,
    locked: readonly { key: string; cap: number }[],
    counts: ReadonlyMap<string, number>,
    marked: (key: string, priority: number) => boolean,
  ): { grabs: Map<string, number>; open: Set<string> } {
    const book = this.book;
    if (!book || !this.leaseHolds() || !this.slicesHere()) return { grabs: new Map(), open: new Set() };
    /** Key → the most urgent priority of this ask's sliceable calls that name it. */
    const wanted = new Map<string, number>();
    const refused = new Set<string>();
    claims.forEach((c, i) => {
      const d = decided.decisions[i];
      if (d && !d.granted && 'counter' in d) refused.add(d.counter.key);
      if (sliceable(c))
        for (const k of c.counters) wanted.set(k.key, Math.min(wanted.get(k.key) ?? Infinity, c.request.priority ?? DEFAULT_PRIORITY));
    });
    const counters = new Map<string, { cap: number; inUse: number; marked: boolean; refused: boolean; priority: number }>();
    for (const { key: k, cap } of locked) {
      const priority = wanted.get(k) ?? DEFAULT_PRIORITY;
      counters.set(k, {
        cap,
        inUse: (counts.get(k) ?? 0) + (decided.counterDelta.get(k) ?? 0),
        marked: marked(k, priority),
        refused: refused.has(k),
        priority,
      });
    }
    return book.grabs(counters, new Set(wanted.keys()), performance.now());
  }

  /** Which counters the database said are full (a call of it refused), and which not (one granted). */
  private noteFull(claims: readonly Claim[], decided: Decided, answers: readonly PermitAnswer[]): void {
    if (!this.book) return;
    decided.decisions.forEach((d, i) => {
      if (d.granted) for (const k of claims[i]?.counters ?? []) this.full.delete(k.key);
    });
    if (this.full.size > MAX_WAITING_KEPT) this.full.clear();
    decided.decisions.forEach((d, i) => {
      const a = answers[i];
      const why = a && !a.granted ? a.waitingFor?.[0] : undefined;
      if (!d.granted && 'counter' in d && why) this.full.set(d.counter.key, why);
    });
  }

  /**
   * Tells the replicas that hold slices of the counters that refused calls here (with the priority of
   * the most urgent call refused by each): they give back what they hold past their share.
   */
  private wantKeys(instance: string, claims: readonly Claim[], decided: Decided): void {
    if (!this.book) return;
    const now = performance.now();
    const keys = new Map<string, number>();
    decided.decisions.forEach((d, i) => {
      if (d.granted || !('counter' in d)) return;
      const k = d.counter.key;
      const priority = claims[i]?.request.priority ?? DEFAULT_PRIORITY;
      const told = this.toldWants.get(k);
      if (keys.has(k) || told === undefined || now - told.at >= this.retryMs / 2 || priority < told.priority)
        keys.set(k, Math.min(keys.get(k) ?? Infinity, priority));
    });
    if (keys.size === 0) return;
    for (const [k, priority] of keys) this.toldWants.set(k, { at: now, priority });
    if (this.toldWants.size > MAX_WAITING_KEPT) this.toldWants.clear();
    slicesSql.tellWants(this.pool, instance, keys).catch(() => {
      // The database is away: the refused calls ask again anyway.
    });
  }

  /** Refused calls ask again after `retryMs`, or when a rate limit has a token again if that is sooner. */
  private askAgainLater(tokenInMs?: number): void {
    const delay = Math.min(this.retryMs, tokenInMs ?? Infinity);
    const at = performance.now() + delay;
    if (this.retry && this.retryAt <= at) return;
    if (this.retry) clearTimeout(this.retry);
    this.retryAt = at;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.tellFreed();
    }, delay);
    this.retry.unref();
  }

  /** Places freed in the cluster: the calls that wait for a key the database said is full probe it now, once. */
  private heardFreed(): void {
    this.book?.probeNow();
    this.tellFreed();
  }

  private tellFreed(): void {
    for (const l of this.freed) l();
  }
}

/**
 * Whether `marks` (a counter's) has a live waiter of another instance's call that is more urgent (a lower
 * level, aging counted) than a call of `priority` that became ready now: then this replica's calls do
 * not take the counter's places into its slices (a mark without its instance counts as another's).
 */
function othersAhead(
  marks: readonly CounterMark[] | undefined,
  instance: string,
  now: number,
  priority: number,
  queue: Pick<CounterQueue, 'levelOf'>,
): boolean {
  return marks?.some((m) => m.until > now && m.by !== instance && queue.levelOf(m) < priority) ?? false;
}

/** A call that slices may grant: its limits are all counters (no lock, no rate). */
function sliceable(c: Claim): boolean {
  return c.counters.length > 0 && c.lockEntries.length === 0 && !c.rated;
}
