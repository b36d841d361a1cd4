/**
 * Appends announce their runs on `toolgraph_events` only while some replica follows every replica's
 * events (cluster/feed.ts, migration 0009): two `toolgraph serve` replicas on one throwaway PostgreSQL,
 * and a LISTEN connection of this test's own. Nothing is waited for by time: a NOTIFY of the test's
 * own, sent after a run has ended, arrives after whatever that run's appends announced (PostgreSQL
 * delivers notifications in the order of their commits).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRunEvents, startCluster, type TestCluster } from '../helpers/replicas.js';
import { until } from '../helpers/wait.js';

const yaml = (toolUrl: string) => `
tools:
  - name: quick
    reads: []
    writes: []
    idempotent: true
    executor: { kind: http, url: "${toolUrl}/quick" }
`;

describe('appends announce their runs only while a replica follows', () => {
  let c: TestCluster;
  let listener: pg.Client;
  let admin: pg.Client;
  const heard: string[] = [];
  let markers = 0;

  /** What was announced since the last call (each `runId:seq`), up to a marker sent now. */
  async function announced(): Promise<string[]> {
    const marker = `marker-${++markers}`;
    await admin.query(`SELECT pg_notify('toolgraph_events', $1)`, [marker]);
    await until('the marker to arrive', () => (heard.includes(marker) ? true : undefined), 10_000);
    const before = heard.splice(0, heard.indexOf(marker) + 1).slice(0, -1);
    return before.flatMap((p) => p.split(','));
  }

  const followers = async () =>
    Number((await admin.query('SELECT count(*) FROM event_followers WHERE until > toolgraph_now()')).rows[0].count);

  beforeAll(async () => {
    c = await startCluster(2, yaml);
    listener = new pg.Client({ connectionString: c.db });
    await listener.connect();
    listener.on('notification', (n) => heard.push(n.payload ?? ''));
    await listener.query('LISTEN toolgraph_events');
    admin = new pg.Client({ connectionString: c.db });
    await admin.connect();
  }, 60_000);

  afterAll(async () => {
    await listener?.end();
    await admin?.end();
    await c?.close();
  });

  it('sends no NOTIFY while nobody follows, and announces every run once a replica reads another replica’s run', async () => {
    const first = await c.request(0, 'POST', '/v1/runs', { calls: [{ id: 'a', tool: 'quick', args: { ms: 1 } }], waitMs: 10_000 });
    expect(first.body.status).toBe('succeeded');
    expect(await followers()).toBe(0);
    expect(await announced()).toEqual([]);

    // Replica 1 streams a run that replica 0 runs: it follows from then on.
    const held = (await c.request(0, 'POST', '/v1/runs', { calls: [{ id: 'h', tool: 'quick', args: { hold: true } }] })).body;
    await until('the held call to run', () => c.tools.of(held.id, 'h')[0]);
    const streamed = readRunEvents(c.replicas[1]!.url, held.id);
    await until('replica 1 to follow', async () => ((await followers()) === 1 ? true : undefined), 10_000);
    c.tools.release();
    const events = await streamed;
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.at(-1)?.type).toBe('run.completed');
    const last = events.at(-1)?.seq;
    expect(await announced()).toContain(`${held.id}:${last}`);

    // A run of replica 0 that nobody reads elsewhere is announced too while replica 1 follows.
    const third = await c.request(0, 'POST', '/v1/runs', { calls: [{ id: 'a', tool: 'quick', args: { ms: 1 } }], waitMs: 10_000 });
    expect(third.body.status).toBe('succeeded');
    expect((await announced()).some((x) => x.startsWith(`${third.body.id}:`))).toBe(true);
  }, 60_000);
});
