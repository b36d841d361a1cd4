/**
 * Cluster-wide permits (DESIGN §12): the engine's `PermitGate` on PostgreSQL.
 *
 * Every running call of every replica holds a row of `permits`. Asking for permits is one transaction
 * under one advisory lock, so asks from all replicas are taken one after another: the permits of live
 * instances are read (those of instances whose lease ended are deleted: they are free again) and
 * counted into a `Limiter` of the same limits, minus `global` and `perRun`, which stay per replica; each
 * request is then checked and taken all or nothing, in the order asked, exactly as one replica's
 * limiter does (tenant, tool, resource, rate, and the reader–writer locks of `tenant` and `global`
 * scope). Rate buckets live in `rate_buckets`, on the database's clock. A refusal says why
 * (refusals.ts): the limit or lock, its key, capacity and use, and the running calls of any replica that
 * hold it; the call waits for that (its `waitingFor`, DESIGN §7).
 *
 * Giving permits back deletes the rows and NOTIFYs `toolgraph_permits`, so that replicas with refused
 * calls ask again at once (`onFreed`); they also ask again every `retryMs`, in case a notification was
 * missed. Asks and give-backs go through one queue, in order: a call's next attempt never asks before
 * its last attempt's permit is given back.
 */
import type pg from 'pg';
import { Limiter, type Holder } from '../core/limits.js';
import { key } from '../core/resources.js';
import type { PermitRequest } from '../core/scheduler.js';
import type { Limits, Rate } from '../core/tool.js';
import type { Catalog } from '../core/tool.js';
import type { WaitHolder } from '../core/waiting.js';
import type { PermitAnswer, PermitGate } from '../engine/engine.js';
import type { Notifications } from './notifications.js';
import { Refusals } from './refusals.js';

const GRANTED: PermitAnswer = Object.freeze({ granted: true });
const REFUSED: PermitAnswer = Object.freeze({ granted: false });

/** The advisory lock that takes asks one at a time ("tgpm"). */
const PERMITS_LOCK = 0x7467706d;

interface PermitRow {
  instance: string;
  run_id: string;
  call_id: string;
  tenant: string;
  tool: string;
  domain: string | null;
  reads: string;
  writes: string;
  since: number;
}

type Op =
  | { kind: 'acquire'; requests: readonly PermitRequest[]; resolve: (answers: PermitAnswer[]) => void; reject: (err: unknown) => void }
  | { kind: 'release'; permits: { runId: string; callId: string }[] };

export interface PermitStats {
  /** Asks answered, and how long each took (ms), for the metrics. */
  asked(ms: number, granted: number, refused: number): void;
}

export class ClusterPermits implements PermitGate {
  private readonly ops: Op[] = [];
  private running = false;
  private readonly freed = new Set<() => void>();
  private retry: NodeJS.Timeout | undefined;
  private retryAt = 0;
  private readonly limits: Limits;

  constructor(
    private readonly pool: pg.Pool,
    private readonly instance: () => string | undefined,
    limits: Limits,
    private readonly catalog: Catalog,
    notifications: Notifications,
    private readonly retryMs = 1000,
    private readonly stats?: PermitStats,
  ) {
    // `global` protects each replica's own host, and `perRun` is counted where the run is.
    const { global: _g, perRun: _p, ...shared } = limits;
    this.limits = shared;
    notifications.on('toolgraph_permits', () => this.tellFreed());
    notifications.on('resync', () => this.tellFreed());
  }

  onFreed(listener: () => void): void {
    this.freed.add(listener);
  }

  acquire(requests: readonly PermitRequest[]): Promise<PermitAnswer[]> {
    return new Promise((resolve, reject) => {
      this.ops.push({ kind: 'acquire', requests, resolve, reject });
      void this.run();
    });
  }

