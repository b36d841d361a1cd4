/**
 * Client-run tools across real replica processes (DESIGN §17, §12): two `toolgraph serve` processes on
 * one throwaway PostgreSQL database. A result posted to the replica that does not own the run reaches
 * the owner; after a `kill -9` of the owner the other replica takes the run over within the lease + 2 s
 * and dispatches the idempotent client call again as attempt 2 with a new token, the old token being a
 * 409 there; a non-idempotent one ends `interrupted`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type TestCluster } from '../helpers/replicas.js';
import { until } from '../helpers/wait.js';

const LEASE_MS = 2000;

const yaml = () => `
tools:
  - { name: read_file, reads: ["file:{path}"], writes: [], risk: read, idempotent: true, executor: { kind: client } }
  - { name: write_file, reads: [], writes: ["file:{path}"], executor: { kind: client } }
defaults: { timeoutMs: 60000 }
`;

interface Work {
  callId: string;
  attempt: number;
  token: string;
  args: Record<string, unknown>;
}

describe('client tools across replica processes', () => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startCluster(2, yaml, { leaseMs: LEASE_MS });
  }, 90_000);
  afterAll(async () => {
    await c?.close();
  });

  const waiting = (i: number, runId: string, callId: string, attempt = 1) =>
    until(
      `${callId} (attempt ${attempt}) to wait for its agent on replica ${i}`,
      async () => {
        const r = await c.request(i, 'GET', `/v1/runs/${runId}/work?waitMs=2000`);
        return (r.body?.items as Work[] | undefined)?.find((w) => w.callId === callId && w.attempt >= attempt);
      },
      20_000,
    );

  it('a result posted to the replica that does not own the run reaches the owner', async () => {
    const run = (
      await c.request(0, 'POST', '/v1/runs', {
        calls: [
          { id: 'w', tool: 'write_file', args: { path: '/x' } },
          { id: 'r', tool: 'read_file', args: { path: '/x' } },
        ],
      })
    ).body;
    expect((await c.request(1, 'GET', `/v1/runs/${run.id}`)).body.owner).toBe('r0');
    const w = await waiting(1, run.id, 'w');
    const taken = await c.request(1, 'POST', `/v1/runs/${run.id}/calls/w/result`, { token: w.token, output: 'written' });
    expect(taken).toEqual({ status: 202, body: { runId: run.id, callId: 'w', attempt: 1 } });
    const r = await waiting(1, run.id, 'r');
    expect((await c.request(1, 'POST', `/v1/runs/${run.id}/calls/w/result`, { token: w.token, output: 'again' })).status).toBe(409);
    expect((await c.request(1, 'POST', `/v1/runs/${run.id}/calls/r/result`, { token: r.token, output: 'read' })).status).toBe(202);
    const ended = await c.ended(1, run.id);
    expect(ended.calls.map((x: any) => [x.id, x.status, x.output])).toEqual([
      ['w', 'succeeded', 'written'],
      ['r', 'succeeded', 'read'],
    ]);
  }, 60_000);

  it('kill -9 of the owner: the other replica re-dispatches the idempotent call with a new token; the old one is 409', async () => {
    const run = (
      await c.request(0, 'POST', '/v1/runs', {
        calls: [
          { id: 'r', tool: 'read_file', args: { path: '/y' } },
          { id: 'w', tool: 'write_file', args: { path: '/z' } },
        ],
      })
    ).body;
    const first = await waiting(1, run.id, 'r');
    await waiting(1, run.id, 'w');
    const killedAt = performance.now();
    await c.replicas[0]!.kill9();
    c.replicas[0] = undefined;
    try {
      const second = await waiting(1, run.id, 'r', 2);
      expect(performance.now() - killedAt).toBeLessThan(LEASE_MS + 2000 + 1000);
      expect(second.token).not.toBe(first.token);
      const old = await c.request(1, 'POST', `/v1/runs/${run.id}/calls/r/result`, { token: first.token, output: 'old' });
      expect(old.status).toBe(409);
      expect(old.body.error.code).toBe('stale_token');
      expect((await c.request(1, 'POST', `/v1/runs/${run.id}/calls/r/result`, { token: second.token, output: 'new' })).status).toBe(202);
      const ended = await c.ended(1, run.id);
      expect(ended.calls.map((x: any) => [x.id, x.status, x.attempts, x.output, x.error?.code ?? null])).toEqual([
        ['r', 'succeeded', 2, 'new', null],
        ['w', 'failed', 1, null, 'outcome_unknown'],
      ]);
    } finally {
      await c.start(0);
    }
  }, 90_000);
});
