/**
 * Several `toolgraph serve` processes on one PostgreSQL, as one service (DESIGN §12). This is the
 * replica's side of it; the database holds the rest (migration 0002):
 *
 *   lease.ts          this replica's lease: the runs it owns are its own while it holds
 *   notifications.ts  one LISTEN connection: events appended, commands sent, permits freed
 *   feed.ts           any replica's events, for this replica's readers (SSE, waits), followed on demand
 *   commands.ts       cancel, reviews, replan, append and seal, carried to the run's owner
 *   permits.ts        cluster-wide limits and locks (the engine's permit gate)
 *   permit-plan.ts    what an ask takes (counters per limit key, lock nodes) and whether it may
 *   replica-slices.ts this replica's slices of counted limits: calls granted and given back with no
 *                     round trip, shares of contended keys, probes
 *   permit-slices.ts  the book of those slices (no I/O)
 *   permit-answers.ts what refused a call (`waitingFor`), read only for refusals
 *   pauses.ts         backpressure pauses, told to every replica
 *   admissions.ts     maxActiveRunsPerTenant across replicas
 *   wait-summary.ts   what this replica's calls wait for, published for the others
 *   limits-view.ts    `GET /v1/limits` across the cluster: permits and every replica's waiters
 *   takeover.ts       a scan's claims and bounded parallel resumes of a dead replica's runs
 *
 * Every statement is in src/store/postgres/ (one module per operation); this folder holds the logic
 * over their small interfaces.
 *
 * Ownership: the replica that accepts a run owns it (its `run.created` is written with it as owner).
 * Every `scanMs`, each replica takes over the runs whose owner's lease ended (takeover.ts: claimed in
 * batches with `FOR UPDATE SKIP LOCKED`, so two replicas never take the same run and live replicas
 * share the work; `store.takeoverConcurrency` resumes at once) and resumes them from the store exactly
 * as a restart does (DESIGN §8); their pending commands follow them. So a run is taken over within
 * `leaseMs + scanMs`, plus the time to resume the runs claimed before it.
 *
 * When this replica loses its lease (paused, cut off from the database), its engine drops every run
 * (the store's fence refuses anything more of them anyway), gives its permits up, and the replica joins
 * again as a new instance; the runs are then taken over by whoever scans first, itself included. When
 * another process joined under its name (names must be unique), it waits until no live replica has the
 * name before it joins again, and says so in an error log (`replica_name_taken`).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../contract/config.js';
import type { LimitInUse, WaitCounts } from '../core/scheduler.js';
import type { Engine } from '../engine/engine.js';
import { isUnavailableError, StoreError } from '../store/errors.js';
import type { PostgresStore } from '../store/postgres.js';
import { commandsSql } from '../store/postgres/commands.js';
import { followersSql } from '../store/postgres/followers.js';
import { leaseSql } from '../store/postgres/lease.js';
import { type ReplicasSql, replicasSql } from '../store/postgres/replicas.js';
import { type TakeoverSql, takeoverSql } from '../store/postgres/takeover.js';
import { publishWaitsSql } from '../store/postgres/wait-summary.js';
import { Admissions } from './admissions.js';
import { Commands, type CommandHandler } from './commands.js';
import { EventFeed } from './feed.js';
import { Lease } from './lease.js';
import { Notifications } from './notifications.js';
import { clusterLimits, MAX_PERMITS_READ } from './limits-view.js';
import { ClusterPermits } from './permits.js';
import { takeOver } from './takeover.js';
import { WaitPublisher } from './wait-summary.js';

export type { CommandAnswer, CommandHandler } from './commands.js';

export interface ClusterOptions {
  store: PostgresStore;
  config: Config;
  /** `--replica-id`. */
  name: string;
  logger?: Logger;
}

/** What the cluster needs of the service it runs in. */
export interface ClusterHost {
  engine: Engine;
  /** Takes a run back from the store (or ends it unrecoverable); throws when the store is away. */
  resume(runId: string): Promise<void>;
  /** Applies a command sent by another replica, as if this replica had got the request. */
  apply: CommandHandler;
}

