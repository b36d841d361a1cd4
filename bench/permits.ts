/**
 * Permit asks per second (DESIGN §12 "It scales"): the cluster's permits as they are now (a counter row
 * per limit key, locked in a fixed order: cluster/permits.ts) against the design before them (one
 * advisory lock for the whole cluster, every permit held read and counted into a limiter, kept here as
 * the baseline), in one process against one throwaway PostgreSQL, with 10 and 2,000 permits held by
 * other calls, and with 1 and 4 askers (each a gate of its own, as replicas are; each asks for a tool
 * of its own, under one tenant limit for all, or under a tenant limit each: then no two asks share a key). One ask is one call's
 * acquire followed by its give-back (`npm run bench:permits [-- --seconds 2]`).
 */
import { parseArgs } from 'node:util';
import type pg from 'pg';
import { Lease } from '../src/cluster/lease.js';
import { leaseSql } from '../src/store/postgres/lease.js';
import { Notifications } from '../src/cluster/notifications.js';
import { ClusterPermits } from '../src/cluster/permits.js';
import { parseConfig } from '../src/config/load.js';
import { Limiter, type Holder } from '../src/core/limits.js';
import { lockHolderOfRow } from '../src/cluster/permit-rows.js';
import { key } from '../src/core/resources.js';
import type { PermitRequest } from '../src/core/scheduler.js';
import type { Limits } from '../src/core/tool.js';
import { startPostgres } from '../src/bench/postgres-cluster.js';
import type { PostgresStore } from '../src/store/postgres.js';
import { openStore } from '../src/store/select.js';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '2' } } });
const seconds = Number(values.seconds);

const tools = ['t0', 't1', 't2', 't3'];
const config = parseConfig(
  `
tools:
${tools.map((t) => `  - { name: ${t}, executor: { kind: builtin, name: echo } }`).join('\n')}
limits:
  tenant: { default: 10000 }
  tool: { ${tools.map((t) => `${t}: 1000`).join(', ')} }
`,
  'bench',
);

interface Gate {
  acquire(r: readonly PermitRequest[]): Promise<{ granted: boolean }[]>;
  release(p: readonly { runId: string; callId: string }[]): void | Promise<void>;
}

/** The design before: one advisory lock for the whole cluster, every permit read (the baseline). */
class OldPermits implements Gate {
  private queue: Promise<unknown> = Promise.resolve();
  constructor(
    private readonly pool: pg.Pool,
    private readonly instance: string,
    private readonly limits: Limits,
  ) {}

  acquire(requests: readonly PermitRequest[]): Promise<{ granted: boolean }[]> {
    const p = this.queue.then(() => this.take(requests));
    this.queue = p.catch(() => {});
    return p;
  }

  release(permits: readonly { runId: string; callId: string }[]): Promise<void> {
    const p = this.queue.then(async () => {
      await this.pool.query(
        `WITH d AS (DELETE FROM permits p USING unnest($1::text[], $2::text[]) AS g(run_id, call_id)
           WHERE p.run_id = g.run_id AND p.call_id = g.call_id AND p.instance = $3 RETURNING 1)
         SELECT pg_notify('toolgraph_permits', $3) WHERE EXISTS (SELECT 1 FROM d)`,
        [permits.map((x) => x.runId), permits.map((x) => x.callId), this.instance],
      );
    });
    this.queue = p.catch(() => {});
    return p;
  }

  private async take(requests: readonly PermitRequest[]): Promise<{ granted: boolean }[]> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1)', [0x7467706d]);
      const clock = (
        await client.query<{ now: number; alive: boolean }>(
          'SELECT toolgraph_now() AS now, EXISTS (SELECT 1 FROM replicas WHERE instance = $1 AND lease_until > toolgraph_now()) AS alive',
          [this.instance],
        )
      ).rows[0] as { now: number; alive: boolean };
      const now = Number(clock.now);
      await client.query(
        'DELETE FROM permits p WHERE NOT EXISTS (SELECT 1 FROM replicas r WHERE r.instance = p.instance AND r.lease_until > $1)',
        [now],
      );
      const held = (
        await client.query<{ run_id: string; tenant: string; tool: string; domain: string | null; reads: string; writes: string }>(
          'SELECT * FROM permits ORDER BY since, run_id, call_id',
        )
      ).rows;
      const limiter = new Limiter(this.limits);
      for (const row of held) limiter.hold(lockHolderOfRow(row));
      const answers: { granted: boolean }[] = [];
      const rows: PermitRequest[] = [];
      for (const r of requests) {
        const h: Holder = {
          runId: r.runId,
          tenant: r.tenant,
          tool: r.tool,
          domain: r.domain,
          reads: r.reads.map(key),
          writes: r.writes.map(key),
        };
        const ok = limiter.check(h, now).ok;
        if (ok) {
          limiter.acquire(h, now);
          rows.push(r);
        }
        answers.push({ granted: ok });
      }
      if (rows.length > 0)
        await client.query(
          `INSERT INTO permits (instance, run_id, call_id, tenant, tool, domain, reads, writes, since)
           SELECT $1, a, b, c, d, e, f, f, $8 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) AS u(a, b, c, d, e, f)`,
          [
            this.instance,
            rows.map((r) => r.runId),
            rows.map((r) => r.callId),
            rows.map((r) => r.tenant),
            rows.map((r) => r.tool),
            rows.map((r) => r.domain),
            rows.map((r) => JSON.stringify(r.reads)),
            now,
          ],
        );
      await client.query('COMMIT');
      return answers;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }
}

