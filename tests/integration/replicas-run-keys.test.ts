/**
 * One run per key across replicas (DESIGN §4, §12): two `toolgraph serve` processes on one throwaway
 * PostgreSQL, the earlier run of a key on one replica and the new submission on the other. `reject`
 * answers 409 naming the other replica's run; `cancel_running` cancels it through the cross-replica
 * command path (its running attempt aborted, its call `superseded` naming the new run) and starts the
 * new run at once; `queue` keeps the new run `queued`, nothing of it sent, until the earlier run has
 * ended, then runs it. What ran when is read from the tool server's log of attempts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
    await new Promise((r) => setTimeout(r, 600)); // a few of the held-run looks (every 250 ms)
    expect(c.tools.of(second)).toHaveLength(0);
    c.tools.release((a) => a.runId === first);
    const ended = await c.ended(1, second);
    expect(ended.status).toBe('succeeded');
    const [a0] = c.tools.of(first, 'a');
    const [a1] = c.tools.of(second, 'a');
    expect(a1!.start).toBeGreaterThanOrEqual(a0!.end as number);
  }, 60_000);
});