export interface ClusterStats {
  takeovers: number;
  leaseLosses: number;
  /** The last renewals' round trips (ms), newest last; at most 100. */
  renewMs: number[];
  permitAsks: number;
  permitRefusals: number;
  /** Calls granted from this replica's slices of counted limits, with no round trip (permit-slices.ts). */
  permitsSliced: number;
  /** Each ask's round trip (ms), newest last; at most 100. */
  permitAskMs: number[];
}

export interface ReplicaInfo {
  instance: string;
  name: string;
  startedAt: number;
  leaseUntil: number;
  renewedAt: number;
  alive: boolean;
  /** How long the lease still holds by the database's clock (ms); 0 once it ended. */
  leaseLeftMs: number;
  ownedRuns: number;
}

export class Cluster {
  readonly name: string;
  readonly leaseMs: number;
  readonly store: PostgresStore;
  readonly notifications: Notifications;
  readonly lease: Lease;
  readonly permits: ClusterPermits;
  readonly commands: Commands;
  readonly feed: EventFeed;
  readonly admissions: Admissions;
  readonly waits: WaitPublisher;
  readonly stats: ClusterStats = {
    takeovers: 0,
    leaseLosses: 0,
    renewMs: [],
    permitAsks: 0,
    permitRefusals: 0,
    permitsSliced: 0,
    permitAskMs: [],
  };
  private readonly scanMs: number;
  private readonly takeoverConcurrency: number;
  private readonly takeoverSql: TakeoverSql;
  private readonly replicasSql: ReplicasSql;
  private host: ClusterHost | undefined;
  private scanTimer: NodeJS.Timeout | undefined;
  private scanning: Promise<number> | undefined;
  private rejoining = false;
  private closed = false;
  private readonly logger: Logger | undefined;
  private readonly config: Config;

  constructor(opts: ClusterOptions) {
    this.name = opts.name;
    this.config = opts.config;
    this.store = opts.store;
    this.store.fenced = true;
    this.logger = opts.logger;
    this.leaseMs = opts.config.store.leaseMs;
    this.scanMs = Math.min(1000, Math.max(100, Math.floor(this.leaseMs / 4)));
    this.takeoverConcurrency = opts.config.store.takeoverConcurrency;
    const pool = opts.store.pool;
    const instance = () => this.lease.instance;
    this.notifications = new Notifications(opts.store.url);
    this.takeoverSql = takeoverSql(pool);
    this.replicasSql = replicasSql(pool);
    this.lease = new Lease(leaseSql(pool), opts.name, this.leaseMs, {
      lost: (reason) => this.lost(reason),
      renewed: (ms) => keep(this.stats.renewMs, ms),
    });
    this.permits = new ClusterPermits(pool, instance, opts.config.limits, opts.config.catalog, this.notifications, {
      stats: {
        asked: (ms, granted, refused) => {
          this.stats.permitAsks += granted + refused;
          this.stats.permitRefusals += refused;
          keep(this.stats.permitAskMs, ms);
        },
        sliced: (granted) => {
          this.stats.permitsSliced += granted;
        },
      },
      ...(opts.config.store.permitSlices ? { slices: { holds: () => this.lease.holds } } : {}),
    });
    this.commands = new Commands(commandsSql(pool), instance, this.notifications, this.leaseMs + 5000);
    const followers = followersSql(pool);
    const follower = `${opts.name}:${randomUUID()}`;
    this.feed = new EventFeed(opts.store, this.notifications, {
      follow: (ttlMs) => followers.follow(follower, ttlMs),
      unfollow: () => followers.unfollow(follower),
    });
    this.admissions = new Admissions(pool, instance);
    this.waits = new WaitPublisher(publishWaitsSql(pool), instance);
  }

  /** The instance this replica writes as now; undefined while it has no lease. */
  get instance(): string | undefined {
    return this.lease.instance;
  }

