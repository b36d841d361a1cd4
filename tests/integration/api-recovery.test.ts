/**
 * Storage and recovery seen through the API (DESIGN §8): a server stopped with calls in flight and
 * started again on the same SQLite file resumes its runs — idempotent running calls run again,
 * others fail `interrupted` — and pending reviews and needs_replan runs can still be acted on.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { closeAll, startToolApi, type Api } from '../helpers/server.js';
import type { ToolServer } from '../helpers/toolserver.js';

let ts: ToolServer;
let api: Api;

beforeEach(async () => {
  ({ ts, api } = await startToolApi());
});

afterEach(closeAll);

describe('restart', () => {
  it('running calls: an idempotent one runs again, another fails interrupted; the run then ends by its mode', async () => {
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'once', tool: 'work', args: { hold: true } },
        { id: 'again', tool: 'work_idem', args: { hold: true } },
        { id: 'after_once', tool: 'echo', args: { v: '${once.output}' } },
        { id: 'after_again', tool: 'echo', args: { v: '${again.output}' } },
      ],
    });
    const runId = res.body.id as string;
    const first = await Promise.all([ts.call('once', runId), ts.call('again', runId)]);

    api = await api.restart();
    // The stopped server aborted its requests to the tool server.
    await Promise.all(first.map((r) => r.aborted));

    // The idempotent call is sent again; the other is not.
    const retry = await ts.next((r) => r.body.runId === runId && r.body.callId === 'again' && !first.includes(r));
    expect(ts.seen('once', runId)).toHaveLength(1);
    retry.respond({ status: 200, body: { again: true } });

    const run = await api.settled(runId);
    expect(run.status).toBe('partial');
    const byId = Object.fromEntries(run.calls.map((c: any) => [c.id, c]));
    expect(byId.once).toMatchObject({ status: 'failed', error: { code: 'outcome_unknown' } });
    expect(byId.again).toMatchObject({ status: 'succeeded', output: { again: true } });
    expect(byId.after_once).toMatchObject({ status: 'blocked', blockedBy: { code: 'dependency_failed', callId: 'once' } });
    expect(byId.after_again).toMatchObject({ status: 'succeeded', output: { v: { again: true } } });
    // The event log stays gapless across the restart.
    const seqs = (await api.store.events(runId)).map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
  });

  it('a run accepted just before the stop is not lost', async () => {
    const res = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'work_idem', args: { hold: true } }], tags: { k: 'v' } });
    expect(res.status).toBe(201);
    await ts.call('c1', res.body.id);
    api = await api.restart();
    const list = await api.get('/v1/runs?tag=k:v');
    expect(list.body.items.map((r: any) => r.id)).toEqual([res.body.id]);
    (await ts.next((r) => r.body.callId === 'c1' && !r.answered)).respond();
    expect((await api.settled(res.body.id)).status).toBe('succeeded');
  });

  it('a pending review survives a restart and can be decided on the new server', async () => {
    const res = await api.post('/v1/runs', { calls: [{ id: 'go', tool: 'launch', args: { target: 'prod' } }] });
    const runId = res.body.id as string;
    const before = await api.get('/v1/reviews');
    expect(before.body.items).toHaveLength(1);
    api = await api.restart();
    const after = await api.get('/v1/reviews');
    expect(after.body.items.map((r: any) => r.id)).toEqual(before.body.items.map((r: any) => r.id));
    expect((await api.get(`/v1/runs/${runId}`)).body.calls[0].status).toBe('awaiting_review');
    const decided = await api.post(`/v1/reviews/${after.body.items[0].id}`, { decision: 'edit', args: { target: 'staging' } });
    expect(decided.status).toBe(200);
    expect((await ts.call('go', runId)).body.args).toEqual({ target: 'staging' });
    expect((await api.settled(runId)).status).toBe('succeeded');
  });

  it('a needs_replan run can be replanned after a restart', async () => {
    const res = await api.post('/v1/runs', {
      failure: 'replan',
      calls: [
        { id: 'ok', tool: 'echo', args: { v: 7 } },
        { id: 'bad', tool: 'work', args: { status: 400 } },
      ],
      waitMs: 10_000,
    });
    expect(res.body.status).toBe('needs_replan');
    api = await api.restart();
    const run = await api.get(`/v1/runs/${res.body.id}`);
    expect(run.body.status).toBe('needs_replan');
    expect(run.body.replanContext.failed.map((f: any) => f.callId)).toEqual(['bad']);
    const replan = await api.post(`/v1/runs/${res.body.id}/replan`, {
      calls: [{ id: 'fix', tool: 'echo', args: { v: '${ok.output.v}' } }],
    });
    expect(replan.status).toBe(202);
    const done = await api.settled(res.body.id);
    expect(done.status).toBe('succeeded');
    expect(done.calls.find((c: any) => c.id === 'fix').output).toEqual({ v: 7 });
  });

  it('ended runs read back the same after a restart, on every read route', async () => {
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'a', tool: 'work', args: { out: { x: 1 } } },
        { id: 'b', tool: 'echo', args: { v: '${a.output.x}' } },
      ],
      waitMs: 10_000,
    });
    const runId = res.body.id as string;
    const reads = async (a: Api) => ({
      run: (await a.get(`/v1/runs/${runId}`)).body,
      graph: (await a.get(`/v1/runs/${runId}/graph`)).body,
      dot: (await a.get(`/v1/runs/${runId}/graph?format=dot`)).text,
      recording: (await a.get(`/v1/runs/${runId}/recording`)).body,
      list: (await a.get('/v1/runs')).body,
    });
    const before = await reads(api);
    api = await api.restart();
    expect(await reads(api)).toEqual(before);
  });
});
