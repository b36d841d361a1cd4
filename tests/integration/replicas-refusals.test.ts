/**
 * What the cluster says when it refuses a permit (DESIGN §7 `waitingFor`, §12), asked directly of
 * `ClusterPermits` on a throwaway PostgreSQL, under a lease of its own: a tool, tenant or resource
 * limit names its key, capacity, use and the calls that hold it (granted earlier in the same ask, or
 * held by then); a lock names its holder, or the earlier ask it queues behind when nothing holds it. An
 * instance whose lease ended gets no permit, though it asks.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterPermits } from '../../src/cluster/permits.js';
import { Lease } from '../../src/cluster/lease.js';
import { leaseSql } from '../../src/store/postgres/lease.js';
import { Notifications } from '../../src/cluster/notifications.js';
import { parseConfig } from '../../src/config/load.js';
import type { PermitRequest } from '../../src/core/scheduler.js';
import { openStore } from '../../src/store/select.js';
import type { PostgresStore } from '../../src/store/postgres.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

const YAML = `
tools:
  - name: t
    executor: { kind: builtin, name: echo }
limits:
  tool: { t: 1 }
  tenant: { small: 1 }
  resource: { "svc:*": 1 }
`;

const ask = (runId: string, o: Partial<PermitRequest> = {}): PermitRequest => ({
  runId,
  callId: 'c',
  tenant: 'x',
  tool: 'other',
  domain: null,
  reads: [],
  writes: [],
  ...o,
});
const holder = (runId: string, tenant = 'x') => ({ runId, callId: 'c', tenant, since: expect.any(Number) });

describe('refusals of cluster-wide permits', () => {
  let pg: TestPostgres;
  let store: PostgresStore;
  let lease: Lease;
  let notifications: Notifications;
  let permits: ClusterPermits;

  beforeAll(async () => {
    pg = await startPostgres();
    const db = await pg.createDatabase();
    store = (await openStore({ kind: 'postgres', url: db, from: 'test' }, { poolSize: 2 })) as PostgresStore;
    const config = parseConfig(YAML, 'test');
    lease = new Lease(leaseSql(store.pool), 'refusals', 10_000, { lost: () => {} });
    await lease.join();
    notifications = new Notifications(db);
    await notifications.start();
    permits = new ClusterPermits(store.pool, () => lease.instance, config.limits, config.catalog, notifications);
  }, 60_000);

  afterAll(async () => {
    permits?.close();
    await lease?.stop(true);
    await notifications?.close();
    await store?.close();
    await pg?.stop();
  });

  it('a tool limit names the call granted before it in the same ask; the calls it refuses share that reason', async () => {
    const answers = await permits.acquire([ask('r1', { tool: 't' }), ask('r2', { tool: 't' }), ask('r3', { tool: 't', tenant: 'y' })]);
    const reason = { kind: 'tool', key: 't', limit: 1, inUse: 1, holders: [holder('r1')] };
    expect(answers).toEqual([{ granted: true }, { granted: false, waitingFor: [reason] }, { granted: false, waitingFor: [reason] }]);
    // Asked again later, it names the same holder, held since it was granted.
    const [again] = await permits.acquire([ask('r2', { tool: 't' })]);
    expect(again).toEqual({ granted: false, waitingFor: [reason] });
    const first = answers[1] as { waitingFor: { holders: { since: number }[] }[] };
    const later = again as { waitingFor: { holders: { since: number }[] }[] };
    expect(later.waitingFor[0]?.holders[0]?.since).toBe(first.waitingFor[0]?.holders[0]?.since);
    permits.release([{ runId: 'r1', callId: 'c' }]);
    expect(await permits.acquire([ask('r2', { tool: 't' })])).toEqual([{ granted: true }]);
    permits.release([{ runId: 'r2', callId: 'c' }]);
  });

  it('a tenant limit and a resource limit name their key, capacity, use and holders', async () => {
    const answers = await permits.acquire([
      ask('s1', { tenant: 'small' }),
      ask('s2', { tenant: 'small' }),
      ask('v1', { writes: ['svc:db'] }),
      ask('v2', { writes: ['svc:cache'] }),
    ]);
    expect(answers).toEqual([
      { granted: true },
      { granted: false, waitingFor: [{ kind: 'tenant', key: 'small', limit: 1, inUse: 1, holders: [holder('s1', 'small')] }] },
      { granted: true },
      { granted: false, waitingFor: [{ kind: 'resource', key: 'svc:*', limit: 1, inUse: 1, holders: [holder('v1')] }] },
    ]);
    permits.release(['s1', 'v1'].map((runId) => ({ runId, callId: 'c' })));
  });

  it('a lock names the call that holds what it conflicts with, else the earlier ask it queues behind', async () => {
    const domain = 'tenant:x';
    const answers = await permits.acquire([
      ask('w1', { domain, writes: ['file:/a'] }),
      ask('w2', { domain, writes: ['file:/a'] }),
      ask('rd', { domain, reads: ['file:*'] }),
      ask('w3', { domain, writes: ['file:/b'] }),
      // Another tenant's lock domain: nothing to wait for.
      ask('y1', { tenant: 'y', domain: 'tenant:y', writes: ['file:/a'] }),
    ]);
    expect(answers).toEqual([
      { granted: true },
      { granted: false, waitingFor: [{ kind: 'lock', key: 'file:/a', domain, holders: [holder('w1')] }] },
      { granted: false, waitingFor: [{ kind: 'lock', key: 'file:/a', domain, holders: [holder('w1')] }] },
      // Nothing holds file:/b, but the read of file:* asked first: first come, first served.
      { granted: false, waitingFor: [{ kind: 'lock', key: 'file:*', domain, holders: [], queuedBehind: [holder('rd')] }] },
      { granted: true },
    ]);
    permits.release(['w1', 'y1'].map((runId) => ({ runId, callId: 'c' })));
  });
  it('an instance whose lease ended, and that does not know it yet, gets no permit; one whose lease holds does', async () => {
    const config = parseConfig(YAML, 'test');
    const gate = (instance: string) => new ClusterPermits(store.pool, () => instance, config.limits, config.catalog, notifications);
    await store.pool.query(
      `INSERT INTO replicas (instance, name, started_at, lease_until, renewed_at)
       VALUES ('gone/1', 'gone', 0, toolgraph_now() - 1000, 0), ('alive/1', 'alive', 0, toolgraph_now() + 60000, 0)`,
    );
    const gone = gate('gone/1');
    const alive = gate('alive/1');
    try {
      expect(await gone.acquire([ask('g1')])).toEqual([{ granted: false }]);
      expect((await store.pool.query(`SELECT count(*)::int AS n FROM permits WHERE instance = 'gone/1'`)).rows[0].n).toBe(0);
      expect(await alive.acquire([ask('a1')])).toEqual([{ granted: true }]);
      alive.release([{ runId: 'a1', callId: 'c' }]);
    } finally {
      gone.close();
      alive.close();
      await store.pool.query(`DELETE FROM replicas WHERE instance IN ('gone/1', 'alive/1')`);
    }
  });
});