  release(permits: readonly { runId: string; callId: string }[]): void {
    const last = this.ops[this.ops.length - 1];
    if (last?.kind === 'release' && !this.running) last.permits.push(...permits);
    else this.ops.push({ kind: 'release', permits: [...permits] });
    void this.run();
  }

  /** Gives back every permit of an instance (a replica that stops, or one that lost its lease). */
  async releaseAll(instance: string): Promise<void> {
    await this.pool.query(
      `WITH d AS (DELETE FROM permits WHERE instance = $1 RETURNING 1) SELECT pg_notify('toolgraph_permits', $1) WHERE EXISTS (SELECT 1 FROM d)`,
      [instance],
    );
  }

  close(): void {
    if (this.retry) clearTimeout(this.retry);
    this.retry = undefined;
    this.freed.clear();
  }

  private async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      for (let op = this.ops.shift(); op; op = this.ops.shift()) {
        if (op.kind === 'release') await this.give(op.permits).catch(() => this.giveLater(op.permits));
        else {
          const started = performance.now();
          try {
            const { answers, tokenInMs } = await this.take(op.requests);
            const n = answers.filter((a) => a.granted).length;
            this.stats?.asked(performance.now() - started, n, answers.length - n);
            if (n < answers.length) this.askAgainLater(tokenInMs);
            op.resolve(answers);
          } catch (err) {
            this.askAgainLater();
            op.reject(err);
          }
        }
      }
    } finally {
      this.running = false;
    }
  }

  /** A give-back that failed (the database away) is tried again; the lease ends them anyway. */
  private giveLater(permits: { runId: string; callId: string }[]): void {
    setTimeout(() => this.release(permits), this.retryMs).unref();
  }

  private async give(permits: readonly { runId: string; callId: string }[]): Promise<void> {
    const instance = this.instance();
    if (instance === undefined || permits.length === 0) return;
    await this.pool.query(
      `WITH d AS (DELETE FROM permits p USING unnest($1::text[], $2::text[]) AS g(run_id, call_id)
         WHERE p.run_id = g.run_id AND p.call_id = g.call_id AND p.instance = $3 RETURNING 1)
       SELECT pg_notify('toolgraph_permits', $3) WHERE EXISTS (SELECT 1 FROM d)`,
      [permits.map((p) => p.runId), permits.map((p) => p.callId), instance],
    );
  }

  /**
   * Grants what fits, and says what refused the rest (their `waitingFor`); `tokenInMs`: when a rate
   * limit that refused one has a token again.
   */
  private async take(requests: readonly PermitRequest[]): Promise<{ answers: PermitAnswer[]; tokenInMs?: number }> {
    const instance = this.instance();
    if (instance === undefined) return { answers: requests.map(() => REFUSED) };
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      try {
        const granted = await this.takeIn(client, instance, requests);
        await client.query('COMMIT');
        return granted;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
    } finally {
      client.release();
    }
  }

  private async takeIn(
    client: pg.PoolClient,
    instance: string,
    requests: readonly PermitRequest[],
  ): Promise<{ answers: PermitAnswer[]; tokenInMs?: number }> {
    await client.query('SELECT pg_advisory_xact_lock($1)', [PERMITS_LOCK]);
    const clock = (
      await client.query<{ now: number; alive: boolean }>(
        'SELECT toolgraph_now() AS now, EXISTS (SELECT 1 FROM replicas WHERE instance = $1 AND lease_until > toolgraph_now()) AS alive',
        [instance],
      )
    ).rows[0];
    const now = clock?.now as number;
    // An instance whose lease ended may not know it yet: the others count its permits free already, so
    // it gets none (its lease watchdog ends its runs).
    if (clock?.alive !== true) return { answers: requests.map(() => REFUSED) };
    // Permits of instances whose lease ended are free again.
    await client.query(
      'DELETE FROM permits p WHERE NOT EXISTS (SELECT 1 FROM replicas r WHERE r.instance = p.instance AND r.lease_until > $1)',
      [now],
    );
    // Oldest first: a refusal names the oldest holders.
    const held = (await client.query<PermitRow>('SELECT * FROM permits ORDER BY since, run_id, call_id')).rows;
    const limiter = new Limiter(this.limits);
    const rated = this.hasRates();
    if (rated)
      for (const b of (await client.query<{ name: string; units: number; last: number }>('SELECT * FROM rate_buckets')).rows)
        limiter.seedBucket(b.name, b.units, b.last);
    // Who each running call (and each ask of this batch) is, to name it as a holder in a refusal.
    const who = new Map<Holder, WaitHolder>();
    for (const row of held) {
      const h = this.holder(
        row.run_id,
        row.tenant,
        row.tool,
        row.domain,
        JSON.parse(row.reads) as string[],
        JSON.parse(row.writes) as string[],
      );
      who.set(h, { runId: row.run_id, callId: row.call_id, tenant: row.tenant, since: row.since });
      limiter.hold(h);
    }
    const answers: PermitAnswer[] = [];
    const refusals = new Refusals(limiter, who);
    const rows: PermitRequest[] = [];
    let tokenAt: number | undefined;
    for (const r of requests) {
      const h = this.holder(r.runId, r.tenant, r.tool, r.domain, r.reads, r.writes);
      who.set(h, { runId: r.runId, callId: r.callId, tenant: r.tenant, since: now });
      const check = limiter.check(h, now);
      if (check.ok) {
        limiter.acquire(h, now);
        refusals.granted();
        rows.push(r);
        answers.push(GRANTED);
        continue;
      }
      if (check.reason === 'rate' && check.wakeAt !== undefined) tokenAt = Math.min(tokenAt ?? Infinity, check.wakeAt);
      const why = refusals.of(h, check);
      answers.push(why ? { granted: false, waitingFor: [why] } : REFUSED);
    }
    if (rows.length > 0) {
      await client.query(
        `INSERT INTO permits (instance, run_id, call_id, tenant, tool, domain, reads, writes, since)
         SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[]), LATERAL (SELECT $9::bigint) AS s
         ON CONFLICT (run_id, call_id) DO UPDATE SET instance = excluded.instance, tenant = excluded.tenant, tool = excluded.tool,
           domain = excluded.domain, reads = excluded.reads, writes = excluded.writes, since = excluded.since`,
        [
          instance,
          rows.map((r) => r.runId),
          rows.map((r) => r.callId),
          rows.map((r) => r.tenant),
          rows.map((r) => r.tool),
          rows.map((r) => r.domain),
          rows.map((r) => JSON.stringify(r.reads)),
          rows.map((r) => JSON.stringify(r.writes)),
          now,
        ],
      );
    }
    if (rated && rows.length > 0) {
      const buckets = [...limiter.rateBuckets()].filter(([, b]) => Number.isFinite(b.last));
      await client.query(
        `INSERT INTO rate_buckets (name, units, last) SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[])
         ON CONFLICT (name) DO UPDATE SET units = excluded.units, last = excluded.last`,
        [buckets.map(([n]) => n), buckets.map(([, b]) => Math.round(b.units)), buckets.map(([, b]) => b.last)],
      );
    }
    return tokenAt === undefined ? { answers } : { answers, tokenInMs: Math.max(0, tokenAt - now) };
  }

  private holder(
    runId: string,
    tenant: string,
    tool: string,
    domain: string | null,
    reads: readonly string[],
    writes: readonly string[],
  ): Holder {
    const rate: Rate | undefined = this.catalog.get(tool)?.rate;
    return { runId, tenant, tool, domain, reads: reads.map(key), writes: writes.map(key), ...(rate ? { toolRate: rate } : {}) };
  }

  private hasRates(): boolean {
    return Object.keys(this.limits.rate.tenant).length > 0 || this.catalog.list().some((m) => m.rate !== undefined);
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

  private tellFreed(): void {
    for (const l of this.freed) l();
  }
}
