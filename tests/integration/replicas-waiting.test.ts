/**
 * Why a call waits with several replicas (DESIGN §7 `waitingFor`, `GET /v1/limits`; §12), with real
 * runs: two replicas in this process on one throwaway PostgreSQL, http tools on a real tool server that
 * hold their requests until the test answers them. A call that its own replica's limits let start but
 * the cluster refused names what refused it (the tool limit or lock, its key, capacity and use, and the
 * holder: a run of the other replica), seen so through either replica, and the wait is gone once it
 * starts. `GET /v1/limits` on either replica is cluster-wide: the holder from the permits, the waiter
 * from the replica where it waits. An agent sees another tenant's holder only as a count.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { expectApiError, sse, startApi, type Api } from '../helpers/server.js';
import { ToolServer } from '../helpers/toolserver.js';
import type { PostgresStore } from '../../src/store/postgres.js';
import { until } from '../helpers/wait.js';
import { ACME, callOf, GLOBEX, ISO, OPS, submitAs, waitingYaml } from '../helpers/waiting.js';

const yaml = (ts: ToolServer) => waitingYaml(ts, '', 'store:\n  leaseMs: 3000\n');

describe('waitingFor and GET /v1/limits across two replicas on PostgreSQL', () => {
  let pg: TestPostgres;
  let ts: ToolServer;
  let a: Api;
  let b: Api;

  beforeAll(async () => {
    pg = await startPostgres();
    const db = await pg.createDatabase();
    ts = await ToolServer.start();
    a = await startApi({ yaml: yaml(ts), db, replica: 'ra' });
    b = await startApi({ yaml: yaml(ts), db, replica: 'rb' });
  }, 60_000);

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await ts?.close();
    await pg?.stop();
  });

  const limitsOn = async (api: Api) => (await api.get('/v1/limits', { token: OPS })).body.items as any[];
  const eventsOf = async (api: Api, runId: string) =>
    (await sse(`${api.url}/v1/runs/${runId}/events`, { authorization: `Bearer ${OPS}` }).then((s) => s.ended)).map((e) => e.event);

  it('a tool-limit wait names the holder on the other replica, with limit and inUse, through either replica; an agent of another tenant sees a count', async () => {
    ts.on('/deploy', () => 'hold');
    const first = await submitAs(a, ACME, [{ id: 'd', tool: 'deploy', args: {} }]);
    const held = await ts.call('d', first.id);
    const second = await submitAs(b, GLOBEX, [{ id: 'd', tool: 'deploy', args: {} }]);

    const holder = { runId: first.id, callId: 'd', tenant: 'acme', since: expect.stringMatching(ISO) };
    const reason = { kind: 'tool', key: 'deploy', limit: 1, inUse: 1, holders: [holder] };
    await until('the refused call names its wait', async () => ((await callOf(b, second.id, 'd')).waitingFor ? true : undefined));
    for (const api of [a, b]) {
      const waiting = await callOf(api, second.id, 'd');
      expect(waiting.status).toBe('ready');
      expect(waiting.waitingFor).toEqual([reason]);
    }
    // The holder's `since` is when the cluster granted its permit: no later than it started.
    const since = Date.parse((await callOf(b, second.id, 'd')).waitingFor[0].holders[0].since);
    expect(since).toBeLessThanOrEqual(Date.parse((await callOf(a, first.id, 'd')).startedAt) + 1000);

    // The agent of the waiting run's tenant: the holder counted, never named.
    for (const api of [a, b]) {
      const theirs = await api.get(`/v1/runs/${second.id}`, { token: GLOBEX });
      expect(theirs.body.calls[0].waitingFor).toEqual([{ kind: 'tool', key: 'deploy', limit: 1, inUse: 1, holders: [], otherHolders: 1 }]);
      expect(theirs.text).not.toContain(first.id);
    }
    const stream = await sse(`${b.url}/v1/runs/${second.id}/events`, { authorization: `Bearer ${GLOBEX}` });
    const ev = await stream.next((e) => e.event === 'call.waiting');
    stream.close();
    expect(ev.data.data.waitingFor).toEqual([{ kind: 'tool', key: 'deploy', limit: 1, inUse: 1, holders: [], otherHolders: 1 }]);
    expect(JSON.stringify(stream.events)).not.toContain(first.id);

    // Every replica's view of the limits: the holder from A, the waiter from B.
    const item = { kind: 'tool', key: 'deploy', limit: 1, inUse: 1, waiting: 1, longestWaitMs: expect.any(Number), holders: [holder] };
    for (const api of [a, b]) {
      const items = await until('the cluster-wide limits to count the waiter', async () => {
        const got = (await limitsOn(api)).filter((l) => l.kind === 'tool');
        return got.length === 1 && got[0].waiting === 1 ? got : undefined;
      });
      expect(items).toEqual([item]);
      expect(items[0].longestWaitMs).toBeGreaterThanOrEqual(0);
      expectApiError(await api.get('/v1/limits', { token: GLOBEX }), 403, 'forbidden');
    }

    // Never both at once: B's call starts only once A's has ended, and then waits for nothing.
    held.respond({ status: 200, body: {} });
    const next = await ts.call('d', second.id);
    expect(ts.held().filter((r) => r.path === '/deploy')).toEqual([next]);
    expect((await a.settled(first.id, OPS)).status).toBe('succeeded');
    const running = await callOf(a, second.id, 'd');
    expect(running.status).toBe('running');
    expect(running).not.toHaveProperty('waitingFor');
    next.respond({ status: 200, body: {} });
    const done = await b.settled(second.id, OPS);
    expect(done.status).toBe('succeeded');
    expect(done.calls[0]).not.toHaveProperty('waitingFor');
    expect(await eventsOf(a, second.id)).toEqual([
      'run.created',
      'run.started',
      'call.ready',
      'call.waiting',
      'call.started',
      'call.succeeded',
      'run.completed',
    ]);
    for (const api of [a, b]) {
      const left = await until('the limits to be free', async () => {
        const got = (await limitsOn(api)).filter((l) => l.kind === 'tool');
        return got.length === 0 ? got : undefined;
      });
      expect(left).toEqual([]);
    }
  });

  it('a lock wait (a tenant-scoped write of what a run on the other replica reads) names the lock and its holder', async () => {
    ts.on('/tests', () => 'hold');
    ts.on('/write', () => 'hold');
    const reader = await submitAs(a, ACME, [{ id: 'tests', tool: 'run_tests', args: {} }]);
    const held = await ts.call('tests', reader.id);
    const writer = await submitAs(b, ACME, [{ id: 'write', tool: 'write_file', args: { path: '/repo/a.ts' } }]);

    const holder = { runId: reader.id, callId: 'tests', tenant: 'acme', since: expect.stringMatching(ISO) };
    await until('the refused write names its wait', async () => ((await callOf(b, writer.id, 'write')).waitingFor ? true : undefined));
    for (const api of [a, b]) {
      for (const token of [OPS, ACME]) {
        const waiting = await callOf(api, writer.id, 'write', token);
        expect(waiting.status).toBe('ready');
        expect(waiting.waitingFor).toEqual([{ kind: 'lock', key: 'file:*', domain: 'tenant:acme', holders: [holder] }]);
      }
    }
    const item = {
      kind: 'lock',
      key: 'file:*',
      domain: 'tenant:acme',
      inUse: 1,
      waiting: 1,
      longestWaitMs: expect.any(Number),
      holders: [holder],
    };
    for (const api of [a, b]) {
      const locks = await until('the cluster-wide limits to count the lock waiter', async () => {
        const got = (await limitsOn(api)).filter((l) => l.kind === 'lock');
        return got.length === 1 && got[0].waiting === 1 ? got : undefined;
      });
      expect(locks).toEqual([item]);
    }

    held.respond({ status: 200, body: {} });
    const write = await ts.call('write', writer.id);
    expect(ts.held()).toEqual([write]);
    expect((await a.settled(reader.id, OPS)).status).toBe('succeeded');
    expect(await callOf(a, writer.id, 'write')).not.toHaveProperty('waitingFor');
    write.respond({ status: 200, body: {} });
    expect((await b.settled(writer.id, OPS)).status).toBe('succeeded');
    expect(await eventsOf(b, writer.id)).toEqual([
      'run.created',
      'run.started',
      'call.ready',
      'call.waiting',
      'call.started',
      'call.succeeded',
      'run.completed',
    ]);
  });

  it("a replica's published waiters count while its lease holds, and not once it ended", async () => {
    const pool = (a.store as PostgresStore).pool;
    // A replica of its own, as the database sees it: alive, with 3 calls waiting for deploy for 4 s
    // (on its own clock, an hour off the others': only the age counts).
    const waits = JSON.stringify([{ kind: 'tool', key: 'deploy', n: 3, since: 3_600_000 }]);
    await pool.query(
      `INSERT INTO replicas (instance, name, started_at, lease_until, renewed_at, waits, waits_clock, waits_at)
       VALUES ('ghost/1', 'ghost', toolgraph_now(), toolgraph_now() + 60000, toolgraph_now(), $1, 3604000, toolgraph_now())`,
      [waits],
    );
    try {
      for (const api of [a, b]) {
        const items = (await limitsOn(api)).filter((l) => l.kind === 'tool');
        expect(items).toEqual([
          { kind: 'tool', key: 'deploy', limit: 1, inUse: 0, waiting: 3, longestWaitMs: expect.any(Number), holders: [] },
        ]);
        expect(items[0].longestWaitMs).toBeGreaterThanOrEqual(4000);
        expect(items[0].longestWaitMs).toBeLessThan(60_000);
      }
      await pool.query(`UPDATE replicas SET lease_until = 0 WHERE instance = 'ghost/1'`);
      for (const api of [a, b]) expect((await limitsOn(api)).filter((l) => l.kind === 'tool')).toEqual([]);
    } finally {
      await pool.query(`DELETE FROM replicas WHERE instance = 'ghost/1'`);
    }
  });

  it("a rate wait gives retryAt from the cluster's bucket: a minute after the other replica took its token", async () => {
    const first = await submitAs(a, ACME, [{ id: 'n', tool: 'notify', args: {} }]);
    expect((await a.settled(first.id, OPS)).status).toBe('succeeded');
    const second = await submitAs(b, ACME, [{ id: 'n', tool: 'notify', args: {} }]);
    const waiting = await until('the refused call names its wait', async () => (await callOf(b, second.id, 'n')).waitingFor);
    expect(waiting).toEqual([
      { kind: 'rate', key: 'tool:notify', limit: 1, perMs: 60_000, retryAt: expect.stringMatching(ISO), holders: [] },
    ]);
    // The token was taken when the first started (on the database's clock, a little before).
    const taken = Date.parse((await callOf(a, first.id, 'n')).startedAt);
    expect(Math.abs(Date.parse(waiting[0].retryAt) - (taken + 60_000))).toBeLessThan(1000);
    const item = {
      kind: 'rate',
      key: 'tool:notify',
      limit: 1,
      perMs: 60_000,
      inUse: 1,
      waiting: 1,
      longestWaitMs: expect.any(Number),
      retryAt: waiting[0].retryAt,
      holders: [],
    };
    for (const api of [a, b]) {
      const rates = await until('the cluster-wide limits to count the rate waiter', async () => {
        const got = (await limitsOn(api)).filter((l) => l.kind === 'rate');
        return got.length === 1 && got[0].waiting === 1 ? got : undefined;
      });
      expect(rates).toEqual([item]);
    }
    // The replica where it waits counts it in its metrics (it keeps no rate bucket of its own).
    expect((await b.get('/metrics', { token: OPS })).text).toContain('toolgraph_limit_waiting{kind="rate",limit="tool:notify"} 1');
    expect((await a.post(`/v1/runs/${second.id}/cancel`, undefined, { token: ACME })).status).toBe(202);
    expect((await b.settled(second.id, OPS)).status).toBe('cancelled');
  });
});
