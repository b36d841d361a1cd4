/**
 * Cluster-wide permits without a cluster-wide lock (DESIGN §12 "It scales"), on a throwaway PostgreSQL:
 * - an ask for one key completes while another transaction holds the row of another key, and an ask
 *   for the held key waits for it (so the first check can fail);
 * - a granted ask reads no permit row, and touches the same rows with 10 or 2,000 permits held
 *   (PostgreSQL's own per-table tuple counters, flushed on the asking connection);
 * - a writer refused on one gate (replica) is not passed by a reader that another gate asks for later;
 * - the permits of an instance whose lease ended are freed exactly once, though three free them at once;
 *   rows that count nothing are swept.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Lease } from '../../src/cluster/lease.js';
import { leaseSql } from '../../src/store/postgres/lease.js';
import { Notifications } from '../../src/cluster/notifications.js';
import { ClusterPermits } from '../../src/cluster/permits.js';
import { parseConfig } from '../../src/config/load.js';
import type { PermitRequest } from '../../src/core/scheduler.js';
import type { PostgresStore } from '../../src/store/postgres.js';
import { sweepIdle } from '../../src/store/postgres/permits-free.js';
import { openStore } from '../../src/store/select.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

const YAML = `
tools:
  - name: a
    executor: { kind: builtin, name: echo }
  - name: b
    executor: { kind: builtin, name: echo }
limits:
  tool: { a: 100, b: 100 }
  tenant: { bulk: 2000, dead: 10 }
`;

const ask = (runId: string, o: Partial<PermitRequest> = {}): PermitRequest => ({
  runId,
  callId: 'c',
  tenant: 'x',
  tool: 'a',
  domain: null,
  reads: [],
  writes: [],
  ...o,
});

describe('cluster permits on PostgreSQL', () => {
  let pgc: TestPostgres;
  let url: string;
  let store: PostgresStore;
  let lease: Lease;
  let notifications: Notifications;
  let permits: ClusterPermits;
  /** One connection: the one whose tuple counters are read. */
  let solo: pg.Pool;
  let soloPermits: ClusterPermits;
  const config = parseConfig(YAML, 'test');

  beforeAll(async () => {
    pgc = await startPostgres();
    url = await pgc.createDatabase();
    store = (await openStore({ kind: 'postgres', url, from: 'test' }, { poolSize: 4 })) as PostgresStore;
    lease = new Lease(leaseSql(store.pool), 'permits', 60_000, { lost: () => {} });
    await lease.join();
    notifications = new Notifications(url);
    await notifications.start();
    permits = new ClusterPermits(store.pool, () => lease.instance, config.limits, config.catalog, notifications);
    solo = new pg.Pool({ connectionString: url, max: 1 });
    soloPermits = new ClusterPermits(solo, () => lease.instance, config.limits, config.catalog, notifications);
  }, 60_000);

  afterAll(async () => {
    permits?.close();
    soloPermits?.close();
    await solo?.end();
    await lease?.stop(true);
    await notifications?.close();
    await store?.close();
    await pgc?.stop();
  });

  it('an ask for one key does not wait for a transaction that holds another key; one for the held key does', async () => {
    // Both counter rows exist (an ask made them), then another connection holds tool a's.
    await permits.acquire([ask('warm-a'), ask('warm-b', { tool: 'b' })]);
    permits.release([
      { runId: 'warm-a', callId: 'c' },
      { runId: 'warm-b', callId: 'c' },
    ]);
    const holder = await store.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT * FROM permit_counts WHERE key = 'tool:a' FOR UPDATE`);
      expect(await permits.acquire([ask('b1', { tool: 'b' })])).toEqual([{ granted: true }]);
      // The ask for tool a waits on the held row (PostgreSQL says so), and goes on once it is let go.
      const blocked = permits.acquire([ask('a1')]);
      await until('the ask for the held key to wait on its row lock', async () => {
        const r = await store.pool.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%permit_counts%'`,
        );
        return r.rows[0].n > 0 ? true : undefined;
      });
      await holder.query('COMMIT');
      expect(await blocked).toEqual([{ granted: true }]);
    } finally {
      holder.release();
    }
    permits.release([
      { runId: 'b1', callId: 'c' },
      { runId: 'a1', callId: 'c' },
    ]);
  });

  /** Rows read and written on every table by `fn`, as PostgreSQL counts them for the one connection of `solo`. */
  async function touched(fn: () => Promise<unknown>): Promise<{ permitsRead: number; all: number }> {
    const read = async () => {
      await solo.query('SELECT pg_stat_force_next_flush()');
      const r = await store.pool.query(
        `SELECT pg_stat_clear_snapshot(), relname, coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS reads,
           n_tup_ins + n_tup_upd + n_tup_del AS writes FROM pg_stat_user_tables`,
      );
      return new Map(r.rows.map((row) => [row.relname as string, { reads: Number(row.reads), writes: Number(row.writes) }]));
    };
    const before = await read();
    await fn();
    const after = await read();
    let all = 0;
    for (const [name, a] of after) {
      const b = before.get(name) ?? { reads: 0, writes: 0 };
      all += a.reads - b.reads + (a.writes - b.writes);
    }
    const p = (m: typeof before) => m.get('permits')?.reads ?? 0;
    return { permitsRead: p(after) - p(before), all };
  }

  it('a granted ask reads no permit, and touches as many rows with 2,000 permits held as with 10', async () => {
    const hold = async (n: number, from: number) => {
      const batch = Array.from({ length: n }, (_, i) => ask(`bulk-${from + i}`, { tenant: 'bulk', tool: 'b' }));
      // Each under a tool of its own (tool b has room for 100 only); tenant bulk is full at 2,000.
      const answers = await soloPermits.acquire(batch.map((r) => ({ ...r, tool: `t${r.runId}` })));
      expect(answers.every((a) => a.granted)).toBe(true);
    };
    const measure = async (i: number) => {
      let answer: unknown;
      const t = await touched(async () => {
        [answer] = await soloPermits.acquire([ask(`probe-${i}`, { tenant: 'probe' })]);
      });
      expect(answer).toEqual({ granted: true });
      soloPermits.release([{ runId: `probe-${i}`, callId: 'c' }]);
      // The give-back waits a few turns for asks to hand its place to (cluster/permits.ts): it is done
      // before the next measure, so that only the ask is measured.
      await until('the probe to be given back', async () =>
        (await store.pool.query(`SELECT 1 FROM permits WHERE run_id = $1`, [`probe-${i}`])).rowCount === 0 ? true : undefined,
      );
      return t;
    };
    await hold(10, 0);
    await measure(0);
    const few = await measure(1);
    await hold(1990, 10);
    const many = await measure(2);
    expect((await store.pool.query(`SELECT count(*)::int AS n FROM permits`)).rows[0].n).toBeGreaterThanOrEqual(2000);
    expect(few.permitsRead).toBe(0);
    expect(many.permitsRead).toBe(0);
    expect(many.all).toBe(few.all);
    // The instrument sees reads: a refused ask reads its holders (the refusal path).
    const full = await touched(() => soloPermits.acquire([ask('over', { tenant: 'bulk', tool: 'tbulk-0' })]));
    expect(full.permitsRead).toBeGreaterThan(0);
  });

  it('a writer that waits on one replica is not passed by readers that another replica asks for; it starts once the reader ends', async () => {
    await store.pool.query(
      `INSERT INTO replicas (instance, name, started_at, lease_until, renewed_at) VALUES ('other/1', 'other', 0, toolgraph_now() + 60000, 0)`,
    );
    const other = new ClusterPermits(store.pool, () => 'other/1', config.limits, config.catalog, notifications);
    const domain = 'tenant:fifo';
    const read = (runId: string, path = '/repo') => ask(runId, { tenant: 'fifo', domain, reads: [`file:${path}`] });
    const write = ask('w', { tenant: 'fifo', domain, writes: ['file:/repo/src'] });
    try {
      expect(await permits.acquire([read('r1')])).toEqual([{ granted: true }]);
      const [refused] = await other.acquire([write]);
      expect(refused).toMatchObject({ granted: false, waitingFor: [{ kind: 'lock', key: 'file:/repo' }] });
      // A read that would share with r1's waits behind the writer, which asked first, on the other replica.
      const [behind] = await permits.acquire([read('r2', '/repo/src/a.ts')]);
      expect(behind).toEqual({
        granted: false,
        waitingFor: [
          {
            kind: 'lock',
            key: 'file:/repo/src',
            domain,
            holders: [],
            queuedBehind: [{ runId: 'w', callId: 'c', tenant: 'fifo', since: expect.any(Number) }],
          },
        ],
      });
      permits.release([{ runId: 'r1', callId: 'c' }]);
      expect(await permits.acquire([read('r3', '/elsewhere')])).toEqual([{ granted: true }]);
      expect(await other.acquire([write])).toEqual([{ granted: true }]);
      // Then the reader waits for the running write, not for a mark.
      const [after] = await permits.acquire([read('r2', '/repo/src/a.ts')]);
      expect(after).toMatchObject({ granted: false, waitingFor: [{ kind: 'lock', holders: [{ runId: 'w' }] }] });
      other.release([write]);
      permits.release([{ runId: 'r3', callId: 'c' }]);
      // The other replica's give-back goes through its own queue: the read asks once it is in.
      await until(
        'the write given back',
        async () => (await store.pool.query(`SELECT 1 FROM permits WHERE run_id = 'w'`)).rowCount === 0 || undefined,
        5000,
      );
      expect(await permits.acquire([read('r2', '/repo/src/a.ts')])).toEqual([{ granted: true }]);
      permits.release([{ runId: 'r2', callId: 'c' }]);
    } finally {
      other.close();
    }
  });

  it('the permits of an instance whose lease ended are freed once, though three free them at the same time', async () => {
    await store.pool.query(
      `INSERT INTO replicas (instance, name, started_at, lease_until, renewed_at) VALUES ('dead/1', 'dead', 0, toolgraph_now() + 60000, 0)`,
    );
    const dead = new ClusterPermits(store.pool, () => 'dead/1', config.limits, config.catalog, notifications);
    try {
      const held = ['d1', 'd2', 'd3'].map((r) => ask(r, { tenant: 'dead', domain: 'global', writes: [`file:/${r}`] }));
      expect(await dead.acquire(held)).toEqual(held.map(() => ({ granted: true })));
      // A live instance holds one more of the same tenant.
      expect(await permits.acquire([ask('live', { tenant: 'dead' })])).toEqual([{ granted: true }]);
      const count = async () => (await store.pool.query(`SELECT in_use FROM permit_counts WHERE key = 'tenant:dead'`)).rows[0].in_use;
      expect(await count()).toBe(4);
      await store.pool.query(`UPDATE replicas SET lease_until = toolgraph_now() - 1 WHERE instance = 'dead/1'`);
      const freed = await Promise.all([permits.freeDead(), permits.freeDead(), permits.freeDead()]);
      expect(freed.flat().filter((i) => i === 'dead/1')).toEqual(['dead/1']);
      expect(await count()).toBe(1);
      const locks = await store.pool.query(`SELECT sum(r + w + ir + iw)::int AS n FROM permit_locks WHERE domain = 'global'`);
      expect(locks.rows[0].n).toBe(0);
      expect((await store.pool.query(`SELECT count(*)::int AS n FROM permits WHERE instance = 'dead/1'`)).rows[0].n).toBe(0);
      // Nothing more to free; its own late give-back finds nothing either.
      expect(await permits.freeDead()).toEqual([]);
      await dead.releaseAll('dead/1');
      expect(await count()).toBe(1);
      // Rows that count nothing are swept (an ask makes them again), and the freed locks are free:
      // another run writes what the dead instance wrote.
      expect(await sweepIdle(store.pool)).toBeGreaterThan(0);
      expect((await store.pool.query(`SELECT count(*)::int AS n FROM permit_locks WHERE domain = 'global'`)).rows[0].n).toBe(0);
      expect(await permits.acquire([ask('after', { domain: 'global', writes: ['file:/d1'] })])).toEqual([{ granted: true }]);
      permits.release([
        { runId: 'live', callId: 'c' },
        { runId: 'after', callId: 'c' },
      ]);
    } finally {
      dead.close();
    }
  });
});
