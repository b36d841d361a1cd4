/**
 * End-to-end flows over HTTP (DESIGN §5, §6, §7): human review of a dangerous tool (approve, edit,
 * reject, and a bad edit that keeps the call waiting), and replan (a failing call, needs_replan with
 * its replanContext, new calls that reference an earlier output, superseded waiters).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { closeAll, expectApiError as expectError, sse, startApi, startToolApi, type Api } from '../helpers/server.js';
import type { ToolServer } from '../helpers/toolserver.js';

let ts: ToolServer;
let api: Api;

beforeEach(async () => {
  ({ ts, api } = await startToolApi());
});

afterEach(closeAll);

describe('reviews', () => {
  /** A run whose `launch` call waits for review, after a `work` call it does not depend on. */
  async function reviewedRun(): Promise<{ runId: string; reviewId: string }> {
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'prep', tool: 'work', args: { out: { ok: true } } },
        { id: 'go', tool: 'launch', args: { target: 'prod' } },
        { id: 'after', tool: 'echo', args: { launched: '${go.output}' } },
      ],
    });
    expect(res.status).toBe(201);
    const runId = res.body.id as string;
    const s = await sse(`${api.url}/v1/runs/${runId}/events`);
    await s.next((e) => e.event === 'call.awaiting_review' && e.data.callId === 'go');
    await s.next((e) => e.event === 'call.succeeded' && e.data.callId === 'prep');
    s.close();
    await s.ended;
    const list = await api.get(`/v1/reviews?runId=${runId}`);
    expect(list.status).toBe(200);
    expect(list.body.items).toHaveLength(1);
    return { runId, reviewId: list.body.items[0].id };
  }

  it('GET /v1/reviews lists pending reviews with id, runId, callId, tool, args, reason, createdAt', async () => {
    const { runId, reviewId } = await reviewedRun();
    const res = await api.get('/v1/reviews');
    expect(res.status).toBe(200);
    expect(res.body.items).toEqual([
      expect.objectContaining({
        id: reviewId,
        runId,
        callId: 'go',
        tool: 'launch',
        args: { target: 'prod' },
        reason: expect.any(String),
        createdAt: expect.any(String),
      }),
    ]);
    expect((await api.get('/v1/reviews?status=pending')).body.items).toHaveLength(1);
    expect((await api.get('/v1/reviews?status=decided')).body.items).toEqual([]);
    expect((await api.get('/v1/reviews?runId=run_other')).body.items).toEqual([]);
    const run = await api.get(`/v1/runs/${runId}`);
    expect(run.body.status).toBe('running');
    expect(run.body.calls.map((c: any) => c.status)).toEqual(['succeeded', 'awaiting_review', 'pending']);
    expect(ts.seen('go')).toHaveLength(0);
  });

  it.each([['status=done'], ['colour=red'], [`runId=${'x'.repeat(201)}`]])('GET /v1/reviews?%s is a 400', async (q) => {
    expectError(await api.get(`/v1/reviews?${q}`), 400, 'invalid_request');
  });

  it('approve: the call runs with its args, its dependant after it, the run succeeds; a second decision is a 409', async () => {
    const { runId, reviewId } = await reviewedRun();
    const res = await api.post(`/v1/reviews/${reviewId}`, { decision: 'approve', comment: 'looks fine' });
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(runId);
    const req = await ts.call('go', runId);
    expect(req.body.args).toEqual({ target: 'prod' });
    const run = await api.settled(runId);
    expect(run.status).toBe('succeeded');
    expect(run.calls[1]).toMatchObject({ id: 'go', status: 'succeeded', review: { decision: 'approve', comment: 'looks fine' } });
    expect(run.calls[2].output).toEqual({ launched: { callId: 'go', args: { target: 'prod' } } });
    expect((await api.get('/v1/reviews')).body.items).toEqual([]);
    expect((await api.get('/v1/reviews?status=decided')).body.items).toEqual([
      expect.objectContaining({ id: reviewId, decision: 'approve' }),
    ]);
    expectError(await api.post(`/v1/reviews/${reviewId}`, { decision: 'reject' }), 409, 'conflict');
    const rec = (await api.get(`/v1/runs/${runId}/recording`)).body;
    expect(rec.reviews).toEqual([expect.objectContaining({ callId: 'go', decision: 'approve', atMs: expect.any(Number) })]);
    expect(ts.seen('go')).toHaveLength(1);
  });

  it('edit: the call runs with the edited args', async () => {
    const { runId, reviewId } = await reviewedRun();
    const res = await api.post(`/v1/reviews/${reviewId}`, { decision: 'edit', args: { target: 'staging' } });
    expect(res.status).toBe(200);
    expect((await ts.call('go', runId)).body.args).toEqual({ target: 'staging' });
    const run = await api.settled(runId);
    expect(run.status).toBe('succeeded');
    expect(run.calls[1].output).toEqual({ callId: 'go', args: { target: 'staging' } });
    const rec = (await api.get(`/v1/runs/${runId}/recording`)).body;
    expect(rec.reviews).toEqual([expect.objectContaining({ callId: 'go', decision: 'edit', args: { target: 'staging' } })]);
  });

  it('an edit whose args fail the tool schema is a 400, and the call keeps waiting for a decision', async () => {
    const { runId, reviewId } = await reviewedRun();
    const bad = await api.post(`/v1/reviews/${reviewId}`, { decision: 'edit', args: { target: 42 } });
    expectError(bad, 400, 'invalid_args');
    const missing = await api.post(`/v1/reviews/${reviewId}`, { decision: 'edit', args: {} });
    expectError(missing, 400, 'invalid_args');
    const run = await api.get(`/v1/runs/${runId}`);
    expect(run.body.calls[1].status).toBe('awaiting_review');
    expect((await api.get('/v1/reviews')).body.items.map((r: any) => r.id)).toEqual([reviewId]);
    expect(ts.seen('go')).toHaveLength(0);
    expect((await api.store.events(runId)).some((e) => e.type === 'review.decided')).toBe(false);
    // It can still be decided.
    expect((await api.post(`/v1/reviews/${reviewId}`, { decision: 'edit', args: { target: 'dev' } })).status).toBe(200);
    expect((await ts.call('go', runId)).body.args).toEqual({ target: 'dev' });
    expect((await api.settled(runId)).status).toBe('succeeded');
  });

  it.each([
    ['edit without args', { decision: 'edit' }],
    ['approve with args', { decision: 'approve', args: { target: 'x' } }],
    ['an unknown decision', { decision: 'maybe' }],
    ['no decision', {}],
    ['args that are not an object', { decision: 'edit', args: [1] }],
    ['an unknown field', { decision: 'approve', extra: true }],
  ])('%s is a 400 and the call keeps waiting', async (_name, body) => {
    const { runId, reviewId } = await reviewedRun();
    expectError(await api.post(`/v1/reviews/${reviewId}`, body), 400, 'invalid_request');
    expect((await api.get(`/v1/runs/${runId}`)).body.calls[1].status).toBe('awaiting_review');
  });

  it('a review with no body is a 400, an unknown review a 404', async () => {
    const { reviewId } = await reviewedRun();
    expectError(await api.post(`/v1/reviews/${reviewId}`), 400, 'invalid_request');
    expectError(await api.post('/v1/reviews/rev_nope', { decision: 'approve' }), 404, 'not_found');
  });

  it('reject: the call fails review_rejected, its dependant is blocked, the tool never runs', async () => {
    const { runId, reviewId } = await reviewedRun();
    const res = await api.post(`/v1/reviews/${reviewId}`, { decision: 'reject', comment: 'not today' });
    expect(res.status).toBe(200);
    const run = await api.settled(runId);
    expect(run.status).toBe('partial');
    expect(run.calls[1]).toMatchObject({ id: 'go', status: 'failed', error: { code: 'review_rejected' } });
    expect(run.calls[1].error.message).toMatch(/not today/);
    expect(run.calls[2]).toMatchObject({ id: 'after', status: 'blocked', blockedBy: { code: 'dependency_failed', callId: 'go' } });
    expect(ts.seen('go')).toHaveLength(0);
  });

  it('invoking a tool that needs review answers at once with awaiting_review and the runId, not after the time budget', async () => {
    const res = await api.post('/v1/tools/launch/invoke', { args: { target: 'prod' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'awaiting_review', output: null, error: null, runId: expect.stringMatching(/^run_/) });
    // The tool's budget is 20 s (defaults.timeoutMs); the answer must not have waited for it.
    expect(res.body.durationMs).toBeLessThan(10_000);
    const reviews = await api.get(`/v1/reviews?runId=${res.body.runId}`);
    expect(reviews.body.items).toEqual([expect.objectContaining({ callId: 'invoke', tool: 'launch' })]);
    expect((await api.post(`/v1/reviews/${reviews.body.items[0].id}`, { decision: 'approve' })).status).toBe(200);
    const run = await api.settled(res.body.runId);
    expect(run.calls[0]).toMatchObject({ status: 'succeeded', output: { callId: 'invoke', args: { target: 'prod' } } });
  });

  it("a cancelled run's pending review can no longer be decided (409)", async () => {
    const { runId, reviewId } = await reviewedRun();
    expect((await api.post(`/v1/runs/${runId}/cancel`)).status).toBe(202);
    expect((await api.settled(runId)).status).toBe('cancelled');
    const res = await api.post(`/v1/reviews/${reviewId}`, { decision: 'approve' });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('conflict');
    expect(ts.seen('go')).toHaveLength(0);
  });
});

