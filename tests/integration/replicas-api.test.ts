/**
 * The operations side of several replicas (DESIGN §12) over HTTP: `GET /v1/replicas` (operator only)
 * and the `owner` of each run in `GET /v1/runs` and `GET /v1/runs/{id}` — on SQLite (one process: a
 * single replica without a lease, no owner) and on PostgreSQL with two replicas in this process on one
 * throwaway database (a run owned by the replica that accepted it, seen so through the other, in the
 * list, the run and `/v1/stream`; no owner once ended; repeats of an idempotency key on both make one
 * run; a replica that leaves cleanly leaves the list).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { expectApiError, sse, startApi, type Api } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

const YAML = `
tools:
  - name: echo
    executor: { kind: builtin, name: echo }
    idempotent: true
  - name: launch
    risk: dangerous
    executor: { kind: builtin, name: echo }
policy:
  rules:
    - match: { risk: dangerous }
      review: true
`;

/** A run that stays `running` until its review is decided. */
const REVIEWED = { calls: [{ id: 'go', tool: 'launch', args: { target: 'prod' } }] };

async function awaitingReview(api: Api, runId: string): Promise<string> {
  const s = await sse(`${api.url}/v1/runs/${runId}/events`);
  await s.next((e) => e.event === 'call.awaiting_review');
  s.close();
  await s.ended;
  const list = await api.get(`/v1/reviews?runId=${runId}`);
  return list.body.items[0].id as string;
}

describe('on SQLite', () => {
  let api: Api;
  beforeAll(async () => {
    api = await startApi({ yaml: YAML });
  });
  afterAll(async () => api?.close());

  it('GET /v1/replicas is this process alone, without a lease', async () => {
    const before = Date.now();
    const res = await api.get('/v1/replicas');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      store: 'sqlite',
      replica: api.service.replica,
      leaseMs: null,
      items: [
        {
          name: api.service.replica,
          instance: api.service.replica,
          self: true,
          startedAt: expect.any(String),
          leaseUntil: null,
          renewedAt: null,
          leaseLeftMs: null,
          alive: true,
          ownedRuns: 0,
        },
      ],
    });
    expect(Date.parse(res.body.items[0].startedAt)).toBeLessThanOrEqual(before);
  });

  it('counts the runs it runs; runs have owner null in the list and the run', async () => {
    const run = (await api.post('/v1/runs', REVIEWED)).body;
    const reviewId = await awaitingReview(api, run.id);
    expect((await api.get('/v1/replicas')).body.items[0].ownedRuns).toBe(1);
    const list = await api.get('/v1/runs');
    expect(list.body.items.find((r: any) => r.id === run.id)).toMatchObject({ status: 'running', owner: null });
    expect((await api.get(`/v1/runs/${run.id}`)).body).toMatchObject({ status: 'running', owner: null });
    expect((await api.post(`/v1/reviews/${reviewId}`, { decision: 'approve' })).status).toBe(200);
    await api.settled(run.id);
    expect((await api.get('/v1/replicas')).body.items[0].ownedRuns).toBe(0);
  });
});

describe('with auth keys', () => {
  let api: Api;
  beforeAll(async () => {
    api = await startApi({
      yaml: `${YAML}
auth:
  keys:
    - { key: op-key, tenant: ops, role: operator }
    - { key: agent-key, tenant: acme, role: agent }
`,
    });
  });
  afterAll(async () => api?.close());

  it('GET /v1/replicas is for operators: 401 without a key, 403 forbidden for an agent key', async () => {
    expectApiError(await api.get('/v1/replicas'), 401, 'unauthorized');
    expectApiError(await api.get('/v1/replicas', { token: 'agent-key' }), 403, 'forbidden');
    const ok = await api.get('/v1/replicas', { token: 'op-key' });
    expect(ok.status).toBe(200);
    expect(ok.body.items).toHaveLength(1);
  });
});

