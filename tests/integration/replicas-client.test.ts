/**
 * Client-run tools across replicas (DESIGN §17, §12): two replicas in this process on one throwaway
 * PostgreSQL database. The work list is read from the run's events on either replica; a result posted
 * to the replica that does not own the run reaches the owner (a command) and is taken there; a wrong
 * token through it is the same 409; and after a takeover the old attempt's token is stale while the new
 * owner's attempt takes its own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { expectApiError, startApi, type Api } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

const YAML = `
tools:
  - name: write_file
    reads: []
    writes: ["file:{path}"]
    executor: { kind: client }
  - name: read_file
    reads: ["file:{path}"]
    writes: []
    risk: read
    idempotent: true
    executor: { kind: client }
  - name: one_at_a_time
    reads: []
    writes: []
    concurrency: 1
    executor: { kind: client }
defaults: { timeoutMs: 30000 }
store:
  leaseMs: 1500
`;

interface Work {
  runId: string;
  callId: string;
  attempt: number;
  token: string;
  args: Record<string, unknown>;
}

async function waitingFor(api: Api, runId: string, callId: string, attempt = 1): Promise<Work> {
  return until(`${callId} (attempt ${attempt}) to wait for its agent`, async () => {
    const res = await api.get(`/v1/runs/${runId}/work?waitMs=2000`);
    expect(res.status, res.text).toBe(200);
    return (res.body.items as Work[]).find((w) => w.callId === callId && w.attempt >= attempt);
  });
}

async function ended(api: Api, runId: string): Promise<any> {
  return until('the run to end', async () => {
    const r = (await api.get(`/v1/runs/${runId}`)).body;
    return r.endedAt ? r : undefined;
  });
}

describe('client tools on PostgreSQL, two replicas', () => {
  let pg: TestPostgres;
  let db: string;
  let a: Api;
  let b: Api;

  beforeAll(async () => {
    pg = await startPostgres();
    db = await pg.createDatabase();
    a = await startApi({ yaml: YAML, db, replica: 'ra' });
    b = await startApi({ yaml: YAML, db, replica: 'rb' });
  }, 60_000);
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await pg?.stop();
  });

  it('the other replica lists the work, and a result posted to it reaches the owner', async () => {
    const run = (
      await a.post('/v1/runs', {
        calls: [
          { id: 'w', tool: 'write_file', args: { path: '/x' } },
          { id: 'r', tool: 'read_file', args: { path: '/x' } },
        ],
      })
    ).body;
    expect((await b.get(`/v1/runs/${run.id}`)).body.owner).toBe('ra');
    const w = await waitingFor(b, run.id, 'w');
    expect((await a.get(`/v1/runs/${run.id}/work`)).body.items).toEqual([{ ...w, tool: 'write_file' }]);
    expectApiError(await b.post(`/v1/runs/${run.id}/calls/w/result`, { token: `${w.token}x`, output: 1 }), 409, 'stale_token');
    const taken = await b.post(`/v1/runs/${run.id}/calls/w/result`, { token: w.token, output: { wrote: true } });
    expect(taken.status, taken.text).toBe(202);
    expect(taken.body).toEqual({ runId: run.id, callId: 'w', attempt: 1 });
    const r = await waitingFor(b, run.id, 'r');
    expectApiError(await b.post(`/v1/runs/${run.id}/calls/w/result`, { token: w.token, output: 2 }), 409, 'stale_token');
    expect((await b.post(`/v1/runs/${run.id}/calls/r/result`, { token: r.token, output: 'content' })).status).toBe(202);
    const done = await ended(b, run.id);
    expect(done.status).toBe('succeeded');
    expect(done.calls.map((c: any) => [c.id, c.output])).toEqual([
      ['w', { wrote: true }],
      ['r', 'content'],
    ]);
  });

  it('a tool limit holds across replicas for client calls: one waits for its agent at a time, cluster-wide', async () => {
    const runA = (await a.post('/v1/runs', { calls: [{ id: 'x', tool: 'one_at_a_time', args: {} }] })).body;
    const first = await waitingFor(a, runA.id, 'x');
    const runB = (await b.post('/v1/runs', { calls: [{ id: 'y', tool: 'one_at_a_time', args: {} }] })).body;
    expect((await b.get(`/v1/runs/${runB.id}`)).body.owner).toBe('rb');
    // B's call waits for the cluster's permit while A's holds it: it is ready, not dispatched.
    const waits = await until('B to wait for the tool limit', async () => {
      const call = (await b.get(`/v1/runs/${runB.id}`)).body.calls[0];
      return call.status === 'ready' && call.waitingFor?.length ? call.waitingFor : undefined;
    });
    expect(waits.map((w: any) => w.kind)).toContain('tool');
    expect((await b.get(`/v1/runs/${runB.id}/work`)).body.items).toEqual([]);
    // A's result (posted to B's owner, the other replica) frees the permit; B's call is then dispatched.
    expect((await b.post(`/v1/runs/${runA.id}/calls/x/result`, { token: first.token, output: 'a' })).status).toBe(202);
    const second = await waitingFor(a, runB.id, 'y');
    expect((await a.post(`/v1/runs/${runB.id}/calls/y/result`, { token: second.token, output: 'b' })).status).toBe(202);
    expect((await ended(a, runB.id)).status).toBe('succeeded');
    expect((await ended(b, runA.id)).status).toBe('succeeded');
  });

  it('after a takeover, the old attempt’s token is stale and the new owner’s attempt takes its own', async () => {
    const run = (await a.post('/v1/runs', { calls: [{ id: 'r', tool: 'read_file', args: { path: '/y' } }] })).body;
    const first = await waitingFor(b, run.id, 'r');
    expect(first.attempt).toBe(1);
    // The owner goes away without ending the attempt: the other replica takes the run over and runs the
    // idempotent call again.
    await a.close();
    const second = await waitingFor(b, run.id, 'r', 2);
    expect(second.token).not.toBe(first.token);
    expect((await b.get(`/v1/runs/${run.id}`)).body.owner).toBe('rb');
    expectApiError(await b.post(`/v1/runs/${run.id}/calls/r/result`, { token: first.token, output: 'old' }), 409, 'stale_token');
    expect((await b.post(`/v1/runs/${run.id}/calls/r/result`, { token: second.token, output: 'new' })).status).toBe(202);
    const done = await ended(b, run.id);
    expect(done.calls[0]).toMatchObject({ status: 'succeeded', attempts: 2, output: 'new' });
  });
});