describe('replan', () => {
  it('a failure in replan mode ends needs_replan; a replan whose calls reference earlier outputs ends succeeded; waiters are superseded', async () => {
    const res = await api.post('/v1/runs', {
      failure: 'replan',
      calls: [
        { id: 'fetch', tool: 'work', args: { out: { url: 'https://x.test/a', size: 3 } } },
        { id: 'save', tool: 'write_doc', args: { name: 'report' } },
        { id: 'build', tool: 'work', args: { status: 400 } },
        { id: 'ship', tool: 'work', args: { artifact: '${build.output}' } },
        { id: 'notify', tool: 'echo', args: { about: '${ship.output}' } },
      ],
      waitMs: 10_000,
    });
    expect(res.status).toBe(201);
    const runId = res.body.id as string;
    expect(res.body.status).toBe('needs_replan');
    expect(res.body.calls.map((c: any) => [c.id, c.status])).toEqual([
      ['fetch', 'succeeded'],
      ['save', 'succeeded'],
      ['build', 'failed'],
      ['ship', 'blocked'],
      ['notify', 'blocked'],
    ]);
    expect(res.body.calls[3].blockedBy.code).toBe('awaiting_replan');
    expect(res.body.replanContext).toEqual({
      failed: [{ callId: 'build', error: expect.objectContaining({ code: 'tool_error' }) }],
      waiting: ['ship', 'notify'],
      sideEffects: ['save'],
    });
    // needs_replan is an ended state for the list.
    expect((await api.get('/v1/runs?status=needs_replan')).body.items.map((r: any) => r.id)).toEqual([runId]);

    const s = await sse(`${api.url}/v1/runs/${runId}/events?from=${(await api.store.events(runId)).length}`);
    expect(await s.ended).toEqual([]); // a needs_replan run's stream replays and closes

    const replan = await api.post(`/v1/runs/${runId}/replan`, {
      calls: [
        { id: 'build2', tool: 'work', args: { source: '${fetch.output.url}', out: { artifact: 'img:2' } } },
        { id: 'ship2', tool: 'work', args: { artifact: '${build2.output.artifact}', size: '${fetch.output.size}' } },
      ],
    });
    expect(replan.status).toBe(202);
    expect(replan.body.id).toBe(runId);
    expect(replan.body.calls.map((c: any) => c.id)).toEqual(['fetch', 'save', 'build', 'ship', 'notify', 'build2', 'ship2']);
    expect(replan.body.calls[3]).toMatchObject({ status: 'cancelled', error: { code: 'superseded' } });
    expect(replan.body.calls[4]).toMatchObject({ status: 'cancelled', error: { code: 'superseded' } });

    const run = await api.settled(runId);
    expect(run.status).toBe('succeeded');
    expect(run.calls.map((c: any) => [c.id, c.status])).toEqual([
      ['fetch', 'succeeded'],
      ['save', 'succeeded'],
      ['build', 'failed'],
      ['ship', 'cancelled'],
      ['notify', 'cancelled'],
      ['build2', 'succeeded'],
      ['ship2', 'succeeded'],
    ]);
    expect(run.replanContext).toBeUndefined();
    expect((await ts.call('build2', runId)).body.args).toEqual({ source: 'https://x.test/a', out: { artifact: 'img:2' } });
    expect((await ts.call('ship2', runId)).body.args).toEqual({ artifact: 'img:2', size: 3 });
    // The tool server never saw the superseded calls, nor the succeeded ones again.
    expect(ts.seen('ship', runId)).toHaveLength(0);
    expect(ts.seen('fetch', runId)).toHaveLength(1);
    expect(run.calls[6].dependsOn.sort()).toEqual(['build2', 'fetch']);

    // The events and the recording tell the same story.
    const types = (await api.store.events(runId)).map((e) => e.type);
    expect(types).toContain('run.needs_replan');
    expect(types).toContain('run.replanned');
    expect(types.filter((t) => t === 'run.completed')).toHaveLength(2);
    const rec = (await api.get(`/v1/runs/${runId}/recording`)).body;
    expect(rec.replans).toEqual([
      {
        atMs: expect.any(Number),
        calls: expect.arrayContaining([expect.objectContaining({ id: 'build2' }), expect.objectContaining({ id: 'ship2' })]),
      },
    ]);
    expect(rec.result.status).toBe('succeeded');

    // A second replan is a 409 now.
    expectError(await api.post(`/v1/runs/${runId}/replan`, { calls: [{ id: 'x', tool: 'echo' }] }), 409, 'conflict');
  });

  it('a replan call id already used in the run is a 409 (or 400), and the run stays needs_replan', async () => {
    const res = await api.post('/v1/runs', {
      failure: 'replan',
      calls: [{ id: 'a', tool: 'work', args: { status: 400 } }],
      waitMs: 10_000,
    });
    expect(res.body.status).toBe('needs_replan');
    const dup = await api.post(`/v1/runs/${res.body.id}/replan`, { calls: [{ id: 'a', tool: 'echo' }] });
    expect([400, 409]).toContain(dup.status);
    expect(dup.body.error.code).toEqual(expect.any(String));
    expect((await api.get(`/v1/runs/${res.body.id}`)).body.status).toBe('needs_replan');
    const dupInBody = await api.post(`/v1/runs/${res.body.id}/replan`, {
      calls: [
        { id: 'b', tool: 'echo' },
        { id: 'b', tool: 'echo' },
      ],
    });
    expectError(dupInBody, 400, 'invalid_request');
  });

  it('a replan whose new call fails again ends needs_replan again, with only the new failure', async () => {
    const res = await api.post('/v1/runs', {
      failure: 'replan',
      calls: [{ id: 'a', tool: 'work', args: { status: 400 } }],
      waitMs: 10_000,
    });
    const runId = res.body.id as string;
    expect((await api.post(`/v1/runs/${runId}/replan`, { calls: [{ id: 'b', tool: 'work', args: { status: 500 } }] })).status).toBe(202);
    const run = await api.settled(runId);
    expect(run.status).toBe('needs_replan');
    expect(run.replanContext.failed.map((f: any) => f.callId)).toEqual(['b']);
  });

  it('a replan that references an unknown call fails that call with unresolved_reference', async () => {
    const res = await api.post('/v1/runs', {
      failure: 'replan',
      calls: [
        { id: 'a', tool: 'work', args: { status: 400 } },
        { id: 'ok', tool: 'echo', args: { v: 1 } },
      ],
      waitMs: 10_000,
    });
    const runId = res.body.id as string;
    const r = await api.post(`/v1/runs/${runId}/replan`, {
      calls: [
        { id: 'b', tool: 'echo', args: { v: '${ghost.output}' } },
        { id: 'c', tool: 'echo', args: { v: '${ok.output.v}' } },
      ],
    });
    expect(r.status).toBe(202);
    const run = await api.settled(runId);
    const b = run.calls.find((c: any) => c.id === 'b');
    const c = run.calls.find((x: any) => x.id === 'c');
    expect(b).toMatchObject({ status: 'failed', error: { code: 'unresolved_reference' } });
    expect(c).toMatchObject({ status: 'succeeded', output: { v: 1 } });
  });
});

describe('a review of a cancelled run', () => {
  it('leaves the pending list when the run is cancelled', async () => {
    const api = await startApi({
      yaml: `
tools:
  - { name: deploy, risk: dangerous, reads: [], writes: [], executor: { kind: builtin, name: echo } }
`,
    });
    const run = await api.post('/v1/runs', { calls: [{ id: 'd', tool: 'deploy' }] });
    const before = await api.get(`/v1/reviews?runId=${run.body.id}`);
    expect(before.body.items).toHaveLength(1);
    expect((await api.post(`/v1/runs/${run.body.id}/cancel`)).status).toBe(202);
    const after = await api.get(`/v1/reviews?runId=${run.body.id}`);
    expect(after.body.items).toEqual([]);
    const decided = await api.get(`/v1/reviews?runId=${run.body.id}&status=decided`);
    expect(decided.body.items.map((r: { decision: string }) => r.decision)).toEqual(['cancelled']);
  });
});
