/**
 * Auth (DESIGN §7): bearer keys map to a tenant and a role. Missing or unknown keys are 401; an agent
 * sees only its tenant (another tenant's run is a 404 on every route that takes an id); a foreign
 * `tenant` in a body is 403; only operators decide reviews; operators see all; with no keys the server
 * is open (acting as an operator) and `toolgraph serve` refuses a non-loopback host.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { captureIo } from '../helpers/cli.js';
import { closeAll, expectApiError as expectError, rawRequest, sse, startToolApi, type Api } from '../helpers/server.js';
import type { ToolServer } from '../helpers/toolserver.js';

const KEYS = [
  { key: 'agent-acme-key', tenant: 'acme', role: 'agent' as const },
  { key: 'agent-globex-key', tenant: 'globex', role: 'agent' as const },
  { key: 'operator-key', tenant: 'ops', role: 'operator' as const },
  { key: 'agent-capped-key', tenant: 'acme', role: 'agent' as const, maxPriority: 2 },
];
const ACME = 'agent-acme-key';
const GLOBEX = 'agent-globex-key';
const OPS = 'operator-key';

describe('with keys', () => {
  let ts: ToolServer;
  let api: Api;

  beforeAll(async () => {
    ({ ts, api } = await startToolApi({ auth: KEYS }));
  });

  afterAll(closeAll);

  describe('authentication', () => {
    const routes: [string, string][] = [
      ['POST', '/v1/runs'],
      ['POST', '/v1/plan'],
      ['GET', '/v1/runs'],
      ['GET', '/v1/runs/run_x'],
      ['GET', '/v1/runs/run_x/graph'],
      ['GET', '/v1/runs/run_x/events'],
      ['POST', '/v1/runs/run_x/cancel'],
      ['POST', '/v1/runs/run_x/replan'],
      ['GET', '/v1/runs/run_x/recording'],
      ['POST', '/v1/runs/run_x/calls'],
      ['POST', '/v1/runs/run_x/seal'],
      ['GET', '/v1/runs/run_x/messages?format=openai'],
      ['GET', '/v1/reviews'],
      ['POST', '/v1/reviews/rev_x'],
      ['GET', '/v1/tools'],
      ['POST', '/v1/tools/echo/invoke'],
    ];

    it.each(routes)('%s %s without a key is a 401 with WWW-Authenticate', async (method, path) => {
      const res = await api.request(method, path, method === 'POST' ? { json: { calls: [] } } : {});
      expectError(res, 401, 'unauthorized');
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    });

    it.each(routes)('%s %s with an unknown key is a 401', async (method, path) => {
      const res = await api.request(method, path, { token: 'not-a-key', ...(method === 'POST' ? { json: { calls: [] } } : {}) });
      expectError(res, 401, 'unauthorized');
    });

    it.each([
      ['Basic abc'],
      ['Bearer'],
      ['agent-acme-key'],
      ['Bearer agent-acme-key extra'],
      ['Bearer agent-acme-ke'],
      ['Bearer AGENT-ACME-KEY'],
    ])('a malformed or wrong Authorization header (%s) is a 401', async (header) => {
      expectError(await api.get('/v1/tools', { headers: { authorization: header } }), 401, 'unauthorized');
    });

    it.each([
      ['a percent-encoded path', (_base: string) => 'GET /%761/tools'],
      ['a percent-encoded path to a run route', (_base: string) => 'GET /%76%31/runs'],
      ['an absolute-form target', (base: string) => `GET ${base}/v1/tools`],
      ['an absolute-form target to runs', (base: string) => `GET ${base}/v1/runs`],
      ['an absolute-form POST', (base: string) => `POST ${base}/v1/plan`],
    ])('%s reaching an API route still needs a key (401, not 200 or 500)', async (_name, line) => {
      const without = await rawRequest(api.url, line(api.url));
      expect(without.status, without.text).toBe(401);
      expect(without.body.error.code).toBe('unauthorized');
      if (line(api.url).startsWith('GET')) {
        const withKey = await rawRequest(api.url, line(api.url), { authorization: `Bearer ${ACME}` });
        expect(withKey.status, withKey.text).toBe(200);
      }
    });

    it('nothing is created by a request without a key', async () => {
      const res = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'work' }], waitMs: 1000 });
      expect(res.status).toBe(401);
      expect(ts.seen('c1').length).toBe(0);
    });

    it('health and docs need no key; metrics need an operator key (DESIGN §7)', async () => {
      for (const p of ['/healthz', '/openapi.json', '/docs']) expect((await api.get(p)).status).toBe(200);
      expect((await api.get('/metrics')).status).toBe(401);
    });
  });

  describe('tenants', () => {
    let acmeRun: string;
    let acmeReview: string;
    let globexRun: string;

    beforeAll(async () => {
      // An acme run that waits for a review, so it has a pending review and stays active.
      const r = await api.post(
        '/v1/runs',
        { calls: [{ id: 'l1', tool: 'launch', args: { target: 'prod' } }], tags: { who: 'acme' } },
        { token: ACME },
      );
      expect(r.status).toBe(201);
      expect(r.body.tenant).toBe('acme');
      acmeRun = r.body.id;
      const reviews = await api.get(`/v1/reviews?runId=${acmeRun}`, { token: OPS });
      expect(reviews.body.items).toHaveLength(1);
      acmeReview = reviews.body.items[0].id;
      const g = await api.post('/v1/runs', { calls: [{ id: 'e1', tool: 'echo' }], waitMs: 10_000 }, { token: GLOBEX });
      expect(g.body.tenant).toBe('globex');
      globexRun = g.body.id;
    });

    it("an agent's run belongs to its key's tenant; naming that tenant is fine, another is a 403", async () => {
      const same = await api.post('/v1/runs', { calls: [{ id: 'e', tool: 'echo' }], tenant: 'acme', waitMs: 10_000 }, { token: ACME });
      expect(same.status).toBe(201);
      expect(same.body.tenant).toBe('acme');
      const before = (await api.get('/v1/runs', { token: OPS })).body.items.length;
      expectError(await api.post('/v1/runs', { calls: [{ id: 'e', tool: 'echo' }], tenant: 'globex' }, { token: ACME }), 403, 'forbidden');
      expectError(await api.post('/v1/plan', { calls: [{ id: 'e', tool: 'echo' }], tenant: 'globex' }, { token: ACME }), 403, 'forbidden');
      expectError(await api.post('/v1/tools/echo/invoke', { args: {}, tenant: 'globex' }, { token: ACME }), 403, 'forbidden');
      expect((await api.get('/v1/runs', { token: OPS })).body.items.length).toBe(before);
    });

    it('the owner sees its run on every route', async () => {
      expect((await api.get(`/v1/runs/${acmeRun}`, { token: ACME })).status).toBe(200);
      expect((await api.get(`/v1/runs/${acmeRun}/graph`, { token: ACME })).status).toBe(200);
      expect((await api.get(`/v1/runs/${acmeRun}/graph?format=dot`, { token: ACME })).status).toBe(200);
      expect((await api.get(`/v1/runs/${acmeRun}/recording`, { token: ACME })).status).toBe(200);
      expect((await api.get(`/v1/runs/${acmeRun}/messages?format=openai`, { token: ACME })).status).toBe(200);
      const s = await sse(`${api.url}/v1/runs/${acmeRun}/events`, { authorization: `Bearer ${ACME}` });
      expect(s.status).toBe(200);
      await s.next((e) => e.event === 'call.awaiting_review');
      s.close();
      await s.ended;
      const reviews = await api.get(`/v1/reviews?runId=${acmeRun}`, { token: ACME });
      expect(reviews.body.items.map((r: any) => r.id)).toEqual([acmeReview]);
    });

    it("another tenant's run is a 404 on every route that takes an id, exactly like a missing run", async () => {
      const missing = await api.get('/v1/runs/run_doesnotexist', { token: GLOBEX });
      const cases: [string, string, unknown?][] = [
        ['GET', `/v1/runs/${acmeRun}`],
        ['GET', `/v1/runs/${acmeRun}/graph`],
        ['GET', `/v1/runs/${acmeRun}/graph?format=mermaid`],
        ['GET', `/v1/runs/${acmeRun}/events`],
        ['GET', `/v1/runs/${acmeRun}/events?from=1`],
        ['POST', `/v1/runs/${acmeRun}/cancel`],
        ['POST', `/v1/runs/${acmeRun}/replan`, { calls: [{ id: 'x', tool: 'echo' }] }],
        ['GET', `/v1/runs/${acmeRun}/recording`],
        ['POST', `/v1/runs/${acmeRun}/calls`, { calls: [{ id: 'x', tool: 'echo' }] }],
        ['POST', `/v1/runs/${acmeRun}/seal`],
        ['GET', `/v1/runs/${acmeRun}/messages?format=openai`],
        ['GET', `/v1/runs/${acmeRun}/messages?format=anthropic`],
      ];
      for (const [method, path, json] of cases) {
        const res = await api.request(method, path, { token: GLOBEX, ...(json !== undefined ? { json } : {}) });
        expectError(res, 404, 'not_found');
        expect(res.body.error.message.replaceAll(acmeRun, 'ID')).toBe(missing.body.error.message.replaceAll('run_doesnotexist', 'ID'));
      }
      // The run was not touched: still waiting for its review.
      const run = await api.get(`/v1/runs/${acmeRun}`, { token: ACME });
      expect(run.body.status).toBe('running');
      expect(run.body.calls[0].status).toBe('awaiting_review');
    });

    it('another tenant cannot append to or seal an open run (404), and the run is untouched', async () => {
      const open = await api.post('/v1/runs', { calls: [{ id: 'o1', tool: 'echo' }], open: true }, { token: ACME });
      expect(open.status).toBe(201);
      const id = open.body.id as string;
      expectError(await api.post(`/v1/runs/${id}/calls`, { calls: [{ id: 'o2', tool: 'echo' }] }, { token: GLOBEX }), 404, 'not_found');
      expectError(await api.post(`/v1/runs/${id}/seal`, undefined, { token: GLOBEX }), 404, 'not_found');
      const run = (await api.get(`/v1/runs/${id}`, { token: ACME })).body;
      expect(run.calls.map((c: any) => c.id)).toEqual(['o1']);
      expect(run.status).not.toMatch(/succeeded|partial|failed/);
      expect((await api.post(`/v1/runs/${id}/calls`, { calls: [{ id: 'o2', tool: 'echo' }] }, { token: ACME })).status).toBe(200);
      expect((await api.post(`/v1/runs/${id}/seal`, undefined, { token: ACME })).status).toBe(200);
      const done = await api.settled(id, ACME);
      expect(done.calls.map((c: any) => [c.id, c.status])).toEqual([
        ['o1', 'succeeded'],
        ['o2', 'succeeded'],
      ]);
    });

    it("another tenant's reviews are invisible to an agent", async () => {
      expect((await api.get(`/v1/reviews?runId=${acmeRun}`, { token: GLOBEX })).body.items).toEqual([]);
      const all = (await api.get('/v1/reviews', { token: GLOBEX })).body.items;
      expect(all.map((r: any) => r.id)).not.toContain(acmeReview);
      const decided = await api.get('/v1/reviews?status=decided', { token: GLOBEX });
      expect(decided.status).toBe(200);
      for (const r of decided.body.items) expect(r.runId).not.toBe(acmeRun);
    });

    it('agents cannot decide reviews, not even of their own tenant (403); the call keeps waiting', async () => {
      expectError(await api.post(`/v1/reviews/${acmeReview}`, { decision: 'approve' }, { token: ACME }), 403, 'forbidden');
      expectError(await api.post(`/v1/reviews/${acmeReview}`, { decision: 'reject' }, { token: GLOBEX }), 403, 'forbidden');
      const run = await api.get(`/v1/runs/${acmeRun}`, { token: ACME });
      expect(run.body.calls[0].status).toBe('awaiting_review');
      expect(ts.seen('l1')).toHaveLength(0);
    });

    it("an agent lists only its tenant's runs; asking for another tenant is a 403", async () => {
      const acme = await api.get('/v1/runs', { token: ACME });
      expect(acme.status).toBe(200);
      expect(acme.body.items.length).toBeGreaterThan(0);
      for (const r of acme.body.items) expect(r.tenant).toBe('acme');
      expect(acme.body.items.map((r: any) => r.id)).not.toContain(globexRun);
      expect((await api.get('/v1/runs?tenant=acme', { token: ACME })).status).toBe(200);
      expectError(await api.get('/v1/runs?tenant=globex', { token: ACME }), 403, 'forbidden');
    });

    it("operators see every tenant's runs and reviews, and decide reviews", async () => {
      const all = await api.get('/v1/runs', { token: OPS });
      const tenants = new Set(all.body.items.map((r: any) => r.tenant));
      expect(tenants).toEqual(new Set(['acme', 'globex']));
      expect((await api.get(`/v1/runs/${acmeRun}`, { token: OPS })).status).toBe(200);
      expect((await api.get(`/v1/runs/${globexRun}/recording`, { token: OPS })).status).toBe(200);
      expect((await api.get('/v1/runs?tenant=globex', { token: OPS })).body.items.map((r: any) => r.id)).toContain(globexRun);
      const decided = await api.post(`/v1/reviews/${acmeReview}`, { decision: 'approve', comment: 'ok' }, { token: OPS });
      expect(decided.status).toBe(200);
      expect((await ts.call('l1', acmeRun)).body.args).toEqual({ target: 'prod' });
      const run = await api.settled(acmeRun, ACME);
      expect(run.status).toBe('succeeded');
    });

    it("an operator may submit for any tenant; without one, the key's tenant", async () => {
      const forAcme = await api.post('/v1/runs', { calls: [{ id: 'e', tool: 'echo' }], tenant: 'acme', waitMs: 10_000 }, { token: OPS });
      expect(forAcme.status).toBe(201);
      expect(forAcme.body.tenant).toBe('acme');
      expect((await api.get(`/v1/runs/${forAcme.body.id}`, { token: ACME })).status).toBe(200);
      const own = await api.post('/v1/runs', { calls: [{ id: 'e', tool: 'echo' }], waitMs: 10_000 }, { token: OPS });
      expect(own.body.tenant).toBe('ops');
    });

    it("an agent cancels its own run, not another tenant's", async () => {
      const r = await api.post('/v1/runs', { calls: [{ id: 'h', tool: 'work', args: { hold: true } }] }, { token: GLOBEX });
      const held = await ts.call('h', r.body.id);
      expectError(await api.post(`/v1/runs/${r.body.id}/cancel`, undefined, { token: ACME }), 404, 'not_found');
      expect(held.answered).toBe(false);
      expect((await api.post(`/v1/runs/${r.body.id}/cancel`, undefined, { token: GLOBEX })).status).toBe(202);
      await held.aborted;
      expect((await api.settled(r.body.id, GLOBEX)).status).toBe('cancelled');
    });

    it("a replan of another tenant's needs_replan run is a 404, and the owner can replan it", async () => {
      const r = await api.post(
        '/v1/runs',
        { calls: [{ id: 'f', tool: 'work', args: { status: 400 } }], failure: 'replan', waitMs: 10_000 },
        { token: ACME },
      );
      expect(r.body.status).toBe('needs_replan');
      expectError(
        await api.post(`/v1/runs/${r.body.id}/replan`, { calls: [{ id: 'g', tool: 'echo' }] }, { token: GLOBEX }),
        404,
        'not_found',
      );
      expect((await api.get(`/v1/runs/${r.body.id}`, { token: ACME })).body.status).toBe('needs_replan');
      const ok = await api.post(`/v1/runs/${r.body.id}/replan`, { calls: [{ id: 'g', tool: 'echo' }] }, { token: ACME });
      expect(ok.status).toBe(202);
    });

    it('a pending review of another tenant is not decidable through an operator-less path; an unknown review is a 404 for operators', async () => {
      expectError(await api.post('/v1/reviews/rev_nope', { decision: 'approve' }, { token: OPS }), 404, 'not_found');
    });
  });
  describe('priority (DESIGN §4)', () => {
    it('a key with maxPriority may not submit a more urgent run (403 priority_not_allowed); the run view shows its priority', async () => {
      const capped = 'agent-capped-key';
      const denied = await api.post('/v1/runs', { calls: [{ id: 'e', tool: 'echo' }], priority: 1 }, { token: capped });
      expectError(denied, 403, 'priority_not_allowed');
      expect(denied.body.error.details).toEqual({ maxPriority: 2, priority: 1 });
      const ok = await api.post('/v1/runs', { calls: [{ id: 'e', tool: 'echo' }], priority: 2, waitMs: 10_000 }, { token: capped });
      expect(ok.status).toBe(201);
      expect(ok.body.priority).toBe(2);
      expect((await api.get(`/v1/runs/${ok.body.id}`, { token: capped })).body.priority).toBe(2);
      // A key without a cap may submit any priority; a priority out of 1..5 is a 400.
      expect(
        (await api.post('/v1/runs', { calls: [{ id: 'e', tool: 'echo' }], priority: 1, waitMs: 10_000 }, { token: ACME })).status,
      ).toBe(201);
      expectError(await api.post('/v1/runs', { calls: [{ id: 'e', tool: 'echo' }], priority: 6 }, { token: ACME }), 400, 'invalid_request');
      // No priority given: the view says none (3).
      const plain = await api.post('/v1/runs', { calls: [{ id: 'e', tool: 'echo' }], waitMs: 10_000 }, { token: capped });
      expect(plain.body.priority).toBeUndefined();
    });
  });
});

describe('open mode (no keys)', () => {
  afterEach(closeAll);

  it('acts as an operator: no key needed, the body names the tenant (else default), reviews can be decided', async () => {
    const { api } = await startToolApi();
    const plain = await api.post('/v1/runs', { calls: [{ id: 'e', tool: 'echo' }], waitMs: 10_000 });
    expect(plain.status).toBe(201);
    expect(plain.body.tenant).toBe('default');
    const named = await api.post('/v1/runs', { calls: [{ id: 'l', tool: 'launch', args: { target: 't' } }], tenant: 'acme' });
    expect(named.body.tenant).toBe('acme');
    const list = await api.get('/v1/runs');
    expect(new Set(list.body.items.map((r: any) => r.tenant))).toEqual(new Set(['default', 'acme']));
    const reviews = await api.get('/v1/reviews');
    expect(reviews.body.items).toHaveLength(1);
    const decided = await api.post(`/v1/reviews/${reviews.body.items[0].id}`, { decision: 'approve' });
    expect(decided.status).toBe(200);
    expect((await api.settled(named.body.id)).status).toBe('succeeded');
    // A stray Authorization header changes nothing.
    expect((await api.get('/v1/runs', { token: 'whatever' })).status).toBe(200);
  });
});

describe('toolgraph serve', () => {
  it('refuses --host 0.0.0.0 with no auth.keys: exit 2 and a message, no stack trace', async () => {
    const io = captureIo();
    const code = await main(['serve', '--host', '0.0.0.0', '--port', '0'], io);
    expect(code).toBe(2);
    expect(io.stderr).toMatch(/0\.0\.0\.0/);
    expect(io.stderr).toMatch(/auth\.keys/);
    expect(io.stderr).not.toMatch(/\n\s+at /);
  });

  it.each([['::'], ['192.168.1.10']])('refuses --host %s with no keys too', async (host) => {
    const io = captureIo();
    expect(await main(['serve', '--host', host, '--port', '0'], io)).toBe(2);
    expect(io.stderr).toContain(host);
  });

  it('a bad --port is exit 2 with a message', async () => {
    const io = captureIo();
    expect(await main(['serve', '--port', 'abc'], io)).toBe(2);
    expect(io.stderr).toMatch(/--port/);
  });
});
