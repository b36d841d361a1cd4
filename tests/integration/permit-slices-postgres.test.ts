/**
 * Slices of counted limits (DESIGN §12 "It scales"; cluster/permit-slices.ts) on a throwaway
 * PostgreSQL, with two gates as two replicas:
 * - a replica that holds a slice grants from it with no round trip, the counter counting the slice;
 * - a replica alone on a limit it keeps full holds all of it, and its calls wait for its own places
 *   without asking the database;
 * - under uneven load the limit is still reached: the busy replica gets the places the idle one held,
 *   once it waits for them, and the two together never pass the limit;
 * - two replicas that both wait for a reached limit keep an even share each, granted with no round trip;
 * - the slices of an instance go with it (all of its permits given back, as when its lease ends).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Notifications } from '../../src/cluster/notifications.js';
import { ClusterPermits } from '../../src/cluster/permits.js';
import { parseConfig } from '../../src/config/load.js';
import type { PermitRequest } from '../../src/core/scheduler.js';
import type { PostgresStore } from '../../src/store/postgres.js';
import { openStore } from '../../src/store/select.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

const YAML = `
tools:
  - name: a
    executor: { kind: builtin, name: echo }
limits:
  tenant: { solo: 16, shared: 4, gone: 16, full: 2, pair: 4 }
`;

const ask = (runId: string, tenant: string): PermitRequest => ({
  runId,
  callId: 'c',
  tenant,
  tool: 'a',
  domain: null,
  reads: [],
  writes: [],
});

describe('slices of counted limits on PostgreSQL', () => {
  let pgc: TestPostgres;
  let store: PostgresStore;
  let notifications: Notifications;
  const config = parseConfig(YAML, 'test');
  const gates: ClusterPermits[] = [];
  const stats = new Map<string, { asked: number; sliced: number }>();

  const gate = async (instance: string) => {
    await store.pool.query(
      `INSERT INTO replicas (instance, name, started_at, lease_until, renewed_at) VALUES ($1, $1, 0, toolgraph_now() + 600000, 0)`,
      [instance],
    );
    const s = { asked: 0, sliced: 0 };
    stats.set(instance, s);
    const g = new ClusterPermits(store.pool, () => instance, config.limits, config.catalog, notifications, {
      retryMs: 200,
      stats: { asked: (_ms, granted, refused) => (s.asked += granted + refused), sliced: (n) => (s.sliced += n) },
      slices: { holds: () => true },
    });
    gates.push(g);
    return g;
  };
  const inUse = async (key: string) =>
    (await store.pool.query<{ in_use: number }>(`SELECT in_use FROM permit_counts WHERE key = $1`, [key])).rows[0]?.in_use ?? 0;
  const listed = async (tenant: string) =>
    (await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM permits WHERE tenant = $1`, [tenant])).rows[0]?.n ?? 0;
  const sliceOf = async (instance: string, key: string) =>
    (await store.pool.query<{ n: number }>(`SELECT n FROM permit_slices WHERE instance = $1 AND key = $2`, [instance, key])).rows[0]?.n ??
    0;

  beforeAll(async () => {
    pgc = await startPostgres();
    store = (await openStore({ kind: 'postgres', url: await pgc.createDatabase(), from: 'test' }, { poolSize: 4 })) as PostgresStore;
    notifications = new Notifications(store.url);
    await notifications.start();
  }, 60_000);

  afterAll(async () => {
    for (const g of gates) g.close();
    await notifications?.close();
    await store?.close();
    await pgc?.stop();
  });

  it('a replica that holds a slice grants from it with no round trip, and the counter counts the slice', async () => {
    const g = await gate('solo/1');
    const s = stats.get('solo/1') as { asked: number; sliced: number };
    // The first call asks the database, and the ask takes two more places (an eighth of 16) into a
    // slice, and the call's own place: it holds it as the slice's.
    expect(await g.acquire([ask('r1', 'solo')])).toEqual([{ granted: true }]);
    expect(s).toEqual({ asked: 1, sliced: 0 });
    expect(await sliceOf('solo/1', 'tenant:solo')).toBe(3);
    expect(await inUse('tenant:solo')).toBe(3);
    // The next two come from the slice: no ask.
    expect(await g.acquire([ask('r2', 'solo'), ask('r3', 'solo')])).toEqual([{ granted: true }, { granted: true }]);
    expect(s).toEqual({ asked: 1, sliced: 2 });
    expect(await inUse('tenant:solo')).toBe(3);
    // They are listed shortly (holders of the limit), as rows that count nothing.
    await until('three rows', async () => (await listed('solo')) === 3 || undefined, 5000);
    // Given back to the slice, granted from it again.
    g.release([{ runId: 'r2', callId: 'c' }]);
    expect(await g.acquire([ask('r4', 'solo')])).toEqual([{ granted: true }]);
    expect(s).toEqual({ asked: 1, sliced: 3 });
    for (const r of ['r1', 'r3', 'r4']) g.release([{ runId: r, callId: 'c' }]);
    await until('no rows', async () => (await listed('solo')) === 0 || undefined, 5000);
  });

  it('a replica alone on a limit it keeps full holds all of it: its calls wait for its own places, with no round trip', async () => {
    const g = await gate('full/1');
    const s = stats.get('full/1') as { asked: number; sliced: number };
    const key = 'tenant:full';
    let freed = 0;
    g.onFreed(() => freed++);
    // Limit 2: the first ask takes one place into the slice and the call's own: the whole limit.
    expect(await g.acquire([ask('f1', 'full')])).toEqual([{ granted: true }]);
    expect(await g.acquire([ask('f2', 'full')])).toEqual([{ granted: true }]);
    expect(s).toEqual({ asked: 1, sliced: 1 });
    expect(await sliceOf('full/1', key)).toBe(2);
    expect(await inUse(key)).toBe(2);
    // A third waits here, told why (the limit, its use, the slice's calls as holders), with no ask.
    const [waits] = await g.acquire([ask('f3', 'full')]);
    expect(waits).toMatchObject({
      granted: false,
      waitingFor: [{ kind: 'tenant', key: 'full', limit: 2, inUse: 2, holders: [{ runId: 'f1' }, { runId: 'f2' }] }],
    });
    expect(s.asked).toBe(1);
    // One ends: the engine is told to ask again, and the place comes from the slice, still with no ask.
    g.release([{ runId: 'f1', callId: 'c' }]);
    await until('told', async () => freed > 0 || undefined, 5000);
    expect(await g.acquire([ask('f3', 'full')])).toEqual([{ granted: true }]);
    expect(s).toEqual({ asked: 1, sliced: 2 });
    expect(await inUse(key)).toBe(2);
    for (const r of ['f2', 'f3']) g.release([{ runId: r, callId: 'c' }]);
  });

  it('under uneven load the limit is reached: the busy replica gets the places the idle one held, and both never pass it', async () => {
    const idle = await gate('idle/1');
    const busy = await gate('busy/1');
    const key = 'tenant:shared';
    // The idle replica takes a slice (limit 4: one place per ask), then its calls end: it holds free places.
    for (const r of ['i1', 'i2', 'i3']) expect(await idle.acquire([ask(r, 'shared')])).toEqual([{ granted: true }]);
    for (const r of ['i1', 'i2', 'i3']) idle.release([{ runId: r, callId: 'c' }]);
    expect(await sliceOf('idle/1', key)).toBeGreaterThan(0);
    expect(await inUse(key)).toBeGreaterThan(0);
    // The busy replica wants more than is left: it is refused at first, says it waits, and the idle
    // replica gives back its free places; the busy one then reaches the limit, and never passes it.
    const running = new Set<string>();
    let most = 0;
    const take = async (runId: string) => {
      for (;;) {
        const [a] = await busy.acquire([ask(runId, 'shared')]);
        if (a?.granted) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      running.add(runId);
      most = Math.max(most, running.size, await inUse(key));
    };
    await Promise.all(['b1', 'b2', 'b3', 'b4'].map((r) => take(r)));
    expect(running.size).toBe(4);
    expect(await inUse(key)).toBe(4);
    expect(await sliceOf('idle/1', key)).toBe(0);
    // A fifth waits until one of the four ends; the idle replica gets nothing meanwhile.
    const fifth = take('b5');
    const [refused] = await idle.acquire([ask('i4', 'shared')]);
    expect(refused).toMatchObject({ granted: false, waitingFor: [{ kind: 'tenant', key: 'shared', limit: 4 }] });
    busy.release([{ runId: 'b1', callId: 'c' }]);
    running.delete('b1');
    await fifth;
    expect(most).toBe(4);
    expect(await inUse(key)).toBeLessThanOrEqual(4);
    for (const r of ['b2', 'b3', 'b4', 'b5']) busy.release([{ runId: r, callId: 'c' }]);
    await until('the limit held', async () => ((await inUse(key)) <= 4 && (await sliceOf('busy/1', key)) <= 4) || undefined, 5000);
  });

  it('two replicas that both wait for a reached limit share it evenly, each granting its share with no round trip; never past the limit', async () => {
    const a = await gate('pair-a/1');
    const b = await gate('pair-b/1');
    const key = 'tenant:pair';
    const sa = stats.get('pair-a/1') as { asked: number; sliced: number };
    const sb = stats.get('pair-b/1') as { asked: number; sliced: number };
    // Replica a, alone, ends up holding the whole limit (4) as its slice.
    for (const r of ['a1', 'a2', 'a3', 'a4']) expect(await a.acquire([ask(r, 'pair')])).toEqual([{ granted: true }]);
    expect(await sliceOf('pair-a/1', key)).toBe(4);
    // Replica b waits for the key too: refused, it says so, and a keeps its share (2) as its calls end.
    const running = new Map<string, ClusterPermits>([
      ['a1', a],
      ['a2', a],
      ['a3', a],
      ['a4', a],
    ]);
    let most = 0;
    const take = async (g: ClusterPermits, runId: string) => {
      for (;;) {
        const [x] = await g.acquire([ask(runId, 'pair')]);
        if (x?.granted) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      running.set(runId, g);
      most = Math.max(most, running.size, await inUse(key));
    };
    const end = (runId: string) => {
      running.get(runId)?.release([{ runId, callId: 'c' }]);
      running.delete(runId);
    };
    const bWaits = take(b, 'b1');
    await until('a told', async () => ((await sliceOf('pair-a/1', key)) === 4 && sb.asked > 0) || undefined, 5000);
    await new Promise((r) => setTimeout(r, 100));
    for (const r of ['a1', 'a2']) end(r);
    await bWaits;
    await take(b, 'b2');
    await until('a at its share', async () => (await sliceOf('pair-a/1', key)) === 2 || undefined, 5000);
    // Each now grants within its share from its slice: no ask, and the limit is never passed.
    const asked = { a: sa.asked, b: sb.asked };
    for (let i = 0; i < 20; i++) {
      end(`a${i + 3}`);
      await take(a, `a${i + 5}`);
      end(`b${i + 1}`);
      await take(b, `b${i + 3}`);
    }
    expect(most).toBe(4);
    expect(await inUse(key)).toBe(4);
    expect(await sliceOf('pair-a/1', key)).toBe(2);
    expect(sa.asked - asked.a).toBeLessThanOrEqual(2);
    for (const r of [...running.keys()]) end(r);
  });

  it('the slices of an instance go with it: all of its permits given back', async () => {
    const g = await gate('gone/1');
    for (const r of ['g1', 'g2', 'g3']) expect(await g.acquire([ask(r, 'gone')])).toEqual([{ granted: true }]);
    expect(await sliceOf('gone/1', 'tenant:gone')).toBe(3);
    expect(await inUse('tenant:gone')).toBe(3);
    await g.releaseAll('gone/1');
    expect(await inUse('tenant:gone')).toBe(0);
    expect(await sliceOf('gone/1', 'tenant:gone')).toBe(0);
    // Nothing is granted from a slice it no longer holds: the next call asks the database.
    const s = stats.get('gone/1') as { asked: number; sliced: number };
    const asked = s.asked;
    expect(await g.acquire([ask('g4', 'gone')])).toEqual([{ granted: true }]);
    expect(s.asked).toBe(asked + 1);
  });
});
