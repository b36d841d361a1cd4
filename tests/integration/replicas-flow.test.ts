/**
 * Flow control across replicas (DESIGN §4, §12): three `toolgraph serve` processes on one throwaway
 * PostgreSQL, their http tools served by this test, which logs when each attempt really ran.
 * - a tool's keyed concurrency (`concurrency: { limit: 1, per: "{repo}" }`) and `limits.each`
 *   (`repo:*: 2`) hold cluster-wide: never exceeded for any key, and reached (two repos at once);
 *   `GET /v1/limits` lists the busy keys of every replica, and a waiting call says which key holds it;
 * - backpressure: after a 429 with `Retry-After: 1` no call of the tool starts on any replica for 1 s,
 *   the waiting calls keep their attempt count, and the call that got it runs again (idempotent).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxOverlap, startCluster, type Attempt, type TestCluster } from '../helpers/replicas.js';
import { until } from '../helpers/wait.js';

function yaml(toolUrl: string): string {
  return `
tools:
  - name: push
    reads: []
    writes: []
    idempotent: true
    concurrency: { limit: 1, per: "{repo}" }
    executor: { kind: http, url: "${toolUrl}/push" }
  - name: edit
    reads: []
    writes: ["repo:{repo}/{path}"]
    scope: run
    idempotent: true
    executor: { kind: http, url: "${toolUrl}/edit" }
  - name: api
    reads: []
    writes: []
    idempotent: true
    retry: { attempts: 3, backoffMs: 10, maxBackoffMs: 10 }
    executor: { kind: http, url: "${toolUrl}/api" }
limits:
  each: { "repo:*": 2 }
  tool: { api: 10 }
defaults:
  failure: partial
`;
}

describe('flow control across replicas', () => {
  let c: TestCluster;

  beforeAll(async () => {
    c = await startCluster(3, yaml, 3000);
  }, 90_000);

  afterAll(async () => {
    await c?.close();
  });

  const repoOf = (a: Attempt) => String(a.args.repo);

  it("a tool's keyed concurrency holds cluster-wide: never two calls of one repo, two repos at once", async () => {
    const runs = await Promise.all(
      [0, 1, 2].map(async (i) => {
        const r = await c.request(i, 'POST', '/v1/runs', {
          calls: ['web', 'api', 'web', 'api'].map((repo, k) => ({ id: `p${k}`, tool: 'push', args: { repo, ms: 400, i } })),
        });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
        return r.body.id as string;
      }),
    );
    for (const [i, id] of runs.entries()) expect((await c.ended(i, id, 60_000)).status).toBe('succeeded');
    const mine = c.tools.attempts.filter((a) => runs.includes(a.runId) && a.tool === 'push');
    expect(mine).toHaveLength(12);
    // Never exceeded, for either key.
    expect(maxOverlap(mine.filter((a) => repoOf(a) === 'web'))).toBe(1);
    expect(maxOverlap(mine.filter((a) => repoOf(a) === 'api'))).toBe(1);
    // Reached: the two keys run at once.
    expect(maxOverlap(mine)).toBe(2);
  }, 90_000);

  it('limits.each holds cluster-wide (2 per repo), is reached, and GET /v1/limits lists the busy keys', async () => {
    const runs = await Promise.all(
      [0, 1, 2].map(async (i) => {
        const calls = ['a', 'a', 'b', 'b'].map((repo, k) => ({
          id: `e${k}`,
          tool: 'edit',
          args: { repo, path: `f${i}${k}.ts`, hold: true },
        }));
        const r = await c.request(i, 'POST', '/v1/runs', { calls });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
        return r.body.id as string;
      }),
    );
    const held = () => c.tools.attempts.filter((a) => runs.includes(a.runId) && a.end === undefined);
    // Reached: 2 of repo a and 2 of repo b are held by the tool, whichever replicas sent them.
    await until('two calls of each repo to run', () => (held().length === 4 ? true : undefined), 30_000);
    expect(held().filter((a) => repoOf(a) === 'a')).toHaveLength(2);
    const limits = await c.request(1, 'GET', '/v1/limits');
    expect(limits.status).toBe(200);
    expect(limits.body.keys).toEqual(
      expect.arrayContaining([
        { pattern: 'repo:*', key: 'repo:a', limit: 2, inUse: 2 },
        { pattern: 'repo:*', key: 'repo:b', limit: 2, inUse: 2 },
      ]),
    );
    // A call that waits says which key holds it (as the cluster saw it when it refused the permit).
    const waiting = await until(
      'a waiting call to say which key it waits for',
      async () => {
        for (const [i, id] of runs.entries()) {
          const v = (await c.request(i, 'GET', `/v1/runs/${id}`)).body;
          for (const call of v.calls) if (call.waitingFor?.[0]?.kind === 'key') return call.waitingFor[0];
        }
        return undefined;
      },
      30_000,
    );
    expect(waiting).toMatchObject({ kind: 'key', pattern: 'repo:*', limit: 2, inUse: 2 });
    expect(['repo:a', 'repo:b']).toContain(waiting.key);
    // Let everything through, a couple at a time: never more than 2 of a repo at once.
    while (c.tools.attempts.filter((a) => runs.includes(a.runId)).some((a) => a.end === undefined) || !(await allEnded(runs))) {
      c.tools.release((a) => runs.includes(a.runId));
      await new Promise((r) => setTimeout(r, 100));
    }
    const mine = c.tools.attempts.filter((a) => runs.includes(a.runId));
    expect(mine).toHaveLength(12);
    expect(maxOverlap(mine.filter((a) => repoOf(a) === 'a'))).toBe(2);
    expect(maxOverlap(mine.filter((a) => repoOf(a) === 'b'))).toBe(2);
    for (const [i, id] of runs.entries()) expect((await c.ended(i, id)).status).toBe('succeeded');
  }, 120_000);

  it('after a 429 with Retry-After: 3, no call of the tool starts on any replica for 3 s; waiting calls keep their attempt count', async () => {
    const first = await c.request(0, 'POST', '/v1/runs', {
      calls: [{ id: 'x1', tool: 'api', args: { status: 429, retryAfter: '3', ms: 20 } }],
    });
    expect(first.status).toBe(201);
    const a = await until('the 429 to be answered', () => c.tools.of(first.body.id, 'x1').find((x) => x.end !== undefined), 30_000);
    const pausedAt = a.end as number;
    // GET /v1/limits on any replica lists the paused tool once replica 0 has stored it (the pause is
    // cluster-wide from then on: a call another replica let start in the few ms before is not this test).
    const paused = await until(
      'replica 2 to list the pause',
      async () => {
        const l = (await c.request(2, 'GET', '/v1/limits')).body;
        return l.paused?.length > 0 ? l.paused : undefined;
      },
      2500,
    );
    expect(paused).toEqual([{ tool: 'api', until: expect.any(String), status: 429 }]);
    // Calls submitted on the other replicas meanwhile wait: none reaches the tool before the pause ends.
    const others = await Promise.all(
      [1, 2].map(async (i) => {
        const r = await c.request(i, 'POST', '/v1/runs', { calls: [0, 1].map((k) => ({ id: `y${k}`, tool: 'api', args: { ms: 20 } })) });
        expect(r.status).toBe(201);
        return r.body.id as string;
      }),
    );
    const waiting = await until('a call on replica 1 to say it waits for the pause', async () => {
      const v = (await c.request(1, 'GET', `/v1/runs/${others[0]}`)).body;
      return v.calls.find((x: { waitingFor?: { kind: string }[] }) => x.waitingFor?.[0]?.kind === 'backoff')?.waitingFor[0];
    });
    expect(waiting).toMatchObject({ kind: 'backoff', tool: 'api', status: 429 });
    for (const [k, id] of others.entries()) expect((await c.ended(k + 1, id, 30_000)).status).toBe('succeeded');
    expect((await c.ended(0, first.body.id, 30_000)).status).toBe('succeeded');
    const later = c.tools.attempts.filter((x) => x.tool === 'api' && x !== a && (others.includes(x.runId) || x.runId === first.body.id));
    expect(later).toHaveLength(5);
    // No call of the tool started within the 3 s (the 429 was answered at `pausedAt`). Three seconds, not
    // one, so that the checks above (two submissions, two listings) fit inside the pause on a loaded machine.
    for (const x of later) expect(x.start - pausedAt, `${x.runId}/${x.callId}`).toBeGreaterThanOrEqual(2995);
    // The waiting calls kept their attempt count (each ran once, as attempt 1); the one that got the 429 ran again.
    expect(later.filter((x) => x.runId !== first.body.id).map((x) => x.attempt)).toEqual([1, 1, 1, 1]);
    expect(c.tools.of(first.body.id, 'x1').map((x) => x.attempt)).toEqual([1, 2]);
  }, 90_000);

  async function allEnded(ids: string[]): Promise<boolean> {
    for (const id of ids) {
      const v = (await c.request(0, 'GET', `/v1/runs/${id}`)).body;
      if (!['succeeded', 'partial', 'failed', 'cancelled'].includes(v.status)) return false;
    }
    return true;
  }
});
