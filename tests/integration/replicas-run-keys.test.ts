/**
 * One run per key across replicas (DESIGN §4, §12): two `toolgraph serve` processes on one throwaway
 * PostgreSQL, the earlier run of a key on one replica and the new submission on the other. `reject`
 * answers 409 naming the other replica's run; `cancel_running` cancels it through the cross-replica
 * command path (its running attempt aborted, its call `superseded` naming the new run) and starts the
 * new run at once; `queue` keeps the new run `queued`, nothing of it sent, until the earlier run has
 * ended, then runs it. What ran when is read from the tool server's log of attempts.
 *
 * Then many submissions of one key at the same instant, split across the two replicas: each claims the
 * key in the database under a lock of the key (cluster/run-keys.ts), so `reject` accepts exactly one,
 * `queue` runs them one at a time (never two at once, and every one runs), and `cancel_running` leaves
 * exactly one running, every other cancelled `superseded`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Recording } from '../../src/contract/recording.js';
import { checkRecording } from '../../src/replay/check.js';
import { startCluster, type TestCluster } from '../helpers/replicas.js';
import { until } from '../helpers/wait.js';

const LEASE_MS = 2000;

function yaml(toolUrl: string): string {
  return `
tools:
  - name: hold_once
    reads: []
    writes: []
    executor: { kind: http, url: "${toolUrl}/hold_once" }
defaults:
  failure: partial
`;
}

describe('one run per key on two replicas', () => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startCluster(2, yaml, LEASE_MS);
  }, 90_000);
  afterAll(async () => {
    await c?.close();
  });

  /** A run on replica `i` whose one call is held by the tool server, once its attempt is under way. */
  async function heldOn(i: number, key: string, t: string): Promise<string> {
    const res = await c.request(i, 'POST', '/v1/runs', {
      calls: [{ id: 'a', tool: 'hold_once', args: { hold: true, t } }],
      concurrencyKey: key,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    await until(`${res.body.id} to run`, () => c.tools.of(res.body.id, 'a')[0]);
    return res.body.id;
  }

  it('reject: 409 concurrent_run naming the run that the other replica runs', async () => {
    const first = await heldOn(0, 'conv-reject', 'reject');
    const refused = await c.request(1, 'POST', '/v1/runs', {
      calls: [{ id: 'a', tool: 'hold_once', args: { t: 'reject-2' } }],
      concurrencyKey: 'conv-reject',
      onConcurrent: 'reject',
    });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'concurrent_run', details: { runId: first } });
    c.tools.release((a) => a.runId === first);
    expect((await c.ended(1, first)).status).toBe('succeeded');
  }, 60_000);

  it('cancel_running: the other replica aborts its run (superseded naming the new run); the new run starts at once', async () => {
    const first = await heldOn(0, 'conv-cancel', 'cancel');
    const attempt = c.tools.of(first, 'a')[0]!;
    const res = await c.request(1, 'POST', '/v1/runs', {
      calls: [{ id: 'a', tool: 'hold_once', args: { t: 'cancel-2' } }],
      concurrencyKey: 'conv-cancel',
      onConcurrent: 'cancel_running',
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const second = res.body.id as string;
    await until('the earlier attempt to be aborted', () => (attempt.aborted ? true : undefined), 10_000);
    const old = await c.ended(1, first);
    expect(old.status).toBe('cancelled');
    expect(old.calls[0]).toMatchObject({ status: 'cancelled', error: { code: 'superseded', details: { runId: second } } });
    expect((await c.ended(0, second)).status).toBe('succeeded');
    // Its recording says who superseded it, and replays with 0 divergences (DESIGN §8).
    const rec = (await c.request(1, 'GET', `/v1/runs/${first}/recording`)).body as Recording;
    expect(rec.supersededBy).toBe(second);
    expect(checkRecording(rec, first).divergences).toEqual([]);
  }, 60_000);

  it('queue: the new run stays queued, nothing of it sent, until the other replica’s run has ended; then it runs', async () => {
    const first = await heldOn(0, 'conv-queue', 'queue');
    const res = await c.request(1, 'POST', '/v1/runs', {
      calls: [{ id: 'a', tool: 'hold_once', args: { t: 'queue-2' } }],
      concurrencyKey: 'conv-queue',
    });
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('queued');
    const second = res.body.id as string;
    // Seen queued through either replica; nothing of it reaches the tool while the first runs.
    expect((await c.request(0, 'GET', `/v1/runs/${second}`)).body.status).toBe('queued');
    // A look of replica 1 at its held runs while the first still runs: a probe run of another key,
    // queued there behind a run of replica 0, starts once replica 1 has looked after that run ended
    // (the same look sees the second run and leaves it held).
    const probeFirst = await heldOn(0, 'conv-queue-probe', 'probe');
    const probe = await c.request(1, 'POST', '/v1/runs', {
      calls: [{ id: 'a', tool: 'hold_once', args: { t: 'probe-2', ms: 1 } }],
      concurrencyKey: 'conv-queue-probe',
    });
    expect(probe.body.status).toBe('queued');
    c.tools.release((a) => a.runId === probeFirst);
    await until('replica 1 to start the probe run', () => c.tools.of(probe.body.id)[0]);
    expect(c.tools.of(second)).toHaveLength(0);
    c.tools.release((a) => a.runId === first);
    const ended = await c.ended(1, second);
    expect(ended.status).toBe('succeeded');
    const [a0] = c.tools.of(first, 'a');
    const [a1] = c.tools.of(second, 'a');
    expect(a1!.start).toBeGreaterThanOrEqual(a0!.end as number);
  }, 60_000);

  /** `n` submissions of `key` fired together, alternately to replica 0 and 1. */
  function burst(n: number, key: string, onConcurrent: string, args: (i: number) => Record<string, unknown>) {
    return Promise.all(
      Array.from({ length: n }, (_, i) =>
        c.request(i % 2, 'POST', '/v1/runs', {
          calls: [{ id: 'a', tool: 'hold_once', args: args(i) }],
          concurrencyKey: key,
          onConcurrent,
        }),
      ),
    );
  }

  it('reject at the same instant on both replicas: exactly one accepted, the others 409 naming it', async () => {
    const answers = await burst(12, 'race-reject', 'reject', (i) => ({ hold: true, t: `race-reject-${i}` }));
    const accepted = answers.filter((a) => a.status === 201);
    expect(accepted, JSON.stringify(answers.map((a) => a.status))).toHaveLength(1);
    const winner = accepted[0]!.body.id as string;
    for (const a of answers.filter((x) => x.status !== 201)) {
      expect(a.status).toBe(409);
      expect(a.body.error).toMatchObject({ code: 'concurrent_run', details: { runId: winner, concurrencyKey: 'race-reject' } });
    }
    await until('the accepted run to run', () => c.tools.of(winner)[0]);
    c.tools.release((a) => a.runId === winner);
    expect((await c.ended(0, winner)).status).toBe('succeeded');
  }, 60_000);

  it('queue at the same instant on both replicas: one runs, the rest queued; never two at once, and each runs after the one before ended', async () => {
    const n = 8;
    const answers = await burst(n, 'race-queue', 'queue', (i) => ({ ms: 60, t: `race-queue-${i}` }));
    expect(answers.map((a) => a.status)).toEqual(Array(n).fill(201));
    // Exactly one found the key free; every other was held behind it.
    expect(answers.filter((a) => a.body.status === 'queued')).toHaveLength(n - 1);
    const ids = answers.map((a) => a.body.id as string);
    for (const id of ids) expect((await c.ended(0, id)).status).toBe('succeeded');
    const attempts = ids.flatMap((id) => c.tools.of(id));
    expect(attempts).toHaveLength(n);
    // Never exceeded (one at a time) and reached (the next starts only after the earlier ends).
    const byStart = [...attempts].sort((x, y) => x.start - y.start);
    for (let i = 1; i < byStart.length; i++) expect(byStart[i]!.start).toBeGreaterThanOrEqual(byStart[i - 1]!.end as number);
  }, 90_000);

  it('cancel_running at the same instant on both replicas: exactly one is left running, every other cancelled superseded', async () => {
    const n = 6;
    const answers = await burst(n, 'race-cancel', 'cancel_running', (i) => ({ hold: true, t: `race-cancel-${i}` }));
    expect(answers.map((a) => a.status)).toEqual(Array(n).fill(201));
    const ids = answers.map((a) => a.body.id as string);
    const views = await until('all but one run to be cancelled', async () => {
      const vs = await Promise.all(ids.map(async (id) => (await c.request(0, 'GET', `/v1/runs/${id}`)).body));
      return vs.filter((v) => v.status === 'cancelled').length === n - 1 ? vs : undefined;
    });
    const survivor = views.find((v) => v.status !== 'cancelled')!.id as string;
    for (const v of views.filter((x) => x.id !== survivor)) {
      expect(v.calls[0].error).toMatchObject({ code: 'superseded' });
      expect(ids).toContain(v.calls[0].error.details.runId);
    }
    await until('the survivor to run', () => c.tools.of(survivor)[0]);
    c.tools.release((a) => a.runId === survivor);
    expect((await c.ended(1, survivor)).status).toBe('succeeded');
  }, 90_000);
});
