/**
 * The HTTP API (DESIGN §7) end to end over a real server, a real SQLite file and a real tool backend:
 * every endpoint's success and error cases, the error body, content types, results in submission
 * order.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { closeAll, expectApiError as expectError, reopen, startToolApi, type Api } from '../helpers/server.js';
import type { ToolServer } from '../helpers/toolserver.js';

let ts: ToolServer;
let api: Api;

beforeEach(async () => {
  ({ ts, api } = await startToolApi());
});

afterEach(closeAll);

function nested(depth: number): Record<string, unknown> {
  // depth 1 is `{}`; each level wraps the previous one in `{ a: … }`.
  let v: Record<string, unknown> = {};
  for (let i = 1; i < depth; i++) v = { a: v };
  return v;
}

describe('POST /v1/runs', () => {
  it('accepts a batch: 201 and the run, which ends succeeded with the outputs', async () => {
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'c1', tool: 'work', args: { out: { n: 1 } } },
        { id: 'c2', tool: 'echo', args: { x: '${c1.output.n}' } },
      ],
      tags: { team: 'a' },
      waitMs: 10_000,
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    expect(res.body).toMatchObject({
      id: expect.stringMatching(/^run_/),
      tenant: 'default',
      status: 'succeeded',
      failure: 'partial',
      tags: { team: 'a' },
      diagnostics: [],
    });
    expect(res.body.calls.map((c: any) => [c.id, c.status])).toEqual([
      ['c1', 'succeeded'],
      ['c2', 'succeeded'],
    ]);
    expect(res.body.calls[0].output).toEqual({ n: 1 });
    expect(res.body.calls[1].output).toEqual({ x: 1 });
    expect(res.body.calls[1].dependsOn).toEqual(['c1']);
    expect(typeof res.body.createdAt).toBe('string');
    expect(typeof res.body.endedAt).toBe('string');
    // The tool server saw the executor's request with its Idempotency-Key.
    const seen = ts.seen('c1', res.body.id);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers['idempotency-key']).toBe(`${res.body.id}/c1`);
  });

  it('args default to {}', async () => {
    const res = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'echo' }], waitMs: 10_000 });
    expect(res.status).toBe(201);
    expect(res.body.calls[0]).toMatchObject({ args: {}, status: 'succeeded', output: {} });
  });

  it('without waitMs answers at once, with the run not yet ended', async () => {
    const res = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'work', args: { hold: true } }] });
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('running');
    expect(res.body.endedAt).toBeNull();
    (await ts.call('c1', res.body.id)).respond();
    const done = await api.settled(res.body.id);
    expect(done.status).toBe('succeeded');
  });

  it('with waitMs shorter than the run, answers when the time is up with the run still running', async () => {
    const res = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'work', args: { hold: true } }], waitMs: 50 });
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('running');
    expect(res.body.calls[0].status).toBe('running');
    ts.release();
    expect((await api.settled(res.body.id)).status).toBe('succeeded');
  });

  it.each([
    ['a fraction', 1.5],
    ['a negative number', -1],
    ['more than 60000', 60_001],
    ['a string', '100'],
    ['null', null],
    ['a boolean', true],
  ])('waitMs as %s is a 400', async (_name, waitMs) => {
    const res = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'echo' }], waitMs });
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.message).toMatch(/waitMs/);
    expect((await api.get('/v1/runs')).body.items).toEqual([]);
  });

  it('waitMs 0 and 60000 are accepted', async () => {
    expect((await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'echo' }], waitMs: 0 })).status).toBe(201);
    expect((await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'echo' }], waitMs: 60_000 })).status).toBe(201);
  });

  it.each([
    ['a call without id', { calls: [{ tool: 'echo' }] }, /calls\[0\]\.id/],
    ['a call without tool', { calls: [{ id: 'c1' }] }, /calls\[0\]\.tool/],
    ['an id with a space', { calls: [{ id: 'c 1', tool: 'echo' }] }, /calls\[0\]\.id/],
    ['an id of 129 chars', { calls: [{ id: 'a'.repeat(129), tool: 'echo' }] }, /calls\[0\]\.id/],
    ['a numeric id', { calls: [{ id: 1, tool: 'echo' }] }, /calls\[0\]\.id/],
    ['args that are an array', { calls: [{ id: 'c1', tool: 'echo', args: [1] }] }, /calls\[0\]\.args/],
    ['args that are a string', { calls: [{ id: 'c1', tool: 'echo', args: 'x' }] }, /calls\[0\]\.args/],
    [
      'duplicate ids',
      {
        calls: [
          { id: 'c1', tool: 'echo' },
          { id: 'c1', tool: 'echo' },
        ],
      },
      /duplicate call id c1/,
    ],
    ['args nested 65 deep', { calls: [{ id: 'c1', tool: 'echo', args: nested(65) }] }, /64/],
    ['no calls', {}, /calls/],
    ['calls not a list', { calls: { id: 'c1' } }, /calls/],
    ['an unknown failure mode', { calls: [], failure: 'maybe' }, /failure/],
    ['an unknown field', { calls: [], extra: 1 }, /extra/],
    ['tags that are not strings', { calls: [], tags: { a: 1 } }, /tags/],
    ['a bad tenant', { calls: [], tenant: 'a b' }, /tenant/],
    ['a JSON array body', [], /body/],
    ['a JSON string body', 'x', /body/],
  ])('%s is a 400 naming the problem', async (_name, body, message) => {
    const res = await api.post('/v1/runs', body);
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.message).toMatch(message);
    expect((await api.get('/v1/runs')).body.items).toEqual([]);
  });

  it('args nested exactly 64 deep are accepted', async () => {
    const res = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'echo', args: nested(64) }], waitMs: 10_000 });
    expect(res.status).toBe(201);
    expect(res.body.calls[0].status).toBe('succeeded');
  });

  it('args nested 100000 deep are a 400, not a crash', async () => {
    const raw = `{"calls":[{"id":"c1","tool":"echo","args":${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}}]}`;
    const res = await api.request('POST', '/v1/runs', { raw, contentType: 'application/json' });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    expect(res.body.error.code).toEqual(expect.any(String));
    expect((await api.get('/healthz')).status).toBe(200);
  });

  it('an unknown tool is not a 400: the run has that call failed with unknown_tool, the rest runs', async () => {
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'c1', tool: 'nope', args: {} },
        { id: 'c2', tool: 'echo', args: { a: 1 } },
      ],
      waitMs: 10_000,
    });
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('partial');
    expect(res.body.calls[0]).toMatchObject({ id: 'c1', status: 'failed', error: { code: 'unknown_tool' } });
    expect(res.body.calls[1]).toMatchObject({ id: 'c2', status: 'succeeded', output: { a: 1 } });
  });

  it('args that fail the tool schema fail the call with invalid_args, and the tool is never called', async () => {
    const res = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'write_doc', args: { name: 3 } }], waitMs: 10_000 });
    expect(res.status).toBe(201);
    expect(res.body.calls[0]).toMatchObject({ status: 'failed', error: { code: 'invalid_args' } });
    expect(ts.requests).toHaveLength(0);
  });

  it('a malformed JSON body is a 400 invalid_json', async () => {
    const res = await api.request('POST', '/v1/runs', { raw: '{"calls": [', contentType: 'application/json' });
    expectError(res, 400, 'invalid_json');
  });

  it('an empty body is a 400 (calls are required), not a 5xx', async () => {
    expectError(await api.request('POST', '/v1/runs', { contentType: 'application/json', raw: '' }), 400, 'invalid_request');
    expectError(await api.request('POST', '/v1/runs'), 400, 'invalid_request');
  });

  it('a body that is not JSON is a 415', async () => {
    expectError(await api.request('POST', '/v1/runs', { raw: 'calls=1', contentType: 'text/plain' }), 415, 'unsupported_media_type');
    expectError(
      await api.request('POST', '/v1/runs', { raw: 'calls=1', contentType: 'application/x-www-form-urlencoded' }),
      415,
      'unsupported_media_type',
    );
  });

  it('application/json with a charset, and +json types, are JSON', async () => {
    const body = JSON.stringify({ calls: [{ id: 'c1', tool: 'echo' }] });
    expect((await api.request('POST', '/v1/runs', { raw: body, contentType: 'application/json; charset=utf-8' })).status).toBe(201);
    expect((await api.request('POST', '/v1/runs', { raw: body, contentType: 'application/vnd.toolgraph+json' })).status).toBe(201);
  });

  it('results come back in submission order, whatever order the calls finish in', async () => {
    const ids = ['c1', 'c2', 'c3', 'c4'];
    const res = await api.post('/v1/runs', { calls: ids.map((id) => ({ id, tool: 'work', args: { hold: true, out: { id } } })) });
    expect(res.status).toBe(201);
    const runId = res.body.id as string;
    const held = await Promise.all(ids.map((id) => ts.call(id, runId)));
    // All four run at once (pure tools), and finish in reverse order.
    for (const r of [...held].reverse()) {
      r.respond({ status: 200, body: { id: r.body.callId } });
      await api.service.engine.wait(runId, 0);
    }
    const run = await api.settled(runId);
    expect(run.status).toBe('succeeded');
    expect(run.calls.map((c: any) => c.id)).toEqual(ids);
    expect(run.calls.map((c: any) => c.output)).toEqual(ids.map((id) => ({ id })));
    const ends = run.calls.map((c: any) => Date.parse(c.endedAt));
    expect(ends[3]).toBeLessThanOrEqual(ends[0]);
  });

  it("a tool error is the call's result (tool_error with the HTTP status), not an API error", async () => {
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'c1', tool: 'work', args: { status: 422 } },
        { id: 'c2', tool: 'echo', args: { v: '${c1.output}' } },
      ],
      waitMs: 10_000,
    });
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('failed');
    expect(res.body.calls[0]).toMatchObject({ status: 'failed', error: { code: 'tool_error', details: { status: 422 } } });
    expect(res.body.calls[1]).toMatchObject({ status: 'blocked', blockedBy: { code: 'dependency_failed', callId: 'c1' } });
  });
});

describe('POST /v1/plan', () => {
  it('returns the graph and diagnostics and runs nothing', async () => {
    const res = await api.post('/v1/plan', {
      calls: [
        { id: 'a', tool: 'work', args: {} },
        { id: 'b', tool: 'echo', args: { x: '${a.output}' } },
        { id: 'w1', tool: 'write_doc', args: { name: 'd' } },
        { id: 'w2', tool: 'write_doc', args: { name: 'd' } },
        { id: 'x', tool: 'echo', args: { v: '${y.output}' } },
        { id: 'y', tool: 'echo', args: { v: '${x.output}' } },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.graph.nodes.map((n: any) => n.id)).toEqual(['a', 'b', 'w1', 'w2', 'x', 'y']);
    expect(res.body.graph.edges).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ from: 'a', to: 'b', kind: 'data', reason: expect.any(String) }),
        expect.objectContaining({ from: 'w1', to: 'w2', kind: 'conflict' }),
      ]),
    );
    expect(res.body.diagnostics).toEqual(expect.arrayContaining([expect.objectContaining({ code: 'cycle' })]));
    expect(Array.isArray(res.body.graph.generations)).toBe(true);
    expect(ts.requests).toHaveLength(0);
    expect((await api.get('/v1/runs')).body.items).toEqual([]);
  });

  it('shows an unknown tool as a failed node', async () => {
    const res = await api.post('/v1/plan', { calls: [{ id: 'a', tool: 'nope' }] });
    expect(res.status).toBe(200);
    expect(res.body.graph.nodes).toEqual([{ id: 'a', tool: 'nope', status: 'failed' }]);
  });

  it('validates the body like POST /v1/runs', async () => {
    expectError(await api.post('/v1/plan', { calls: [{ id: 'a' }] }), 400, 'invalid_request');
    expectError(
      await api.post('/v1/plan', {
        calls: [
          { id: 'a', tool: 'echo' },
          { id: 'a', tool: 'echo' },
        ],
      }),
      400,
      'invalid_request',
    );
    expectError(await api.post('/v1/plan', { calls: [{ id: 'a', tool: 'echo', args: nested(65) }] }), 400, 'invalid_request');
    expectError(await api.post('/v1/plan', { calls: [], waitMs: -5 }), 400, 'invalid_request');
    expectError(await api.request('POST', '/v1/plan', { raw: 'x', contentType: 'text/plain' }), 415, 'unsupported_media_type');
  });
});

describe('GET /v1/runs', () => {
  async function submit(body: Record<string, unknown>): Promise<string> {
    const res = await api.post('/v1/runs', { waitMs: 10_000, ...body });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }

  it('lists newest first and filters by status (repeatable), tag and tenant', async () => {
    const ok = await submit({ calls: [{ id: 'c', tool: 'echo' }], tags: { env: 'prod', team: 'x' }, tenant: 'acme' });
    const partial = await submit({
      calls: [
        { id: 'c', tool: 'echo' },
        { id: 'd', tool: 'nope' },
      ],
      tags: { env: 'dev' },
      tenant: 'acme',
    });
    const failed = await submit({ calls: [{ id: 'd', tool: 'nope' }], tags: { env: 'prod' }, tenant: 'other' });

    const all = await api.get('/v1/runs');
    expect(all.status).toBe(200);
    expect(all.body.items.map((r: any) => r.id)).toEqual([failed, partial, ok]);
    expect(all.body.nextCursor).toBeNull();
    expect(all.body.items[2]).toMatchObject({ id: ok, tenant: 'acme', status: 'succeeded', tags: { env: 'prod', team: 'x' } });

    const ids = async (q: string) => (await api.get(`/v1/runs?${q}`)).body.items.map((r: any) => r.id);
    expect(await ids('status=succeeded')).toEqual([ok]);
    expect(await ids('status=succeeded&status=failed')).toEqual([failed, ok]);
    expect(await ids('status=running')).toEqual([]);
    expect(await ids('tag=env:prod')).toEqual([failed, ok]);
    expect(await ids('tag=env:prod&tag=team:x')).toEqual([ok]);
    expect(await ids('tag=env:nope')).toEqual([]);
    expect(await ids('tenant=acme')).toEqual([partial, ok]);
    expect(await ids('tenant=acme&status=partial')).toEqual([partial]);
    expect(await ids('tenant=nobody')).toEqual([]);
  });

  it('pages with limit and cursor: every run exactly once, newest first', async () => {
    const created: string[] = [];
    for (let i = 0; i < 7; i++) created.push(await submit({ calls: [{ id: 'c', tool: 'echo' }] }));
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: any = await api.get(`/v1/runs?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.status).toBe(200);
      expect(res.body.items.length).toBeLessThanOrEqual(3);
      seen.push(...res.body.items.map((r: any) => r.id));
      cursor = res.body.nextCursor;
      pages++;
    } while (cursor && pages < 10);
    expect(pages).toBe(3);
    expect(seen).toEqual([...created].reverse());
  });

  it('pages stay stable while new runs arrive between them', async () => {
    const created: string[] = [];
    for (let i = 0; i < 5; i++) created.push(await submit({ calls: [{ id: 'c', tool: 'echo' }] }));
    const page1 = await api.get('/v1/runs?limit=2');
    await submit({ calls: [{ id: 'c', tool: 'echo' }] });
    await submit({ calls: [{ id: 'c', tool: 'echo' }] });
    const page2 = await api.get(`/v1/runs?limit=2&cursor=${encodeURIComponent(page1.body.nextCursor)}`);
    const page3 = await api.get(`/v1/runs?limit=2&cursor=${encodeURIComponent(page2.body.nextCursor)}`);
    expect([...page1.body.items, ...page2.body.items, ...page3.body.items].map((r: any) => r.id)).toEqual([...created].reverse());
    expect(page3.body.nextCursor).toBeNull();
  });

  it('a tag value may contain colons (the key ends at the first)', async () => {
    const id = await submit({ calls: [], tags: { url: 'http://x.test:8080/a' } });
    const res = await api.get(`/v1/runs?tag=${encodeURIComponent('url:http://x.test:8080/a')}`);
    expect(res.body.items.map((r: any) => r.id)).toEqual([id]);
  });

  it.each([
    ['a bad cursor', 'cursor=garbage', 'invalid_cursor'],
    ['a cursor of another shape', `cursor=${Buffer.from('{"x":1}').toString('base64url')}`, 'invalid_cursor'],
    ['limit 0', 'limit=0', 'invalid_request'],
    ['limit 201', 'limit=201', 'invalid_request'],
    ['limit abc', 'limit=abc', 'invalid_request'],
    ['limit 1.5', 'limit=1.5', 'invalid_request'],
    ['an unknown status', 'status=done', 'invalid_request'],
    ['a tag without a colon', 'tag=env', 'invalid_request'],
    ['an unknown parameter', 'colour=red', 'invalid_request'],
  ])('%s is a 400', async (_name, q, code) => {
    await submit({ calls: [{ id: 'c', tool: 'echo' }] });
    expectError(await api.get(`/v1/runs?${q}`), 400, code);
  });
});

describe('GET /v1/runs/{id} and its graph', () => {
  it('returns the run; an unknown id is a 404 with an error body', async () => {
    const { body } = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'echo' }], waitMs: 10_000 });
    const res = await api.get(`/v1/runs/${body.id}`);
    expect(res.status).toBe(200);
    // GET adds the replica that owns the run: none once it ended (and none ever on SQLite).
    expect(res.body).toEqual({ ...body, owner: null });
    expectError(await api.get('/v1/runs/run_doesnotexist'), 404, 'not_found');
    expectError(await api.get(`/v1/runs/${'x'.repeat(300)}`), 400, 'invalid_request');
  });

  it('a run reads the same after a restart (from the SQLite file)', async () => {
    const { body } = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'echo', args: { a: 1 } }], waitMs: 10_000 });
    expect(body.status).toBe('succeeded');
    const second = await reopen(api);
    try {
      const res = await second.app.inject({ method: 'GET', url: `/v1/runs/${body.id}` });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ ...body, owner: null });
    } finally {
      await second.close();
    }
  });

  it('graph: JSON by default, mermaid and dot on request, a bad format is a 400', async () => {
    const { body } = await api.post('/v1/runs', {
      calls: [
        { id: 'a', tool: 'echo' },
        { id: 'b', tool: 'echo', args: { v: '${a.output}' } },
      ],
      waitMs: 10_000,
    });
    const g = await api.get(`/v1/runs/${body.id}/graph`);
    expect(g.status).toBe(200);
    expect(g.body).toEqual({
      nodes: [
        { id: 'a', tool: 'echo', status: 'succeeded' },
        { id: 'b', tool: 'echo', status: 'succeeded' },
      ],
      edges: [expect.objectContaining({ from: 'a', to: 'b', kind: 'data', reason: expect.any(String) })],
      generations: [['a'], ['b']],
    });
    const json = await api.get(`/v1/runs/${body.id}/graph?format=json`);
    expect(json.body).toEqual(g.body);

    const mermaid = await api.get(`/v1/runs/${body.id}/graph?format=mermaid`);
    expect(mermaid.status).toBe(200);
    expect(mermaid.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(mermaid.text).toMatch(/^(graph|flowchart)/);
    expect(mermaid.text).toContain('a');

    const dot = await api.get(`/v1/runs/${body.id}/graph?format=dot`);
    expect(dot.status).toBe(200);
    expect(dot.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(dot.text).toMatch(/digraph/);
    expect(dot.text).toMatch(/"a"\s*->\s*"b"|a\s*->\s*b/);

    expectError(await api.get(`/v1/runs/${body.id}/graph?format=png`), 400, 'invalid_request');
    expectError(await api.get('/v1/runs/run_nope/graph'), 404, 'not_found');
    expectError(await api.get('/v1/runs/run_nope/graph?format=dot'), 404, 'not_found');
  });
});

describe('POST /v1/runs/{id}/cancel', () => {
  async function heldRun(): Promise<string> {
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'c1', tool: 'work', args: { hold: true } },
        { id: 'c2', tool: 'echo', args: { v: '${c1.output}' } },
      ],
    });
    expect(res.status).toBe(201);
    await ts.call('c1', res.body.id);
    return res.body.id as string;
  }

  const variants: [string, { raw?: string; contentType?: string; json?: unknown }][] = [
    ['with no body', {}],
    ['with an empty JSON object', { json: {} }],
    ['with content-type application/json and an empty body', { raw: '', contentType: 'application/json' }],
    ['with an empty body and no content-type', { raw: '' }],
  ];

  it.each(variants)('202 %s: the running call is aborted and the run ends cancelled', async (_name, opts) => {
    const runId = await heldRun();
    const req = ts.seen('c1', runId)[0]!;
    const res = await api.request('POST', `/v1/runs/${runId}/cancel`, opts);
    expect(res.status, res.text).toBe(202);
    expect(res.body.id).toBe(runId);
    await req.aborted; // the tool server saw the request aborted
    const run = await api.settled(runId);
    expect(run.status).toBe('cancelled');
    expect(run.calls.map((c: any) => c.status)).toEqual(['cancelled', 'cancelled']);
  });

  it('cancelling an ended run is a 202 that changes nothing; an unknown run is a 404', async () => {
    const { body } = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'echo' }], waitMs: 10_000 });
    const res = await api.post(`/v1/runs/${body.id}/cancel`);
    expect(res.status).toBe(202);
    expect(res.body.status).toBe('succeeded');
    expectError(await api.post('/v1/runs/run_nope/cancel'), 404, 'not_found');
  });

  it('cancelling twice is fine', async () => {
    const runId = await heldRun();
    expect((await api.post(`/v1/runs/${runId}/cancel`)).status).toBe(202);
    expect((await api.post(`/v1/runs/${runId}/cancel`)).status).toBe(202);
    expect((await api.settled(runId)).status).toBe('cancelled');
  });

  it('a non-JSON body is a 415, a malformed JSON body a 400', async () => {
    const runId = await heldRun();
    expectError(
      await api.request('POST', `/v1/runs/${runId}/cancel`, { raw: 'now', contentType: 'text/plain' }),
      415,
      'unsupported_media_type',
    );
    expectError(await api.request('POST', `/v1/runs/${runId}/cancel`, { raw: '{', contentType: 'application/json' }), 400, 'invalid_json');
    ts.release();
    expect((await api.settled(runId)).status).toBe('succeeded');
  });
});

describe('POST /v1/runs/{id}/replan (errors; the flow is in api-flows)', () => {
  it('409 unless the run is needs_replan; 404 for an unknown run; 400 for a bad body', async () => {
    const { body } = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'echo' }], waitMs: 10_000 });
    expect(body.status).toBe('succeeded');
    expectError(await api.post(`/v1/runs/${body.id}/replan`, { calls: [{ id: 'c2', tool: 'echo' }] }), 409, 'conflict');
    expectError(await api.post('/v1/runs/run_nope/replan', { calls: [{ id: 'c2', tool: 'echo' }] }), 404, 'not_found');
    expectError(await api.post(`/v1/runs/${body.id}/replan`, { calls: [] }), 400, 'invalid_request');
    expectError(await api.post(`/v1/runs/${body.id}/replan`, {}), 400, 'invalid_request');
    expectError(await api.post(`/v1/runs/${body.id}/replan`), 400, 'invalid_request');
    expectError(await api.post(`/v1/runs/${body.id}/replan`, { calls: [{ id: 'c2' }] }), 400, 'invalid_request');
  });

  it('409 while the run is still running', async () => {
    const res = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'work', args: { hold: true } }], failure: 'replan' });
    await ts.call('c1', res.body.id);
    expectError(await api.post(`/v1/runs/${res.body.id}/replan`, { calls: [{ id: 'c2', tool: 'echo' }] }), 409, 'conflict');
    ts.release();
    await api.settled(res.body.id);
  });
});

describe('GET /v1/runs/{id}/recording', () => {
  it('returns the recording of §8 for an ended run; 404 for an unknown one', async () => {
    const { body } = await api.post('/v1/runs', {
      calls: [
        { id: 'c1', tool: 'work', args: { out: { v: 1 } } },
        { id: 'c2', tool: 'nope' },
      ],
      tags: { k: 'v' },
      waitMs: 10_000,
    });
    const res = await api.get(`/v1/runs/${body.id}/recording`);
    expect(res.status).toBe(200);
    const rec = res.body;
    expect(rec.format).toBe('toolgraph.recording/v1');
    expect(rec.run).toEqual({ id: body.id, tenant: 'default', failure: 'partial', tags: { k: 'v' } });
    expect(rec.config.tools.map((t: any) => t.name)).toContain('work');
    expect(rec.config).toHaveProperty('policy');
    expect(rec.config).toHaveProperty('limits');
    expect(rec.calls.map((c: any) => c.id)).toEqual(['c1', 'c2']);
    expect(rec.replans).toEqual([]);
    expect(rec.reviews).toEqual([]);
    expect(rec.attempts).toEqual([
      expect.objectContaining({
        callId: 'c1',
        attempt: 1,
        ok: true,
        output: { v: 1 },
        startMs: expect.any(Number),
        endMs: expect.any(Number),
      }),
    ]);
    expect(rec.result.status).toBe('partial');
    expect(rec.result.calls).toEqual([
      expect.objectContaining({ id: 'c1', status: 'succeeded', output: { v: 1 } }),
      expect.objectContaining({ id: 'c2', status: 'failed', error: expect.objectContaining({ code: 'unknown_tool' }) }),
    ]);
    expectError(await api.get('/v1/runs/run_nope/recording'), 404, 'not_found');
  });
});

describe('GET /v1/tools and POST /v1/tools/{name}/invoke', () => {
  it('lists the catalog', async () => {
    const res = await api.get('/v1/tools');
    expect(res.status).toBe(200);
    expect(res.body.items.map((t: any) => t.name)).toEqual(['work', 'work_idem', 'write_doc', 'launch', 'echo', 'fail']);
    expect(res.body.items[2]).toMatchObject({
      name: 'write_doc',
      writes: ['doc:{name}'],
      risk: 'write',
      executor: { kind: 'http', url: ts.url('/write') },
    });
  });

  it('invokes one tool: status, output, error, durationMs', async () => {
    const res = await api.post('/v1/tools/work/invoke', { args: { out: { done: true } } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', output: { done: true }, error: null, durationMs: expect.any(Number) });
    expect(ts.requests.map((r) => r.body.tool)).toEqual(['work']);
  });

  it('a failing tool is a 200 with status failed and the error', async () => {
    const res = await api.post('/v1/tools/work/invoke', { args: { status: 400 } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'failed', output: null, error: { code: 'tool_error', details: { status: 400 } } });
  });

  it("args that fail the schema are the call's invalid_args; args default to {}", async () => {
    const res = await api.post('/v1/tools/write_doc/invoke', {});
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'failed', error: { code: 'invalid_args' } });
    const none = await api.post('/v1/tools/echo/invoke');
    expect(none.status).toBe(200);
    expect(none.body).toMatchObject({ status: 'succeeded', output: {} });
  });

  it('an unknown tool is a 404; a bad body a 400', async () => {
    expectError(await api.post('/v1/tools/nope/invoke', { args: {} }), 404, 'not_found');
    expectError(await api.post('/v1/tools/work/invoke', { args: [1] }), 400, 'invalid_request');
    expectError(await api.post('/v1/tools/work/invoke', { args: nested(65) }), 400, 'invalid_request');
    expectError(await api.post('/v1/tools/work/invoke', { arg: {} }), 400, 'invalid_request');
    expectError(await api.request('POST', '/v1/tools/work/invoke', { raw: 'x', contentType: 'text/plain' }), 415, 'unsupported_media_type');
  });
});

describe('health, metrics, docs', () => {
  it('GET /healthz', async () => {
    const res = await api.get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'ok' });
  });

  it('GET /metrics is Prometheus text with toolgraph_ metrics that move', async () => {
    await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'work' }], waitMs: 10_000 });
    const res = await api.get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toMatch(/^# HELP toolgraph_/m);
    expect(res.text).toMatch(/^toolgraph_runs\{status="succeeded"\} 1$/m);
    expect(res.text).toMatch(/^toolgraph_runs_completed_total\{status="succeeded"\} 1$/m);
    expect(res.text).toMatch(/^toolgraph_call_duration_seconds_count\{tool="work",outcome="succeeded"\} 1$/m);
    expect(res.text).toMatch(/^toolgraph_queue_wait_seconds_count\{tool="work"\} 1$/m);
    // A second run: counts add up per label, a failed attempt is counted under its outcome.
    await api.post('/v1/runs', {
      calls: [
        { id: 'a', tool: 'work' },
        { id: 'b', tool: 'fail', args: { message: 'no' } },
      ],
      waitMs: 10_000,
    });
    const again = (await api.get('/metrics')).text;
    expect(again).toMatch(/^toolgraph_runs_completed_total\{status="partial"\} 1$/m);
    expect(again).toMatch(/^toolgraph_call_duration_seconds_count\{tool="work",outcome="succeeded"\} 2$/m);
    expect(again).toMatch(/^toolgraph_call_duration_seconds_count\{tool="fail",outcome="failed"\} 1$/m);
    expect(again).toMatch(/^toolgraph_queue_wait_seconds_count\{tool="work"\} 2$/m);
  });

  it('GET /openapi.json is an OpenAPI document with every §7 path', async () => {
    const res = await api.get('/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toMatch(/^3\./);
    const paths = Object.keys(res.body.paths);
    for (const p of [
      '/v1/runs',
      '/v1/plan',
      '/v1/runs/{id}',
      '/v1/runs/{id}/graph',
      '/v1/runs/{id}/events',
      '/v1/runs/{id}/cancel',
      '/v1/runs/{id}/replan',
      '/v1/runs/{id}/recording',
      '/v1/reviews',
      '/v1/reviews/{id}',
      '/v1/tools',
      '/v1/tools/{name}/invoke',
      '/healthz',
      '/metrics',
    ]) {
      expect(paths).toContain(p);
    }
  });

  it('GET /docs is the API reference page (Swagger UI)', async () => {
    const res = await api.get('/docs');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.text).toMatch(/<html/i);
    expect(res.text).toContain('swagger-ui');
  });
});

describe('routing errors', () => {
  it('an unknown route is a 404 with an error body', async () => {
    expectError(await api.get('/v1/nope'), 404, 'not_found');
    expectError(await api.get('/nope'), 404, 'not_found');
    expectError(await api.post('/v1/runs/run_x/explode', {}), 404, 'not_found');
  });

  it.each([
    ['DELETE', '/v1/runs'],
    ['PUT', '/v1/runs/run_x'],
    ['GET', '/v1/runs/run_x/cancel'],
    ['GET', '/v1/plan'],
    ['POST', '/healthz'],
    ['PATCH', '/v1/tools'],
  ])('a wrong method (%s %s) is a 405 with an error body and Allow', async (method, path) => {
    const res = await api.request(method, path);
    expectError(res, 405, 'method_not_allowed');
    expect(res.headers.get('allow')).toEqual(expect.any(String));
  });
});
