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
 *
 * With slices on, this replica grants and refuses many calls of counted limits by itself, before they
 * ask, and an ask may grow its slices and move the calls it grants into them (replica-slices.ts); what
 * the slices give back and list goes through the same queue as the asks and give-backs.
 */
import type { PgPool } from '../store/pg-pool.js';
import type { Pause } from '../core/limits.js';
import { DEFAULT_PRIORITY_AGING_MS } from '../core/scheduler.js';
import type { PermitRequest } from '../core/scheduler.js';
import type { Limits } from '../core/tool.js';
import type { Catalog } from '../core/tool.js';
import type { PermitAnswer, PermitGate } from '../engine/engine.js';
import * as free from '../store/postgres/permits-free.js';
import * as sql from '../store/postgres/permits.js';
import type { Notifications } from './notifications.js';
import { claimOf, decide, rowsToLock, SEP, sharedLimits, type Claim, type Rates } from './permit-plan.js';
import { answersOf } from './permit-answers.js';
import { ClusterPauses } from './pauses.js';
import { CounterQueue, type CounterMark } from './permit-priority.js';
import type { SliceOptions } from './permit-slices.js';
import { bucketNames, ClusterRates, copyNodes, counterMarksOf, marksOf, marksText, pausedIn } from './permit-rows.js';
import { LockQueue } from './permit-waits.js';
import { LIST_AFTER_MS, ReplicaSlices, type SliceAnswers } from './replica-slices.js';

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
   * Slices of counted limits (replica-slices.ts, permit-slices.ts): off unless given. `holds`: whether
   * this replica's lease surely holds now (nothing is granted from a slice otherwise).
   */
  slices?: Partial<SliceOptions> & { holds: () => boolean };
}

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
  /** This replica's slices (replica-slices.ts), when on. */
  private readonly slices: ReplicaSlices | undefined;
  /** Backpressure pauses (DESIGN §4): the calls of a paused tool are not granted from slices. */
  private readonly pauses: ClusterPauses;
  /** A call was refused since places last freed here: a place freed in a slice tells the engine. */
  private refusedSinceFreed = false;

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
    this.pauses = new ClusterPauses(pool, notifications);
    const sl = opts.slices;
    this.slices =
      sl &&
      new ReplicaSlices({
        pool,
        instance,
        limits: this.limits,
        catalog,
        holds: sl.holds,
        paused: (tool, wallMs) => this.pauses.paused(tool, wallMs),
        retryMs: this.retryMs,
        enqueue: () => {
          this.ops.push({ kind: 'slices' });
          void this.run();
        },
        book: { contendMs: sl.contendMs ?? this.retryMs * 3, idleMs: sl.idleMs ?? this.retryMs * 2 },
      });
    notifications.on('toolgraph_permits', () => this.heardFreed());
    notifications.on('toolgraph_wants', (payload) => this.slices?.heardWants(payload));
    notifications.on('resync', () => this.heardFreed());
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
   * The calls this replica's slices answer now (replica-slices.ts); `undefined` for each call the
   * database must answer, or for all of them without slices. `asking`: for an ask (which may probe).
   */
  private fromSlices(requests: readonly PermitRequest[], asking = true): SliceAnswers | undefined {
    const local = this.slices?.answer(requests, asking);
    if (!local) return undefined;
    if (local.granted > 0) this.stats?.sliced?.(local.granted);
    if (local.refused > 0) {
      // A place of the slice that frees asks them again (`freedInSlices`), and so does a place freed in
      // the cluster (`heardFreed`, which lets the next batch probe at once); `retryMs` should neither come.
      this.refusedSinceFreed = true;
      this.askAgainLater();
    }
    return local;
  }

  release(permits: readonly { runId: string; callId: string }[]): void {
    if (this.slices) {
      const now = performance.now();
      let freed: 'freed' | 'contended' | undefined;
      const rest = permits.filter((p) => {
        const r = this.slices?.release(p.runId, p.callId, now);
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
    this.slices?.soon(contended ? 0 : LIST_AFTER_MS);
    if (!this.refusedSinceFreed) return;
    this.refusedSinceFreed = false;
    setImmediate(() => this.tellFreed());
  }

  /** Gives back every permit of an instance (a replica that stops, or one that lost its lease), and its slices. */
  async releaseAll(instance: string): Promise<void> {
    this.slices?.forget(instance);
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
    this.slices?.close();
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
        if (op.kind === 'slices') await this.slices?.write();
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
      const { grabs, open } = this.slices?.grabs(claims, decided, toLock.counters, counters.counts, (k, priority) =>
        othersAhead(counterMarks.get(k), instance, clock.now, priority, urgent),
      ) ?? { grabs: new Map<string, number>(), open: new Set<string>() };
      // A granted call whose counters are all open to the slices may take its places into them: it is
      // then granted from the slices (held there, listed later; `ReplicaSlices.takesInto`).
      const moved = this.slices?.takesInto(claims, decided, grabs, open) ?? new Set<Claim>();
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
    const caps = new Map(toLock.counters.map((c) => [c.key, c.cap]));
    const lost = this.slices?.took(instance, ask.slices, ask.moved, caps) ?? new Set<Claim>(ask.moved);
    this.slices?.wantKeys(instance, claims, ask.decided);
    this.keepWaiting(ask.since);
    const out = await answersOf(this.pool, claims, ask.decided, ask.now);
    this.slices?.noteFull(claims, ask.decided, out.answers);
    if (lost.size === 0) return out;
    return { ...out, answers: out.answers.map((a, i) => (lost.has(claims[i] as Claim) ? REFUSED : a)) };
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
    this.slices?.probeNow();
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
