/**
 * Priority across replicas (DESIGN §4, §12): two `toolgraph serve` processes on one throwaway
 * PostgreSQL, a tool of concurrency 1 (`limits.tool`) served by this test, which logs when each attempt
 * really ran and which replica sent it. A counter's waiters of every replica go by their level (the
 * run's priority, one more urgent per `limits.priorityAgingMs` waited) and then by when their run
 * became ready (cluster/permit-priority.ts):
 * - urgent (priority 1) runs submitted on replica 1 after priority-5 runs wait on replica 0 all start
 *   first (the first is marked in the cluster; the others wait behind it on replica 1 and are handed
 *   its place when it ends), and the first one's waiting call named none ahead of it; the priority-5
 *   runs follow, one at a time;
 * - aging: a priority-5 run that has waited 4 aging periods (level 1) on replica 0 goes before a
 *   priority-1 run that came after it on replica 1, though replica 1 asks first (the place it frees is
 *   handed to its own waiting call before replica 0 hears of it). Which waiter a refusal names
 *   (`queuedBehind`) is checked in tests/unit/permit-plan.test.ts.
 * Never exceeded (one at a time) and reached (every run ran) in both. And `queueTimeoutMs` holds when
 * the place is held on another replica: the waiting call fails `queue_timeout`, never sent — also after
 * a kill -9 of its run's owner (the replica that takes the run over times it out).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxOverlap, startCluster, type TestCluster } from '../helpers/replicas.js';
import { until } from '../helpers/wait.js';

const AGING_MS = 2000;

function yaml(toolUrl: string): string {
  return `
tools:
  - name: one
    reads: []
    writes: []
    executor: { kind: http, url: "${toolUrl}/one" }
  - name: quick
    reads: []
    writes: []
    queueTimeoutMs: 500
    executor: { kind: http, url: "${toolUrl}/quick" }
  - name: patient
    reads: []
    writes: []
    queueTimeoutMs: 6000
    executor: { kind: http, url: "${toolUrl}/patient" }
limits:
  tool: { one: 1, quick: 1, patient: 1 }
  priorityAgingMs: ${AGING_MS}
defaults:
  failure: partial
`;
}

describe('priority across replicas', () => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startCluster(2, yaml, { leaseMs: 3000, perReplicaUrls: true });
  }, 90_000);
  afterAll(async () => {
    await c?.close();
  });

  /** A run of one call of `one` on replica `i`. */
  async function submit(i: number, priority: number, args: Record<string, unknown>): Promise<string> {
    const res = await c.request(i, 'POST', '/v1/runs', { calls: [{ id: 'a', tool: 'one', args }], priority });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.id as string;
  }

  /** The run's call's wait, once the cluster has refused it (its owner, replica `i`, says so). */
  function waiting(i: number, runId: string): Promise<any> {
    return until(`${runId} to wait for the tool`, async () => {
      const v = (await c.request(i, 'GET', `/v1/runs/${runId}`)).body;
      return v.calls[0]?.waitingFor?.[0]?.kind === 'tool' ? v.calls[0].waitingFor[0] : undefined;
    });
  }

  /** A run on replica 0 that holds the tool's one place until released. */
  async function blocker(t: string): Promise<string> {
    const id = await submit(0, 3, { hold: true, t });
    await until(`${id} to run`, () => c.tools.of(id)[0]);
    return id;
  }

  it('urgent runs submitted on replica 1 after priority-5 runs wait on replica 0 all start before them', async () => {
    const block = await blocker('urgent');
    const background: string[] = [];
    for (let k = 0; k < 3; k++) background.push(await submit(0, 5, { ms: 100, t: `bg-${k}` }));
    await waiting(0, background[0] as string);
    const urgent: string[] = [];
    for (let k = 0; k < 3; k++) urgent.push(await submit(1, 1, { ms: 100, t: `urgent-${k}` }));
    const why = await waiting(1, urgent[0] as string);
    expect(why.queuedBehind ?? []).toEqual([]); // nothing is ahead of the most urgent
    c.tools.release((a) => a.runId === block);
    for (const id of [...urgent, ...background]) expect((await c.ended(0, id)).status).toBe('succeeded');
    const us = urgent.flatMap((id) => c.tools.of(id));
    const bg = background.flatMap((id) => c.tools.of(id));
    expect(us.map((u) => u.replica)).toEqual(['r1', 'r1', 'r1']);
    expect(bg).toHaveLength(3);
    const lastUrgentEnd = Math.max(...us.map((u) => u.end as number));
    for (const b of bg) expect(b.start).toBeGreaterThanOrEqual(lastUrgentEnd);
    // Never exceeded (one at a time), and reached (each one ran).
    expect(maxOverlap([...c.tools.of(block), ...us, ...bg])).toBe(1);
  }, 90_000);

  it('aging: a priority-5 run that has waited 4 aging periods goes before a priority-1 run that came after it', async () => {
    // The place is held on replica 1 this time: the old run on replica 0 waits for the cluster.
    const block = await submit(1, 3, { hold: true, t: 'aging' });
    await until(`${block} to run`, () => c.tools.of(block)[0]);
    const old = await submit(0, 5, { ms: 300, t: 'old' });
    await waiting(0, old);
    // Its level drops by one per AGING_MS waited: after 4 of them it is at level 1, and ready earlier.
    const since = Date.now();
    await until('the priority-5 run to reach level 1', () => (Date.now() - since > 4 * AGING_MS + 200 ? true : undefined), 30_000, 100);
    // Replica 1 asks for the new urgent run's call the moment its own blocker ends, before replica 0 hears of it.
    const fresh = await submit(1, 1, { ms: 50, t: 'fresh' });
    c.tools.release((a) => a.runId === block);
    for (const id of [old, fresh]) expect((await c.ended(0, id)).status).toBe('succeeded');
    const [o] = c.tools.of(old);
    const [f] = c.tools.of(fresh);
    expect(o?.replica).toBe('r0');
    expect(f!.start).toBeGreaterThanOrEqual(o!.end as number);
    expect(maxOverlap([...c.tools.of(block), o!, f!])).toBe(1);
  }, 90_000);

  it('queue_timeout across replicas: a call held back by a place another replica holds fails queue_timeout, never sent', async () => {
    const held = await c.request(0, 'POST', '/v1/runs', { calls: [{ id: 'a', tool: 'quick', args: { hold: true, t: 'qt-hold' } }] });
    await until('the place to be taken', () => c.tools.of(held.body.id)[0]);
    const late = await c.request(1, 'POST', '/v1/runs', { calls: [{ id: 'a', tool: 'quick', args: { t: 'qt-late' } }] });
    const ended = await c.ended(1, late.body.id);
    expect(ended.calls[0]).toMatchObject({ status: 'failed', error: { code: 'queue_timeout' } });
    expect(c.tools.of(late.body.id)).toHaveLength(0);
    c.tools.release((a) => a.runId === held.body.id);
    expect((await c.ended(0, held.body.id)).status).toBe('succeeded');
  }, 60_000);

  it('queue_timeout after kill -9 of the owner: the run taken over still times its waiting call out, never sent', async () => {
    const held = await c.request(1, 'POST', '/v1/runs', { calls: [{ id: 'a', tool: 'patient', args: { hold: true, t: 'kill-hold' } }] });
    await until('the place to be taken', () => c.tools.of(held.body.id)[0]);
    const run = await c.request(0, 'POST', '/v1/runs', { calls: [{ id: 'a', tool: 'patient', args: { t: 'kill-late' } }] });
    await until('its call to wait', async () => {
      const v = (await c.request(0, 'GET', `/v1/runs/${run.body.id}`)).body;
      return v.calls[0]?.waitingFor?.length ? true : undefined;
    });
    await c.replicas[0]?.kill9();
    const ended = await c.ended(1, run.body.id, 40_000);
    expect(ended.calls[0]).toMatchObject({ status: 'failed', error: { code: 'queue_timeout' } });
    expect(c.tools.of(run.body.id)).toHaveLength(0);
    c.tools.release((a) => a.runId === held.body.id);
    expect((await c.ended(1, held.body.id)).status).toBe('succeeded');
  }, 90_000);
});