  /** Joins: listens, and takes a lease (so this replica may create runs). Rejects when the database cannot be reached. */
  async join(): Promise<void> {
    await this.notifications.start();
    await this.lease.join();
    this.store.owner = this.lease.instance;
  }

  /**
   * Starts owning runs: takes over those whose owner is gone (an earlier process of this name, at once),
   * applies commands sent here, and scans every `scanMs`. Resolves with how many runs the first scan
   * resumed.
   */
  async start(host: ClusterHost): Promise<number> {
    this.host = host;
    this.commands.start(host.apply);
    this.waits.start(() => host.engine.waitCounts());
    const first = await this.scan();
    const tick = () => {
      this.scanTimer = setTimeout(() => {
        void this.scan().finally(() => !this.closed && tick());
      }, this.scanMs);
      this.scanTimer.unref();
    };
    tick();
    return first;
  }

  /** Runs this replica owns and runs now. */
  ownedRuns(): number {
    return this.host?.engine.liveRuns().length ?? 0;
  }

  /** Every replica that holds or held a lease lately (for `/healthz`, metrics and the dashboard). */
  async replicas(): Promise<ReplicaInfo[]> {
    const rows = await this.read(() => this.replicasSql.replicas());
    return rows.map((r) => ({
      instance: r.instance,
      name: r.name,
      startedAt: r.started_at,
      leaseUntil: r.lease_until,
      renewedAt: r.renewed_at,
      alive: r.alive,
      leaseLeftMs: r.left,
      ownedRuns: r.owned,
    }));
  }

  /**
   * The name of the replica that owns each of these runs, for those not ended (`queued`, `running`,
   * `needs_replan`); an ended run has no owner. An owner whose lease ended stays the owner until
   * another replica takes the run over.
   */
  async owners(runIds: readonly string[]): Promise<Map<string, string>> {
    if (runIds.length === 0) return new Map();
    const rows = await this.read(() => this.replicasSql.owners(runIds));
    // An instance is `name/random` (lease.ts): its name, should its row be gone.
    return new Map(rows.map((r) => [r.id, r.name ?? r.owner.slice(0, Math.max(0, r.owner.lastIndexOf('/')))]));
  }

  /**
   * `GET /v1/limits` across the cluster (limits-view.ts): every shared limit and lock in use by any
   * replica; `local` (this replica's items: its `global` and `perRun` are kept) and `mine` (its waiters
   * now) are this replica's.
   */
  async limits(local: readonly LimitInUse[], mine: { counts: WaitCounts; now: number }): Promise<LimitInUse[]> {
    const row = await this.read(() => this.replicasSql.limits(this.lease.instance ?? null, MAX_PERMITS_READ));
    if (row === undefined) throw new StoreError('store_unavailable', `PostgreSQL at ${this.store.where} gave no answer`);
    return clusterLimits({ row, limits: this.config.limits, catalog: this.config.catalog, local, mine });
  }

