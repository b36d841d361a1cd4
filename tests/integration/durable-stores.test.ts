/**
 * The API on both durable stores (DESIGN §8, §12): the same requests against a real server on SQLite
 * and on PostgreSQL (a throwaway cluster, tests/helpers/postgres.ts) give the same answers — submit,
 * get, list with filters and cursors, events, idempotency — and a restart resumes what was running.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startApi, type Api } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

const YAML = `
tools:
  - name: echo
    executor: { kind: builtin, name: echo }
    idempotent: true
  - name: sleep
    executor: { kind: builtin, name: sleep }
    idempotent: true
`;

let cluster: TestPostgres | undefined;
beforeAll(async () => {
  cluster = await startPostgres();
}, 60_000);
afterAll(async () => cluster?.stop());

describe.each(['sqlite', 'postgres'] as const)('the API on %s', (kind) => {
  let api: Api;
  beforeAll(async () => {
    api = await startApi({ yaml: YAML, ...(kind === 'postgres' ? { db: await (cluster as TestPostgres).createDatabase() } : {}) });
  }, 60_000);
  afterAll(async () => api?.close());

  it('names its store in /healthz', async () => {
    const res = await api.get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'ok', store: kind });
  });

  it('submits, gets and lists runs, filtered and paged by cursor', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await api.post('/v1/runs', {
        tenant: i % 2 ? 'odd' : 'even',
        tags: { n: String(i) },
        calls: [{ id: 'a', tool: 'echo', args: { i } }],
        waitMs: 5000,
      });
      expect(res.status).toBe(201);
      expect(res.body.status).toBe('succeeded');
      ids.push(res.body.id);
    }
    const got = await api.get(`/v1/runs/${ids[2]}`);
    expect(got.body).toMatchObject({
      id: ids[2],
      tenant: 'even',
      status: 'succeeded',
      calls: [{ id: 'a', status: 'succeeded', output: { i: 2 } }],
    });
    const even = await api.get('/v1/runs?tenant=even&status=succeeded');
    expect(even.body.items.map((r: { id: string }) => r.id).filter((id: string) => ids.includes(id))).toEqual([ids[4], ids[2], ids[0]]);
    expect((await api.get('/v1/runs?tag=n:3')).body.items.map((r: { id: string }) => r.id)).toEqual([ids[3]]);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { body: { items: { id: string }[]; nextCursor: string | null } } = await api.get(
        `/v1/runs?limit=2${cursor ? `&cursor=${cursor}` : ''}`,
      );
      seen.push(...page.body.items.map((r) => r.id));
      cursor = page.body.nextCursor;
    } while (cursor);
    expect(seen.filter((id) => ids.includes(id))).toEqual([...ids].reverse());
    expect((await api.get('/v1/runs?cursor=nope!')).status).toBe(400);
  });

  it('an Idempotency-Key gives the same run again, also when the repeats come together', async () => {
    const body = { calls: [{ id: 'a', tool: 'echo', args: {} }] };
    const all = await Promise.all(
      Array.from({ length: 5 }, () => api.post('/v1/runs', body, { headers: { 'idempotency-key': `k-${kind}` } })),
    );
    const runIds = new Set(all.map((r) => r.body.id));
    expect(runIds.size).toBe(1);
    expect(all.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 201]);
    const again = await api.post('/v1/runs', body, { headers: { 'idempotency-key': `k-${kind}` } });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe([...runIds][0]);
  });

  it("streams a finished run's events, gapless, and resumes after Last-Event-ID", async () => {
    const run = (
      await api.post('/v1/runs', {
        calls: [
          { id: 'a', tool: 'echo', args: {} },
          { id: 'b', tool: 'echo', args: { x: '${a.output}' } },
        ],
        waitMs: 5000,
      })
    ).body;
    const all = await api.get(`/v1/runs/${run.id}/events`);
    const seqs = [...all.text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    expect(all.text).toContain('event: run.completed');
    const rest = await api.get(`/v1/runs/${run.id}/events`, { headers: { 'last-event-id': '3' } });
    expect([...rest.text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))).toEqual(seqs.slice(3));
    expect((await api.store.events(run.id)).map((e) => e.seq)).toEqual(seqs);
  });

  it('a restart resumes a running run from the store, and it ends', async () => {
    const run = (
      await api.post('/v1/runs', {
        calls: [
          { id: 's', tool: 'sleep', args: { ms: 1500 } },
          { id: 'e', tool: 'echo', args: { after: '${s.output}' } },
        ],
      })
    ).body;
    expect(run.status).toBe('running');
    // On PostgreSQL a call starts once it holds its cluster-wide permit: wait until `s` runs.
    await until('call s to run', async () => ((await api.get(`/v1/runs/${run.id}`)).body.calls[0].status === 'running' ? true : undefined));
    api = await api.restart();
    const ended = await api.settled(run.id);
    expect(ended.status).toBe('succeeded');
    const events = await api.store.events(run.id);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(
      events.filter((e) => e.type === 'call.started' && e.callId === 's').length,
      JSON.stringify(events.map((e) => [e.type, e.callId])),
    ).toBe(2);
  }, 30_000);
});
