/**
 * Two `toolgraph serve` processes started with the same `--replica-id` on one PostgreSQL (a mistake of
 * configuration): the later one keeps the name, and the earlier one says so once (`replica_name_taken`)
 * and stays out of the cluster while the name is held, instead of taking it back (each ending the
 * other's lease in turn, every third of a lease, for ever). Once the other process is gone (kill -9) and
 * its lease has run out, the earlier one joins again and serves.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type ServerChild } from '../../src/bench/child.js';
import { startCluster, type TestCluster } from '../helpers/replicas.js';
import { until } from '../helpers/wait.js';

const LEASE_MS = 1000;

const yaml = () => `
tools:
  - name: echo
    reads: []
    writes: []
    idempotent: true
    executor: { kind: builtin, name: echo }
`;

describe('two processes with one replica name', () => {
  let c: TestCluster;
  let twin: ServerChild | undefined;
  let db: pg.Client;

  beforeAll(async () => {
    c = await startCluster(1, yaml, { leaseMs: LEASE_MS, logLevel: 'info' });
    db = new pg.Client({ connectionString: c.db });
    await db.connect();
  }, 60_000);

  afterAll(async () => {
    await db?.end();
    await twin?.kill9();
    await c?.close();
  });

  const first = () => c.replicas[0] as ServerChild;
  const count = (out: string, what: string) => out.split('\n').filter((l) => l.includes(what)).length;
  const health = async (url: string) => (await fetch(`${url}/healthz`)).status;
  const instances = async () =>
    (
      await db.query<{ instance: string; renewed_at: string }>(
        `SELECT instance, renewed_at FROM replicas WHERE name = 'r0' ORDER BY started_at`,
      )
    ).rows;

  it('the later process keeps the name; the earlier, busy with runs, says so once and stays out while the name is held', async () => {
    expect(await health(first().url)).toBe(200);
    // Runs on the first process all along: its appends are fenced off once the twin ends its lease, which
    // may tell it before its next renewal does.
    let loading = true;
    let accepted = 0;
    const load = (async () => {
      for (let i = 0; loading; i++) {
        const r = await c
          .request(0, 'POST', '/v1/runs', { calls: [{ id: 'a', tool: 'echo', args: { i } }], waitMs: 5000 })
          .catch(() => undefined);
        if (r?.status === 201) accepted++;
        if (r?.status === 503) await new Promise((x) => setTimeout(x, 20));
      }
    })();
    await until('runs on the first process', () => (accepted >= 20 ? true : undefined));
    twin = await startServer({ config: c.config, db: c.db, args: ['--replica-id', 'r0'], env: { LOG_LEVEL: 'info' } });
    await until('the first process to say its name was taken', () =>
      count(first().output(), 'replica_name_taken') > 0 ? true : undefined,
    );
    const [, theirs] = await instances();
    expect(theirs).toBeDefined();
    // Two whole leases of the other process's renewals, on the database's clock.
    const from = Number(theirs?.renewed_at);
    await until(
      'two leases of renewals of the later process',
      async () => ((await instances()).some((r) => Number(r.renewed_at) >= from + 2 * LEASE_MS) ? true : undefined),
      15_000,
    );
    loading = false;
    await load;
    // Still the same two instances: the first did not join again and end the other's lease.
    expect((await instances()).length).toBe(2);
    expect(count(first().output(), 'replica_name_taken')).toBe(1);
    // Told by a renewal or by an append fenced off, whichever came first: one warning, one error.
    expect(count(first().output(), 'lost the lease')).toBe(1);
    expect(count(twin.output(), 'lost the lease') + count(twin.output(), 'replica_name_taken')).toBe(0);
    expect(await health(first().url)).toBe(503);
    expect(await health(twin.url)).toBe(200);
    const refused = await c.request(0, 'POST', '/v1/runs', { calls: [{ id: 'a', tool: 'echo', args: {} }], waitMs: 5000 });
    expect(refused.status).toBe(503);
  }, 60_000);

  it('once the other process is gone and its lease ran out, the first joins again and serves', async () => {
    await twin?.kill9();
    twin = undefined;
    await until(
      'the first process to join again',
      () => (first().output().includes('joined the cluster again') ? true : undefined),
      15_000,
    );
    expect(await health(first().url)).toBe(200);
    expect((await instances()).length).toBe(3);
    const r = await c.request(0, 'POST', '/v1/runs', { calls: [{ id: 'a', tool: 'echo', args: { x: 1 } }], waitMs: 5000 });
    expect(r.status).toBe(201);
    expect(r.body.status).toBe('succeeded');
  }, 60_000);
});
