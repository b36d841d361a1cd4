/**
 * Store faults on PostgreSQL (DESIGN §7 Faults, §12), against a real cluster that the test stops and
 * starts: an unreachable database at start is exit 2 naming host and port (never the password); a
 * database gone while serving makes writes answer 503 `store_unavailable` with `Retry-After` and
 * `/healthz` 503 `degraded`, nothing crashes, and once it is back the service resumes by itself within
 * 5 s, with every accepted run there and no event stored twice.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startApi, type Api } from '../helpers/server.js';

const YAML = `
tools:
  - name: echo
    executor: { kind: builtin, name: echo }
    idempotent: true
  - name: sleep
    executor: { kind: builtin, name: sleep }
    idempotent: true
`;

const until = async (f: () => Promise<boolean>, ms: number) => {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await f()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return f();
};

describe('PostgreSQL faults', () => {
  let cluster: TestPostgres;
  let api: Api;
  beforeAll(async () => {
    cluster = await startPostgres();
    api = await startApi({ yaml: YAML, db: await cluster.createDatabase() });
  }, 60_000);
  afterAll(async () => {
    await api?.close();
    await cluster?.stop();
  });

  it('an unreachable database at start is exit 2, naming host and port but not the password', async () => {
    const port = await freePort();
    const r = spawnSync(process.execPath, ['bin/toolgraph.mjs', 'serve', '--port', '0', '--db', `postgres://tg:sekret-pw@127.0.0.1:${port}/toolgraph`], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`127.0.0.1:${port}`);
    expect(r.stderr).not.toContain('sekret-pw');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 40_000);

  it('the database gone while serving: 503 store_unavailable and degraded; back within 5 s, nothing lost or doubled', async () => {
    const accepted: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await api.post('/v1/runs', { calls: [{ id: 's', tool: 'sleep', args: { ms: 300 } }, { id: 'e', tool: 'echo', args: { after: '${s.output}' } }] });
      expect(r.status).toBe(201);
      accepted.push(r.body.id);
    }
    cluster.pause();
    // A write while it is away: held by the engine until the store is back, or refused with 503.
    const inFlight = api.post('/v1/runs', { calls: [{ id: 'a', tool: 'echo', args: {} }] });
    expect(await until(async () => api.service.engine.storeUnavailable() !== undefined, 10_000)).toBe(true);
    const refused = await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'echo', args: {} }] });
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('store_unavailable');
    expect(refused.headers.get('retry-after')).toBe('1');
    const health = await api.get('/healthz');
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ status: 'degraded', store: 'postgres' });
    // A read the engine can answer goes on.
    expect((await api.get(`/v1/runs/${accepted[0]}`)).status).toBe(200);

    cluster.resume();
    const back = Date.now();
    expect(await until(async () => (await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'echo', args: {} }] })).status === 201, 5_000)).toBe(true);
    expect(Date.now() - back).toBeLessThan(5_000);
    const held = await inFlight;
    if (held.status === 201) accepted.push(held.body.id);
    else expect(held.status).toBe(503);
    expect((await api.get('/healthz')).status).toBe(200);
    for (const id of accepted) {
      expect((await api.settled(id)).status).toBe('succeeded');
      const events = await api.store.events(id);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
      expect(events.filter((e) => e.type === 'run.created')).toHaveLength(1);
      expect(events.filter((e) => e.type === 'run.completed')).toHaveLength(1);
    }
  }, 60_000);
});
