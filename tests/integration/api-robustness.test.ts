/**
 * Bad input is a 4xx with `{ error: { code, message } }`, never a 5xx, a hang or a crash (DESIGN §7):
 * malformed URLs, over-long path parameters, `__proto__` keys, call ids named like Object.prototype
 * properties, and randomly generated bodies, paths and queries against a real server.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeAll, startToolApi, type Api, type ApiResponse } from '../helpers/server.js';

let api: Api;

beforeAll(async () => {
  ({ api } = await startToolApi());
});

afterAll(closeAll);

function expectClientError(res: ApiResponse, what: string): void {
  expect(res.status, `${what} → ${res.status} ${res.text.slice(0, 300)}`).toBeGreaterThanOrEqual(400);
  expect(res.status, `${what} → ${res.status} ${res.text.slice(0, 300)}`).toBeLessThan(500);
  expect(res.body?.error, `${what} → ${res.text.slice(0, 300)}`).toMatchObject({ code: expect.any(String), message: expect.any(String) });
}

describe('URLs the router rejects get the API error body', () => {
  it.each([
    ['a malformed %-escape in the path', '/v1/runs/%E0%A4%A'],
    ['a path parameter longer than the router allows', `/v1/runs/${'x'.repeat(600)}`],
    ['a long review id', `/v1/reviews/${'r'.repeat(600)}`],
  ])('%s is a 400 invalid_request', async (_name, path) => {
    const res = await api.request(
      path.startsWith('/v1/reviews') ? 'POST' : 'GET',
      path,
      path.startsWith('/v1/reviews') ? { json: { decision: 'approve' } } : {},
    );
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: { code: 'invalid_request', message: expect.any(String) } });
    expect(res.headers.get('x-request-id')).toEqual(expect.any(String));
  });

  it('a malformed %-escape in the query is a 400', async () => {
    expectClientError(await api.get('/v1/runs?status=%E0%A4%A'), 'bad query escape');
  });
});

describe('__proto__ keys', () => {
  it.each([
    ['at the top of args', '{"calls":[{"id":"c1","tool":"work","args":{"__proto__":{"x":1},"y":2}}]}'],
    ['deep in args', '{"calls":[{"id":"c1","tool":"work","args":{"a":{"b":[{"__proto__":{"x":1}}]}}}]}'],
    ['escaped', '{"calls":[{"id":"c1","tool":"work","args":{"\\u005f_proto__":{"x":1}}}]}'],
    ['in tags', '{"calls":[],"tags":{"__proto__":"x"}}'],
    ['at the top of the body', '{"__proto__":{"calls":[]},"calls":[]}'],
  ])('%s are a 400 rather than silently dropped', async (_name, raw) => {
    const before = (await api.get('/v1/runs')).body.items.length;
    const res = await api.request('POST', '/v1/runs', { raw, contentType: 'application/json' });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', message: expect.stringContaining('__proto__') });
    expect((await api.get('/v1/runs')).body.items.length).toBe(before);
  });

  it('a key that merely contains "proto" is fine', async () => {
    const res = await api.post('/v1/runs', {
      calls: [{ id: 'c1', tool: 'echo', args: { protocol: 'h2', __proto: 1, é: '\u00e9' } }],
      waitMs: 10_000,
    });
    expect(res.status).toBe(201);
    expect(res.body.calls[0].output).toEqual({ protocol: 'h2', __proto: 1, é: 'é' });
  });
});

describe('call ids named like Object.prototype properties', () => {
  // graphology keeps each node's neighbours in a plain object, so an edge *to* a node keyed
  // `constructor`, `toString`, `valueOf`, `__proto__`, … "already exists" and addDirectedEdge throws.
  // buildPlan (src/core/plan.ts) used to build that graph eagerly, keyed by call id: these valid batches
  // were a 500 and left a phantom active run in the scheduler (a tenant at maxActiveRunsPerTenant was
  // then refused for good). The graph is now built lazily and the API never asks for it; these pin it.
  const calls = [
    { id: 'a', tool: 'echo', args: { v: 1 } },
    { id: 'constructor', tool: 'echo', args: { v: '${a.output.v}' } },
    { id: 'toString', tool: 'echo', args: { v: '${constructor.output.v}' } },
  ];

  it('POST /v1/plan plans them', async () => {
    const res = await api.post('/v1/plan', { calls });
    expect(res.status).toBe(200);
    expect(res.body.graph.edges.map((e: any) => [e.from, e.to])).toEqual([
      ['a', 'constructor'],
      ['constructor', 'toString'],
    ]);
  });

  it('POST /v1/runs runs them, and leaves no phantom active run', async () => {
    const res = await api.post('/v1/runs', { calls, waitMs: 10_000 });
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('succeeded');
    expect(res.body.calls[2].output).toEqual({ v: 1 });
    expect((await api.get(`/v1/runs/${res.body.id}/graph?format=dot`)).status).toBe(200);
    expect((await api.get('/healthz')).body.activeRuns).toBe(0);
  });

  it('ids that are only edge sources work too', async () => {
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'constructor', tool: 'echo', args: { v: 1 } },
        { id: 'b', tool: 'echo', args: { v: '${constructor.output.v}' } },
      ],
      waitMs: 10_000,
    });
    expect(res.status).toBe(201);
    expect(res.body.calls[1].output).toEqual({ v: 1 });
  });
});

describe('random input never makes a 5xx', () => {
  const json = fc.jsonValue({ maxDepth: 4 });
  const idLike = fc.oneof(fc.constantFrom('c1', 'c2', 'a.b', 'x:y', '', ' ', 'é', 'run_x'), fc.string({ maxLength: 12 }));
  const call = fc.record(
    {
      id: fc.oneof(idLike, json),
      tool: fc.oneof(fc.constantFrom('echo', 'fail', 'work', 'write_doc', 'launch', 'nope', ''), json),
      args: fc.oneof(fc.dictionary(fc.string({ maxLength: 6 }), json, { maxKeys: 4 }), json),
    },
    { requiredKeys: [] },
  );
  const body = fc.oneof(
    json,
    fc.record(
      {
        calls: fc.oneof(fc.array(call, { maxLength: 5 }), json),
        failure: fc.oneof(fc.constantFrom('fail_fast', 'partial', 'replan', 'nope'), json),
        tags: fc.oneof(fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 3 }), json),
        tenant: fc.oneof(fc.constantFrom('acme', 'a b', ''), json),
        waitMs: fc.oneof(fc.constantFrom(0, 1, 60_001, -1, 1.5), json),
        extra: json,
      },
      { requiredKeys: [] },
    ),
  );

  it('POST /v1/runs and /v1/plan: a 2xx with a run/plan, or a 4xx with an error body', async () => {
    await fc.assert(
      fc.asyncProperty(body, fc.constantFrom('/v1/runs', '/v1/plan'), async (b, path) => {
        // waitMs is capped so that a valid random batch cannot hold the property for long.
        const sent =
          b !== null &&
          typeof b === 'object' &&
          !Array.isArray(b) &&
          typeof (b as { waitMs?: unknown }).waitMs === 'number' &&
          (b as { waitMs: number }).waitMs > 100 &&
          (b as { waitMs: number }).waitMs <= 60_000
            ? { ...b, waitMs: 100 }
            : b;
        const res = await api.request('POST', path, { raw: JSON.stringify(sent), contentType: 'application/json' });
        if (res.status < 300) {
          expect(res.status === 200 || res.status === 201).toBe(true);
          expect(res.body).toEqual(expect.any(Object));
        } else expectClientError(res, `${path} ${JSON.stringify(sent).slice(0, 200)}`);
      }),
      { numRuns: 150 },
    );
    expect((await api.get('/healthz')).status).toBe(200);
  });

  it('review decisions, replans and invokes with random bodies', async () => {
    await fc.assert(
      fc.asyncProperty(
        json,
        fc.constantFrom(
          '/v1/reviews/rev_x',
          '/v1/runs/run_x/replan',
          '/v1/runs/run_x/cancel',
          '/v1/tools/echo/invoke',
          '/v1/tools/write_doc/invoke',
        ),
        async (b, path) => {
          const res = await api.request('POST', path, { raw: JSON.stringify(b), contentType: 'application/json' });
          if (res.status >= 300) expectClientError(res, `${path} ${JSON.stringify(b).slice(0, 200)}`);
          else expect(path).toMatch(/invoke/);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('random paths and queries under /v1', async () => {
    const segment = fc.oneof(
      fc.constantFrom(
        'runs',
        'plan',
        'reviews',
        'tools',
        'graph',
        'events',
        'recording',
        'cancel',
        'replan',
        'invoke',
        'echo',
        'run_x',
        '%20',
        '%',
        '..',
        '',
      ),
      fc.string({ maxLength: 8 }).map(encodeURIComponent),
    );
    const query = fc.array(
      fc.tuple(fc.constantFrom('status', 'tag', 'tenant', 'limit', 'cursor', 'from', 'format', 'runId', 'x'), fc.string({ maxLength: 8 })),
      { maxLength: 3 },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(segment, { minLength: 1, maxLength: 4 }),
        query,
        fc.constantFrom('GET', 'POST', 'DELETE'),
        async (segs, q, method) => {
          const qs = q.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&');
          const path = `/v1/${segs.join('/')}${qs ? `?${qs}` : ''}`;
          // Event streams of real runs would stay open; these ids never exist, so they are 404s.
          const res = await api.request(method, path, method === 'POST' ? { json: {} } : {});
          expect(res.status, `${method} ${path} → ${res.text.slice(0, 200)}`).toBeLessThan(500);
          if (res.status >= 400) expectClientError(res, `${method} ${path}`);
        },
      ),
      { numRuns: 200 },
    );
  });
});