  /** A read for the API: `store_unavailable` (503) when the database does not answer. */
  private async read<R>(statement: () => Promise<R>): Promise<R> {
    try {
      return await statement();
    } catch (err) {
      // A statement's own error (a SQLSTATE outside the connection and server classes) is a bug: as it is.
      const code = (err as { code?: unknown }).code;
      if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !isUnavailableError(err)) throw err;
      throw new StoreError('store_unavailable', `PostgreSQL at ${this.store.where} cannot be read now: ${(err as Error).message}`);
    }
  }

  /** Stops: no more scans or commands; gives permits and (with `release`) the lease up, so others take the runs over at once. */
  async close(release = true): Promise<void> {
    this.closed = true;
    if (this.scanTimer) clearTimeout(this.scanTimer);
    this.commands.stop();
    this.waits.stop();
    this.permits.close();
    this.feed.close();
    await this.scanning?.catch(() => {});
    const instance = this.lease.instance;
    if (release && instance) await this.permits.releaseAll(instance).catch(() => {});
    await this.lease.stop(release);
    await this.notifications.close();
  }

  /**
   * Takes over the runs whose owner's lease ended, and resumes the runs this replica owns but does not
   * run (a resume that failed while the store was away); one scan at a time.
   */
  scan(): Promise<number> {
    this.scanning ??= this.scanOnce().finally(() => (this.scanning = undefined));
    return this.scanning;
  }

  private async scanOnce(): Promise<number> {
    const me = this.lease.instance;
    const host = this.host;
    if (me === undefined || host === undefined || this.closed) return 0;
    // Permits of instances whose lease ended are free again: whoever notices first gives them back.
    await this.permits
      .freeDead()
      .catch((err) => this.logger?.warn({ err: (err as Error).message }, 'could not free the permits of ended leases now'));
    let own: string[];
    try {
      own = (await this.takeoverSql.owned(me)).filter((id) => !host.engine.knows(id));
    } catch {
      return 0;
    }
    const pass = await takeOver(
      {
        claim: (limit) => this.takeoverSql.claim(me, limit),
        resume: (id) => host.resume(id),
        active: () => this.lease.instance === me && !this.closed,
        // Their commands follow them.
        claimed: (ids) => void this.commands.retarget(ids).catch(() => {}),
      },
      own,
      { concurrency: this.takeoverConcurrency },
    );
    const claimed = new Set(pass.claimed);
    this.stats.takeovers += pass.resumed.filter((id) => claimed.has(id)).length;
    if (claimed.size > 0) this.logger?.info({ replica: this.name, runs: claimed.size }, 'took over runs whose owner is gone');
    if (pass.error !== undefined)
      this.logger?.warn({ err: (pass.error as Error).message }, 'could not take over or resume every run now; the next scan tries again');
    return pass.resumed.length;
  }

  /** The lease is gone: drop every run, give up permits, and join again as a new instance (`rejoin`). */
  private lost(reason: string): void {
    if (this.rejoining || this.closed) return;
    this.rejoining = true;
    this.stats.leaseLosses++;
    const old = this.store.owner;
    this.logger?.warn(
      { replica: this.name, instance: old, reason },
      'lost the lease: dropping every run; they are taken over from the store',
    );
    this.lease.drop();
    this.store.owner = undefined;
    this.host?.engine.abandon(
      new StoreError('lease_lost', `this replica lost its lease (${reason}); retry: another replica takes the run over`),
    );
    if (old) void this.permits.releaseAll(old).catch(() => {});
    void this.rejoin(old);
  }

  /** Called by the engine when the store fenced an append off. */
  leaseLost(): void {
    this.lost('the store refused an append: another replica owns the run');
  }

  /**
   * Joins again, retrying while the database is away. When a later instance of this name ended `old`'s
   * lease (another process joined under it: names must be unique), it first waits until no live replica
   * has the name, instead of taking it back, which would make each end the other's lease in turn.
   */
  private async rejoin(old: string | undefined): Promise<void> {
    let yieldName = false;
    let checked = old === undefined;
    for (let pause = 100; !this.closed; pause = Math.min(pause * 2, 2000)) {
      try {
        if (!checked && old !== undefined) {
          yieldName = await this.lease.replaced(old);
          checked = true;
          if (yieldName)
            this.logger?.error(
              { replica: this.name, instance: old, code: 'replica_name_taken' },
              "another process joined the cluster under this replica's name: this replica joins again once no live replica has the name (give each replica its own --replica-id)",
            );
        }
        if (yieldName && (await this.lease.nameHeld())) {
          await new Promise((resolve) => setTimeout(resolve, Math.max(pause, this.scanMs)).unref());
          continue;
        }
        await this.lease.join();
        this.store.owner = this.lease.instance;
        this.rejoining = false;
        this.logger?.info({ replica: this.name, instance: this.lease.instance }, 'joined the cluster again');
        void this.scan();
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, pause).unref());
      }
    }
  }
}

function keep(list: number[], ms: number): void {
  list.push(ms);
  if (list.length > 100) list.shift();
}