describe('on PostgreSQL, two replicas', () => {
  const LEASE_MS = 1500;
  let pg: TestPostgres;
  let a: Api;
  let b: Api;

  beforeAll(async () => {
    pg = await startPostgres();
    const db = await pg.createDatabase();
    const yaml = `${YAML}\nstore:\n  leaseMs: ${LEASE_MS}\n`;
    a = await startApi({ yaml, db, replica: 'ra' });
    b = await startApi({ yaml, db, replica: 'rb' });
  }, 60_000);
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await pg?.stop();
  });

  it('GET /v1/replicas lists both, alive, with their leases, on either', async () => {
    for (const [api, me] of [
      [a, 'ra'],
      [b, 'rb'],
    ] as const) {
      const res = await api.get('/v1/replicas');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ store: 'postgres', replica: me, leaseMs: LEASE_MS });
      expect(res.body.items.map((r: any) => [r.name, r.self, r.alive])).toEqual([
        ['ra', me === 'ra', true],
        ['rb', me === 'rb', true],
      ]);
      for (const r of res.body.items) {
        expect(r.instance).toMatch(new RegExp(`^${r.name}/[0-9a-f]{8}$`));
        expect(r.leaseLeftMs).toBeGreaterThan(0);
        expect(r.leaseLeftMs).toBeLessThanOrEqual(LEASE_MS);
        expect(Date.parse(r.leaseUntil)).toBeGreaterThan(Date.parse(r.renewedAt));
        expect(Date.parse(r.renewedAt)).toBeGreaterThanOrEqual(Date.parse(r.startedAt));
      }
    }
  });

  it('a run names its owner through either replica while it runs, and none once it ended', async () => {
    const run = (await a.post('/v1/runs', REVIEWED)).body;
    const reviewId = await awaitingReview(b, run.id);
    for (const api of [a, b]) {
      expect((await api.get(`/v1/runs/${run.id}`)).body).toMatchObject({ id: run.id, status: 'running', owner: 'ra' });
      const item = (await api.get('/v1/runs')).body.items.find((r: any) => r.id === run.id);
      expect(item).toMatchObject({ status: 'running', owner: 'ra' });
    }
    const owned = Object.fromEntries((await b.get('/v1/replicas')).body.items.map((r: any) => [r.name, r.ownedRuns]));
    expect(owned).toEqual({ ra: 1, rb: 0 });
    // Decided through the other replica: carried to the owner, which ends the run.
    expect((await b.post(`/v1/reviews/${reviewId}`, { decision: 'approve' })).status).toBe(200);
    const ended = await until('the run to end', async () => {
      const r = (await b.get(`/v1/runs/${run.id}`)).body;
      return r.endedAt ? r : undefined;
    });
    expect(ended).toMatchObject({ status: 'succeeded', owner: null });
    expect((await a.get('/v1/runs')).body.items.find((r: any) => r.id === run.id)).toMatchObject({ status: 'succeeded', owner: null });
    expect(Object.fromEntries((await a.get('/v1/replicas')).body.items.map((r: any) => [r.name, r.ownedRuns]))).toEqual({ ra: 0, rb: 0 });
  });

  it('/v1/stream on the other replica names the owner of a run as it changes, and none once it ended', async () => {
    const s = await sse(`${b.url}/v1/stream`);
    const run = (await a.post('/v1/runs', REVIEWED)).body;
    const running = await s.next((e) => e.event === 'run' && e.data.id === run.id && e.data.callCounts.awaiting_review === 1);
    expect(running.data).toMatchObject({ status: 'running', owner: 'ra' });
    const reviewId = (await a.get(`/v1/reviews?runId=${run.id}`)).body.items[0].id;
    expect((await a.post(`/v1/reviews/${reviewId}`, { decision: 'approve' })).status).toBe(200);
    const ended = await s.next((e) => e.event === 'run' && e.data.id === run.id && e.data.endedAt !== null);
    expect(ended.data).toMatchObject({ status: 'succeeded', owner: null });
    s.close();
    await s.ended;
  });

  it('repeats of an Idempotency-Key sent together to both replicas get one run: one 201, the rest 200 with its id', async () => {
    for (let round = 0; round < 5; round++) {
      const key = `both-${round}`;
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          (i % 2 ? a : b).post(
            '/v1/runs',
            { tags: { key }, calls: [{ id: 'a', tool: 'echo', args: { round } }] },
            { headers: { 'idempotency-key': key } },
          ),
        ),
      );
      expect(answers.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
      expect(new Set(answers.map((r) => r.body.id)).size).toBe(1);
      expect((await b.get(`/v1/runs?tag=key:${key}`)).body.items.map((r: any) => r.id)).toEqual([answers[0]?.body.id]);
    }
  });

  it('a replica that leaves cleanly ends its lease and leaves the list', async () => {
    await b.close();
    const res = await a.get('/v1/replicas');
    expect(res.body.items.map((r: any) => r.name)).toEqual(['ra']);
  });
});
