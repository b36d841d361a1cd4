/**
 * Several replicas (DESIGN §12) with real parts: three `toolgraph serve` processes on one throwaway
 * PostgreSQL, their http tools served by this test, which logs when each attempt really ran. Every
 * guarantee is checked from that log and the stored event logs, with faults injected: kill -9, SIGSTOP
 * past the lease, and a database restart.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxOverlap, readRunEvents as readEvents, startCluster, type TestCluster } from '../helpers/replicas.js';
import { until } from '../helpers/wait.js';

const LEASE_MS = 2000;

function yaml(toolUrl: string): string {
  const tool = (name: string, extra = '', idempotent = true) => `
  - name: ${name}
    reads: []
    writes: []
    idempotent: ${idempotent}
    executor: { kind: http, url: "${toolUrl}/${name}" }${extra}`;
  return `
tools:${tool('lim_a')}${tool('free_b')}
  - name: res_c
    reads: []
    writes: ["res:{name}"]
    scope: global
    idempotent: true
    executor: { kind: http, url: "${toolUrl}/res_c" }
  - name: lock_w
    reads: []
    writes: ["file:/shared"]
    scope: global
    idempotent: true
    executor: { kind: http, url: "${toolUrl}/lock_w" }${tool('hold_idem')}${tool('hold_once', '', false)}
  - name: rated
    reads: []
    writes: []
    idempotent: true
    rate: 2/s
    executor: { kind: http, url: "${toolUrl}/rated" }
limits:
  maxActiveRunsPerTenant: 5
  tool: { lim_a: 2 }
  tenant: { capped: 3 }
  resource: { "res:*": 1 }
defaults:
  failure: partial
`;
}

const TOOLS_OF = { free: ['lim_a', 'res_c', 'lock_w'], capped: ['free_b'] } as const;

interface Workload {
  runs: { tenant: 'free' | 'capped'; replica: number; calls: string[] }[];
}

const workload: fc.Arbitrary<Workload> = fc.record({
  runs: fc.array(
    fc.oneof(
      fc.record({
        tenant: fc.constant('free' as const),
        replica: fc.integer({ min: 0, max: 2 }),
        calls: fc.array(fc.constantFrom(...TOOLS_OF.free), { minLength: 1, maxLength: 4 }),
      }),
      fc.record({
        tenant: fc.constant('capped' as const),
        replica: fc.integer({ min: 0, max: 2 }),
        calls: fc.array(fc.constantFrom(...TOOLS_OF.capped), { minLength: 1, maxLength: 4 }),
      }),
    ),
    { minLength: 2, maxLength: 5 },
  ),
});

describe('several replicas on one PostgreSQL', () => {
  let c: TestCluster;

  beforeAll(async () => {
    c = await startCluster(3, yaml, LEASE_MS);
  }, 90_000);

  afterAll(async () => {
    await c?.close();
  });

  it('limits and locks hold across replicas: never exceeded, and reached when there is enough ready work', async () => {
    let round = 0;
    await fc.assert(
      fc.asyncProperty(workload, async (w) => {
        round++;
        const submitted = await Promise.all(
          w.runs.map((r, i) =>
            c.request(r.replica, 'POST', '/v1/runs', {
              tenant: r.tenant,
              calls: r.calls.map((tool, k) => ({ id: `c${k}`, tool, args: { name: `n${(i + k) % 2}`, ms: 800, round } })),
            }),
          ),
        );
        for (const s of submitted) expect(s.status, JSON.stringify(s.body)).toBe(201);
        const ids = submitted.map((s) => s.body.id as string);
        for (const [i, id] of ids.entries()) expect((await c.ended((i + 1) % 3, id)).status).toBe('succeeded');
        const mine = c.tools.attempts.filter((a) => ids.includes(a.runId));
        const tenantOf = new Map(ids.map((id, i) => [id, w.runs[i]!.tenant]));
        const byTool = (tool: string) => mine.filter((a) => a.tool === tool);
        const capped = mine.filter((a) => tenantOf.get(a.runId) === 'capped');
        const count = (tool: string) => w.runs.reduce((n, r) => n + r.calls.filter((t) => t === tool).length, 0);
        // Never exceeded.
        expect(maxOverlap(byTool('lim_a'))).toBeLessThanOrEqual(2);
        expect(maxOverlap(capped)).toBeLessThanOrEqual(3);
        expect(maxOverlap(byTool('res_c'))).toBeLessThanOrEqual(1);
        expect(maxOverlap(byTool('lock_w'))).toBeLessThanOrEqual(1);
        // Reached: every call is ready at once (no references), so a limit with enough calls fills up
        // (the calls take 800 ms, so the replicas that ask later still meet the first ones running).
        expect(maxOverlap(byTool('lim_a'))).toBe(Math.min(2, count('lim_a')));
        expect(maxOverlap(capped)).toBe(Math.min(3, count('free_b')));
        if (count('res_c') > 0) expect(maxOverlap(byTool('res_c'))).toBe(1);
        // Each call ran once (no faults here).
        expect(mine.length).toBe(w.runs.reduce((n, r) => n + r.calls.length, 0));
      }),
      {
        numRuns: 4,
        seed: 17,
        endOnFailure: true,
        // Always among them: more work than any limit, spread over every replica.
        examples: [
          [
            {
              runs: [
                { tenant: 'free', replica: 0, calls: ['lim_a', 'lim_a', 'res_c', 'lock_w'] },
                { tenant: 'free', replica: 1, calls: ['lim_a', 'lim_a', 'res_c', 'lock_w'] },
                { tenant: 'capped', replica: 2, calls: ['free_b', 'free_b', 'free_b'] },
                { tenant: 'capped', replica: 1, calls: ['free_b', 'free_b'] },
                { tenant: 'free', replica: 2, calls: ['lim_a', 'lock_w'] },
              ],
            },
          ],
        ],
      },
    );
  }, 120_000);

  it('a rate limit holds across replicas (a token bucket of 2, 2 per second), and is reached', async () => {
    const runs = await Promise.all(
      [0, 1, 2].map(
        async (i, k) =>
          (
            await c.request(i, 'POST', '/v1/runs', {
              calls: [0, 1, 2, 3].map((n) => ({ id: `q${n}`, tool: 'rated', args: { ms: 10, k } })),
            })
          ).body,
      ),
    );
    for (const r of runs) expect((await c.ended(0, r.id)).status).toBe('succeeded');
    // When each start was granted: the `at` of its call.started (every replica's clock is this machine's).
    const starts = (await Promise.all(runs.map((r) => storedEvents(c, r.id))))
      .flat()
      .filter((e) => e.type === 'call.started')
      .map((e) => Number(e.at))
      .sort((x, y) => x - y);
    expect(starts).toHaveLength(12);
    expect(runs.flatMap((r) => c.tools.of(r.id))).toHaveLength(12);
    // Never exceeded: in any window of W ms, at most 2 + 2·W/1000 starts. A grant is stamped a moment
    // after the database took its token, and that moment varies on a loaded machine: 250 ms of slack.
    // Without a shared bucket the three replicas would start 6 at once.
    for (let i = 0; i < starts.length; i++) {
      for (let j = i + 1; j < starts.length; j++)
        expect(j - i + 1, `starts ${i}..${j}: ${starts.map((t) => t - starts[0]!).join(' ')}`).toBeLessThanOrEqual(
          2 + (2 * (starts[j]! - starts[i]! + 250)) / 1000,
        );
    }
    // Reached: 12 starts need 5 s at the rate (2 at once, then one each 500 ms); they take little more.
    expect(starts.at(-1)! - starts[0]!).toBeLessThan(5000 + 1500);
  }, 60_000);

  it('maxActiveRunsPerTenant (5) holds across replicas: of six runs sent at once to three replicas, with three running, exactly two are admitted', async () => {
    const held = await Promise.all(
      [0, 1, 2].map(
        async (i) =>
          (await c.request(i, 'POST', '/v1/runs', { tenant: 'burst', calls: [{ id: 'h', tool: 'hold_idem', args: { hold: true, i } }] }))
            .body,
      ),
    );
    for (const r of held) expect(r.status).toBe('running');
    const burst = await Promise.all(
      [0, 1, 2, 0, 1, 2].map((i, k) =>
        c.request(i, 'POST', '/v1/runs', { tenant: 'burst', calls: [{ id: 'b', tool: 'hold_idem', args: { hold: true, k } }] }),
      ),
    );
    expect(burst.map((r) => r.status).sort()).toEqual([201, 201, 429, 429, 429, 429]);
    for (const r of burst.filter((x) => x.status === 429)) expect(r.body.error.code).toBe('too_many_runs');
    const admitted = [...held, ...burst.filter((x) => x.status === 201).map((x) => x.body)];
    for (const r of admitted) await until(`${r.id} to run`, () => c.tools.of(r.id)[0]);
    c.tools.release((a) => admitted.some((r) => r.id === a.runId));
    for (const r of admitted) expect((await c.ended(0, r.id)).status).toBe('succeeded');
  }, 60_000);

  it('a submission repeated on another replica with its Idempotency-Key and waitMs waits there for the run to end', async () => {
    const post = (i: number) =>
      fetch(`${c.replicas[i]!.url}/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'k-elsewhere' },
        body: JSON.stringify({
          calls: [
            { id: 'a', tool: 'lim_a', args: { ms: 400 } },
            { id: 'b', tool: 'free_b', args: { after: '${a.output.callId}', ms: 400 } },
          ],
          waitMs: 20_000,
        }),
      }).then(async (r) => ({ status: r.status, body: await r.json() }));
    const first = fetch(`${c.replicas[0]!.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'k-elsewhere' },
      body: JSON.stringify({
        calls: [
          { id: 'a', tool: 'lim_a', args: { ms: 400 } },
          { id: 'b', tool: 'free_b', args: { after: '${a.output.callId}', ms: 400 } },
        ],
      }),
    }).then(async (r) => ({ status: r.status, body: await r.json() }));
    const created = await first;
    expect(created.status).toBe(201);
    expect(created.body.status).toBe('running');
    // Replica 2 does not run it: it follows the run's events from the store until it ends.
    const again = await post(2);
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(created.body.id);
    expect(again.body.status).toBe('succeeded');
    expect(again.body.calls.map((x: { status: string }) => x.status)).toEqual(['succeeded', 'succeeded']);
  }, 60_000);

  it('a run is served by every replica, and its events read through another replica are gapless', async () => {
    const run = (
      await c.request(0, 'POST', '/v1/runs', {
        calls: [
          { id: 'a', tool: 'lim_a', args: { ms: 200 } },
          { id: 'b', tool: 'free_b', args: { after: '${a.output.callId}', ms: 200 } },
        ],
      })
    ).body;
    const streamed = readEvents(c.replicas[2]!.url, run.id);
    const ended = await c.ended(1, run.id);
    expect(ended.status).toBe('succeeded');
    const events = await streamed;
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.at(-1)?.type).toBe('run.completed');
    for (const i of [0, 1, 2]) {
      const got = await c.request(i, 'GET', `/v1/runs/${run.id}`);
      expect(got.body.status).toBe('succeeded');
      expect((await c.request(i, 'GET', `/v1/runs?limit=200`)).body.items.map((r: { id: string }) => r.id)).toContain(run.id);
    }
  }, 60_000);

  it('/v1/stream on one replica shows the runs of the others', async () => {
    const res = await fetch(`${c.replicas[0]!.url}/v1/stream`);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const run = (await c.request(1, 'POST', '/v1/runs', { calls: [{ id: 's', tool: 'free_b', args: { ms: 50 } }] })).body;
    let text = '';
    const decoder = new TextDecoder();
    try {
      await until(
        "the other replica's run on the stream",
        async () => {
          const { value } = await reader.read();
          text += decoder.decode(value, { stream: true });
          return text.includes(`"id":"${run.id}"`) && text.includes('"status":"succeeded"') ? true : undefined;
        },
        15_000,
      );
    } finally {
      await reader.cancel();
    }
  }, 60_000);

  it('a lost LISTEN connection is opened again, and events read through another replica still arrive, gapless', async () => {
    const admin = new pg.Client({ connectionString: c.db });
    await admin.connect();
    try {
      const killed = await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`,
      );
      expect(killed.rowCount).toBeGreaterThanOrEqual(3);
    } finally {
      await admin.end();
    }
    const run = (
      await c.request(0, 'POST', '/v1/runs', {
        calls: [
          { id: 'a', tool: 'lim_a', args: { ms: 100 } },
          { id: 'b', tool: 'free_b', args: { after: '${a.output.callId}', ms: 100 } },
        ],
      })
    ).body;
    const events = await readEvents(c.replicas[1]!.url, run.id);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.at(-1)?.type).toBe('run.completed');
    await until(
      'every replica to listen again',
      async () => {
        const all = await Promise.all([0, 1, 2].map((i) => c.request(i, 'GET', '/healthz')));
        return all.every((h) => h.body.cluster?.listening === true) ? true : undefined;
      },
      10_000,
    );
  }, 60_000);

  it('a cancel sent to a replica that does not own the run aborts the running call', async () => {
    const run = (await c.request(0, 'POST', '/v1/runs', { calls: [{ id: 'h', tool: 'hold_idem', args: { hold: true, t: 'cancel' } }] }))
      .body;
    const attempt = await until('the held call to run', () => c.tools.of(run.id, 'h')[0]);
    const sent = performance.now();
    const cancelled = await c.request(2, 'POST', `/v1/runs/${run.id}/cancel`);
    expect([200, 202]).toContain(cancelled.status);
    await until('the attempt to be aborted', () => (attempt.aborted ? true : undefined), 5000);
    expect((attempt.end as number) - sent).toBeLessThan(2000);
    expect((await c.ended(1, run.id)).status).toBe('cancelled');
    // A command for a run that has ended answers as one replica would: the run as it is.
    const again = await c.request(1, 'POST', `/v1/runs/${run.id}/cancel`);
    expect(again.status).toBe(cancelled.status);
    expect(again.body.status).toBe('cancelled');
  }, 60_000);

  it('kill -9 of a replica: its runs are taken over within the lease + 2 s; idempotent calls re-run with the same key, others end outcome_unknown', async () => {
    const runs = await Promise.all(
      [0, 1, 2].map(
        async (k) =>
          (
            await c.request(1, 'POST', '/v1/runs', {
              calls: [
                { id: 'i', tool: 'hold_idem', args: { hold: true, k } },
                { id: 'o', tool: 'hold_once', args: { hold: true, k } },
              ],
            })
          ).body,
      ),
    );
    for (const r of runs) for (const id of ['i', 'o']) await until(`${r.id}/${id} to run`, () => c.tools.of(r.id, id)[0]);
    const killedAt = performance.now();
    await c.replicas[1]!.kill9();
    c.replicas[1] = undefined;
    try {
      const reruns = await Promise.all(runs.map((r) => until(`${r.id}/i to run again`, () => c.tools.of(r.id, 'i')[1], 20_000)));
      const takeoverMs = Math.max(...reruns.map((a) => a.start - killedAt));
      expect(takeoverMs).toBeLessThan(LEASE_MS + 2000);
      c.tools.release();
      for (const r of runs) {
        const ended = await c.ended(0, r.id);
        expect(ended.status).toBe('partial');
        const [first, again] = c.tools.of(r.id, 'i');
        expect(again!.key).toBe(first!.key);
        expect(ended.calls.find((x: { id: string }) => x.id === 'i').status).toBe('succeeded');
        expect(ended.calls.find((x: { id: string }) => x.id === 'o').error.code).toBe('outcome_unknown');
        expect(c.tools.of(r.id, 'o')).toHaveLength(1);
      }
    } finally {
      await c.start(1);
    }
  }, 90_000);

  it('SIGSTOP past the lease, then SIGCONT: the paused replica appends nothing more to the runs it lost', async () => {
    const run = (await c.request(2, 'POST', '/v1/runs', { calls: [{ id: 'p', tool: 'hold_idem', args: { hold: true, t: 'pause' } }] }))
      .body;
    const first = await until('the held call to run', () => c.tools.of(run.id, 'p')[0]);
    const paused = c.replicas[2]!;
    paused.proc.kill('SIGSTOP');
    try {
      const again = await until('another replica to take the run over', () => c.tools.of(run.id, 'p')[1], 20_000);
      expect(again.key).toBe(first.key);
      // The paused replica's attempt gets its answer while it sleeps: it would append its end on waking.
      c.tools.release((a) => a === first);
    } finally {
      paused.proc.kill('SIGCONT');
    }
    await until(
      'the paused replica to hear that it lost its lease',
      () => (paused.output().includes('lost the lease') ? true : undefined),
      10_000,
    );
    c.tools.release((a) => a.runId === run.id);
    const ended = await c.ended(0, run.id);
    expect(ended.status).toBe('succeeded');
    const events = await storedEvents(c, run.id);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    // Only attempt 2 (the new owner's) ended; nothing of attempt 1 after the takeover.
    const ends = events.filter((e) => e.call_id === 'p' && (e.type === 'call.succeeded' || e.type === 'call.failed'));
    expect(ends.map((e) => JSON.parse(e.data).attempt)).toEqual([2]);
    // And the paused replica serves again, under a new lease.
    await until(
      'r2 to serve again',
      async () => ((await c.request(2, 'GET', '/healthz')).body.cluster?.lease === 'held' ? true : undefined),
      10_000,
    );
  }, 90_000);

  it('a database restart: the cluster recovers by itself, with nothing lost', async () => {
    const runs = await Promise.all(
      [0, 1, 2].map(
        async (i) =>
          (
            await c.request(i, 'POST', '/v1/runs', {
              calls: [
                { id: 'x', tool: 'lim_a', args: { ms: 1500 } },
                { id: 'y', tool: 'free_b', args: { after: '${x.output.callId}', ms: 100 } },
              ],
            })
          ).body,
      ),
    );
    for (const r of runs) expect(r.status).toBe('running');
    await until('the first calls to run', () => (runs.every((r) => c.tools.of(r.id, 'x').length > 0 || true) ? true : undefined));
    c.pg.pause();
    await new Promise((r) => setTimeout(r, 1000));
    c.pg.resume();
    for (const r of runs) expect((await c.ended(r.id.length % 3, r.id, 60_000)).status).toBe('succeeded');
    const after = (await c.request(0, 'POST', '/v1/runs', { calls: [{ id: 'z', tool: 'free_b', args: { ms: 10 } }] })).body;
    expect((await c.ended(1, after.id)).status).toBe('succeeded');
  }, 120_000);
});

async function storedEvents(
  c: TestCluster,
  runId: string,
): Promise<{ seq: number; type: string; call_id: string | null; at: string; data: string }[]> {
  const client = new pg.Client({ connectionString: c.db });
  await client.connect();
  try {
    return (await client.query('SELECT seq, type, call_id, at, data FROM events WHERE run_id = $1 ORDER BY seq', [runId])).rows;
  } finally {
    await client.end();
  }
}