const pgc = await startPostgres();
const url = await pgc.createDatabase();
const store = (await openStore({ kind: 'postgres', url, from: 'bench' }, { poolSize: 12 })) as PostgresStore;
const lease = new Lease(leaseSql(store.pool), 'bench', 600_000, { lost: () => {} });
await lease.join();
const instance = lease.instance as string;
const notifications = new Notifications(url);
await notifications.start();
const { global: _g, perRun: _p, ...shared } = config.limits;

const ask = (runId: string, tool: string, tenant = 'acme'): PermitRequest => ({
  runId,
  callId: 'c',
  tenant,
  tool,
  domain: null,
  reads: [],
  writes: [],
});

/** Holds `n` permits of other calls (tenant `held`, a tool of their own: no ask below meets them). */
async function holdPermits(n: number): Promise<void> {
  const gate = new ClusterPermits(store.pool, () => instance, config.limits, config.catalog, notifications);
  await store.pool.query(`DELETE FROM permits`);
  await store.pool.query(`UPDATE permit_counts SET in_use = 0`);
  const answers = await gate.acquire(Array.from({ length: n }, (_, i) => ask(`held-${i}`, `other-${i}`, 'held')));
  if (!answers.every((a) => a.granted)) throw new Error('could not hold the permits');
  gate.close();
}

async function measure(design: 'old' | 'new', askers: number, disjoint = false): Promise<number> {
  const gates: Gate[] = Array.from({ length: askers }, () =>
    design === 'old'
      ? new OldPermits(store.pool, instance, shared)
      : new ClusterPermits(store.pool, () => instance, config.limits, config.catalog, notifications),
  );
  let n = 0;
  let stop = false;
  const loop = async (g: Gate, i: number) => {
    for (let k = 0; !stop; k++) {
      const r = ask(`a${i}-${k}`, tools[i % tools.length] as string, disjoint ? `acme${i}` : 'acme');
      const [a] = await g.acquire([r]);
      if (!a?.granted) throw new Error(`${design}: refused`);
      await g.release([r]);
      n++;
    }
  };
  // Warm-up, then the measured window.
  const started = gates.map((g, i) => loop(g, i));
  await new Promise((r) => setTimeout(r, 500));
  const from = n;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const rate = ((n - from) * 1000) / (performance.now() - t0);
  stop = true;
  await Promise.all(started);
  for (const g of gates) (g as { close?: () => void }).close?.();
  return rate;
}

const rows: string[] = [];
for (const held of [10, 2000]) {
  await holdPermits(held);
  for (const [askers, disjoint] of [
    [1, false],
    [4, false],
    [4, true],
  ] as const) {
    const old = await measure('old', askers, disjoint);
    const now = await measure('new', askers, disjoint);
    const who = askers === 1 ? '1' : `${askers}, ${disjoint ? 'a tenant each' : 'one tenant'}`;
    rows.push(`| ${held} | ${who} | ${old.toFixed(0)} | ${now.toFixed(0)} | ${(now / old).toFixed(2)}× |`);
  }
}
console.log(`Permit asks per second (ask + give-back of one call), ${seconds} s each, one process, one PostgreSQL:\n`);
console.log('| permits held | askers | before (one lock, read all) | now (counters per key) | ratio |');
console.log('|---|---|---|---|---|');
for (const r of rows) console.log(r);

await lease.stop(true);
await notifications.close();
await store.close();
await pgc.stop();
