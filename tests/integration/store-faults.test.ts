/**
 * Store faults on PostgreSQL (DESIGN §7 Faults, §12), against a real cluster that the test stops and
 * starts: an unreachable database at start is exit 2 naming host and port (never the password); a
 * database gone while serving makes writes answer 503 `store_unavailable` with `Retry-After` and
 * `/healthz` 503 `degraded`, nothing crashes, and once it is back the service resumes by itself within
 * 5 s, with every accepted run there and no event stored twice.
 *
 * A submission whose write is in flight when the database goes (the test holds a lock, so the write
 * waits in the server, then kills the server) answers 503 at once rather than waiting for it to come
 * back; one whose write hangs (the lock held past the store's write bound) answers 503 after the bound.
 * Its run was not accepted: it never runs, and if its write lands after all (the lock let go), the
 * service ends it `cancelled`.
 */
import { spawnSync } from 'node:child_process';
import pg from 'pg';
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
  - name: once
    executor: { kind: builtin, name: echo }
    idempotent: false
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
    const r = spawnSync(
      process.execPath,
      ['bin/toolgraph.mjs', 'serve', '--port', '0', '--db', `postgres://tg:sekret-pw@127.0.0.1:${port}/toolgraph`],
      { encoding: 'utf8', timeout: 30_000 },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`127.0.0.1:${port}`);
    expect(r.stderr).not.toContain('sekret-pw');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 40_000);

  it('the database gone while serving: 503 store_unavailable and degraded; back within 5 s, nothing lost or doubled', async () => {
    const accepted: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await api.post('/v1/runs', {
        calls: [
          { id: 's', tool: 'sleep', args: { ms: 300 } },
          { id: 'e', tool: 'echo', args: { after: '${s.output}' } },
        ],
      });
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
    expect(
      await until(async () => (await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'echo', args: {} }] })).status === 201, 5_000),
    ).toBe(true);
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

  /** A connection of the test's own that holds a lock on the events table, so that appends wait. */
  async function lockEvents(url: string): Promise<pg.Client> {
    const c = new pg.Client({ connectionString: url });
    c.on('error', () => {});
    await c.connect();
    await c.query('BEGIN');
    await c.query('LOCK TABLE events IN EXCLUSIVE MODE');
    return c;
  }

  /** Resolves once an append waits for the lock in the server. */
  async function appendWaiting(locker: pg.Client): Promise<void> {
    const waiting = async () =>
      (await locker.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT%'`))
        .rows[0].n > 0;
    expect(await until(waiting, 10_000)).toBe(true);
  }

  /** Runs the database holds that the test was not told were accepted: their status and event types. */
  async function strangers(url: string, accepted: readonly string[]): Promise<{ id: string; status: string; types: string[] }[]> {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const runs = (
        await c.query<{ id: string; status: string }>('SELECT id, status FROM runs WHERE NOT (id = ANY($1::text[]))', [accepted])
      ).rows;
      const out = [];
      for (const r of runs)
        out.push({
          ...r,
          types: (await c.query<{ type: string }>('SELECT type FROM events WHERE run_id = $1 ORDER BY seq', [r.id])).rows.map(
            (e) => e.type,
          ),
        });
      return out;
    } finally {
      await c.end();
    }
  }

  async function expectAllSucceeded(ids: readonly string[]): Promise<void> {
    for (const id of ids) {
      expect((await api.settled(id)).status).toBe('succeeded');
      const events = await api.store.events(id);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
      expect(events.filter((e) => e.type === 'run.created')).toHaveLength(1);
      expect(events.filter((e) => e.type === 'run.completed')).toHaveLength(1);
    }
  }

  const slowRun = {
    calls: [
      { id: 's', tool: 'sleep', args: { ms: 1500 } },
      { id: 'e', tool: 'echo', args: { after: '${s.output}' } },
    ],
  };

  it('a write in flight when the database stops: 503 at once, not held until it is back; back by itself, nothing accepted lost', async () => {
    const accepted: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await api.post('/v1/runs', slowRun);
      expect(r.status).toBe(201);
      accepted.push(r.body.id);
    }
    const db = api.dbFile;
    const before = new Set((await strangers(db, accepted)).map((r) => r.id));
    const locker = await lockEvents(db);
    const inFlight = api.post('/v1/runs', { calls: [{ id: 'a', tool: 'once', args: { n: 1 } }] });
    await appendWaiting(locker);
    // The server goes while the write waits in it (killed: a clean stop could let the write commit first).
    cluster.pause('immediate');
    const t0 = Date.now();
    const answer = await inFlight;
    expect(answer.status, answer.text).toBe(503);
    expect(answer.body.error.code).toBe('store_unavailable');
    expect(answer.headers.get('retry-after')).toBe('1');
    expect(Date.now() - t0).toBeLessThan(3000);
    const again = await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'echo', args: {} }] });
    expect(again.status).toBe(503);
    expect((await api.get('/healthz')).status).toBe(503);

    cluster.resume();
    const back = Date.now();
    expect(
      await until(async () => {
        const r = await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'echo', args: {} }] });
        if (r.status === 201) accepted.push(r.body.id);
        return r.status === 201;
      }, 5_000),
    ).toBe(true);
    expect(Date.now() - back).toBeLessThan(5_000);
    await expectAllSucceeded(accepted);
    // The refused submission is not there: its write died with the server.
    expect((await strangers(db, accepted)).filter((r) => !before.has(r.id))).toEqual([]);
  }, 60_000);

  it('a write that hangs past the bound answers 503; its run, landing once the lock goes, is ended cancelled and never runs', async () => {
    const accepted: string[] = [];
    for (let i = 0; i < 2; i++) {
      const r = await api.post('/v1/runs', slowRun);
      expect(r.status).toBe(201);
      accepted.push(r.body.id);
    }
    const db = api.dbFile;
    const before = new Set((await strangers(db, accepted)).map((r) => r.id));
    const locker = await lockEvents(db);
    try {
      const t0 = Date.now();
      const answer = await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'once', args: { n: 2 } }] });
      // The store's write bound (3 s by default: store/pg-pool.ts), not the lock's holder, decides.
      expect(answer.status, answer.text).toBe(503);
      expect(answer.body.error.code).toBe('store_unavailable');
      expect(answer.headers.get('retry-after')).toBe('1');
      expect(Date.now() - t0).toBeGreaterThanOrEqual(2_500);
      expect(Date.now() - t0).toBeLessThan(5_500);
    } finally {
      await locker.query('COMMIT');
      await locker.end();
    }
    // The write that timed out was still waiting in the server, and lands now: the service ends that run.
    const landed = await until(async () => {
      const found = (await strangers(db, accepted)).filter((r) => !before.has(r.id));
      return found.length === 1 && found[0]?.status === 'cancelled';
    }, 15_000);
    expect(landed).toBe(true);
    const [withdrawn] = (await strangers(db, accepted)).filter((r) => !before.has(r.id));
    expect(withdrawn?.types[0]).toBe('run.created');
    expect(withdrawn?.types.at(-1)).toBe('run.completed');
    expect(withdrawn?.types.filter((t) => t === 'call.succeeded' || t === 'call.failed')).toEqual([]);
    const view = await api.get(`/v1/runs/${withdrawn?.id}`);
    expect(view.body.status).toBe('cancelled');
    expect(
      await until(async () => (await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'echo', args: {} }] })).status === 201, 10_000),
    ).toBe(true);
    await expectAllSucceeded(accepted);
  }, 60_000);
});
