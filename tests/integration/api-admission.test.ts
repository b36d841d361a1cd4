/**
 * Admission over HTTP (DESIGN §4, §7): `Idempotency-Key` repeats give the same run (and the tools run
 * once), per tenant; `limits.maxActiveRunsPerTenant` is a 429 with Retry-After for that tenant only;
 * `limits.maxCallsPerRun` is a 413.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, reopen, startToolApi, type Api } from '../helpers/server.js';
import type { ToolServer } from '../helpers/toolserver.js';

let ts: ToolServer;

afterEach(closeAll);

async function start(limits = '{}'): Promise<Api> {
  let api: Api;
  ({ ts, api } = await startToolApi({ limits }));
  return api;
}

describe('Idempotency-Key', () => {
  it('a repeat by the same tenant is a 200 with the same run, and the tool server sees each call once', async () => {
    const api = await start();
    const body = {
      calls: [
        { id: 'c1', tool: 'work', args: { n: 1 } },
        { id: 'c2', tool: 'work', args: { n: 2 } },
      ],
      tenant: 'acme',
      waitMs: 10_000,
    };
    const headers = { 'idempotency-key': 'req-42' };
    const first = await api.post('/v1/runs', body, { headers });
    expect(first.status).toBe(201);
    expect(first.body.status).toBe('succeeded');
    const second = await api.post('/v1/runs', body, { headers });
    expect(second.status).toBe(200);
    expect(second.body.id).toBe(first.body.id);
    expect(second.body).toEqual(first.body);
    expect(ts.requests.map((r) => r.body.callId).sort()).toEqual(['c1', 'c2']);
    expect((await api.get('/v1/runs')).body.items).toHaveLength(1);
  });

  it('a repeat while the run is still running is the same run; the held call is not sent again', async () => {
    const api = await start();
    const body = { calls: [{ id: 'c1', tool: 'work', args: { hold: true } }] };
    const headers = { 'idempotency-key': 'k1' };
    const first = await api.post('/v1/runs', body, { headers });
    expect(first.status).toBe(201);
    const held = await ts.call('c1', first.body.id);
    const again = await Promise.all([api.post('/v1/runs', body, { headers }), api.post('/v1/runs', body, { headers })]);
    for (const r of again) {
      expect(r.status).toBe(200);
      expect(r.body.id).toBe(first.body.id);
    }
    held.respond();
    expect((await api.settled(first.body.id)).status).toBe('succeeded');
    expect(ts.seen('c1')).toHaveLength(1);
  });

  it('concurrent submissions with one key make one run (one 201, the rest 200 with its id)', async () => {
    const api = await start();
    const body = { calls: [{ id: 'c1', tool: 'work', args: { n: 1 } }] };
    const results = await Promise.all(
      Array.from({ length: 8 }, () => api.post('/v1/runs', body, { headers: { 'idempotency-key': 'burst' } })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    const runId = results[0]!.body.id as string;
    expect((await api.settled(runId)).status).toBe('succeeded');
    expect(ts.seen('c1')).toHaveLength(1);
  });

  it('a repeat with waitMs waits for the existing run', async () => {
    const api = await start();
    const body = { calls: [{ id: 'c1', tool: 'work', args: { hold: true } }] };
    const headers = { 'idempotency-key': 'k-wait' };
    const first = await api.post('/v1/runs', body, { headers });
    const held = await ts.call('c1', first.body.id);
    const waiting = api.post('/v1/runs', { ...body, waitMs: 10_000 }, { headers });
    held.respond();
    const second = await waiting;
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ id: first.body.id, status: 'succeeded' });
  });

  it('another tenant with the same key gets a new run; another key too', async () => {
    const api = await start();
    const body = (tenant: string) => ({ calls: [{ id: 'c1', tool: 'work' }], tenant, waitMs: 10_000 });
    const a = await api.post('/v1/runs', body('acme'), { headers: { 'idempotency-key': 'same' } });
    const b = await api.post('/v1/runs', body('globex'), { headers: { 'idempotency-key': 'same' } });
    const c = await api.post('/v1/runs', body('acme'), { headers: { 'idempotency-key': 'other' } });
    expect([a.status, b.status, c.status]).toEqual([201, 201, 201]);
    expect(new Set([a.body.id, b.body.id, c.body.id]).size).toBe(3);
    expect(b.body.tenant).toBe('globex');
    expect(ts.seen('c1')).toHaveLength(3);
  });

  it('a key survives a restart (it is in the SQLite file)', async () => {
    const api = await start();
    const body = { calls: [{ id: 'c1', tool: 'work' }], waitMs: 10_000 };
    const first = await api.post('/v1/runs', body, { headers: { 'idempotency-key': 'durable' } });
    expect(first.status).toBe(201);
    const second = await reopen(api);
    try {
      const res = await second.app.inject({
        method: 'POST',
        url: '/v1/runs',
        headers: { 'idempotency-key': 'durable', 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      expect(res.statusCode).toBe(200);
      expect(res.json().id).toBe(first.body.id);
    } finally {
      await second.close();
    }
    expect(ts.seen('c1')).toHaveLength(1);
  });

  it('an empty or over-long key is a 400', async () => {
    const api = await start();
    const body = { calls: [{ id: 'c1', tool: 'echo' }] };
    const long = await api.post('/v1/runs', body, { headers: { 'idempotency-key': 'k'.repeat(256) } });
    expect(long.status).toBe(400);
    expect(long.body.error.code).toBe('invalid_request');
    const empty = await api.post('/v1/runs', body, { headers: { 'idempotency-key': '' } });
    expect(empty.status).toBe(400);
    expect(empty.body.error.code).toBe('invalid_request');
  });
});

describe('limits.maxActiveRunsPerTenant', () => {
  it('429 with Retry-After once the tenant has that many active runs; other tenants are not affected; room frees when a run ends', async () => {
    const api = await start('{ maxActiveRunsPerTenant: 2 }');
    const held = (tenant: string) => api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'work', args: { hold: true } }], tenant });
    const r1 = await held('acme');
    const r2 = await held('acme');
    expect([r1.status, r2.status]).toEqual([201, 201]);
    await ts.call('c1', r1.body.id);
    await ts.call('c1', r2.body.id);

    const r3 = await held('acme');
    expect(r3.status).toBe(429);
    expect(r3.body.error).toMatchObject({ code: 'too_many_runs', message: expect.stringContaining('acme') });
    const retryAfter = r3.headers.get('retry-after');
    expect(retryAfter).toMatch(/^\d+$/);
    expect(Number(retryAfter)).toBeGreaterThan(0);
    // Nothing was created for the refused run.
    expect((await api.get('/v1/runs?tenant=acme')).body.items).toHaveLength(2);

    const other = await held('globex');
    expect(other.status).toBe(201);

    // One of acme's runs ends: acme has room again.
    (await ts.call('c1', r1.body.id)).respond();
    expect((await api.settled(r1.body.id)).status).toBe('succeeded');
    const r4 = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'echo' }], tenant: 'acme', waitMs: 10_000 });
    expect(r4.status).toBe(201);
    ts.release();
  });

  it('concurrent submissions never exceed the cap: exactly cap are admitted', async () => {
    const api = await start('{ maxActiveRunsPerTenant: 2 }');
    const results = await Promise.all(
      Array.from({ length: 6 }, () => api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'work', args: { hold: true } }], tenant: 'acme' })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 429, 429, 429, 429]);
    expect((await api.get('/v1/runs?tenant=acme')).body.items).toHaveLength(2);
    for (const r of results.filter((x) => x.status === 201)) await ts.call('c1', r.body.id);
    ts.release();
  });

  it('an idempotent repeat of an admitted run is a 200 even at the cap', async () => {
    const api = await start('{ maxActiveRunsPerTenant: 1 }');
    const body = { calls: [{ id: 'c1', tool: 'work', args: { hold: true } }] };
    const first = await api.post('/v1/runs', body, { headers: { 'idempotency-key': 'k' } });
    expect(first.status).toBe(201);
    await ts.call('c1', first.body.id);
    const again = await api.post('/v1/runs', body, { headers: { 'idempotency-key': 'k' } });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    expect((await api.post('/v1/runs', body)).status).toBe(429);
    ts.release();
  });

  it('POST /v1/tools/{name}/invoke counts against the same cap', async () => {
    const api = await start('{ maxActiveRunsPerTenant: 1 }');
    const first = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'work', args: { hold: true } }] });
    await ts.call('c1', first.body.id);
    const res = await api.post('/v1/tools/echo/invoke', { args: {} });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    ts.release();
  });
});

describe('limits.maxCallsPerRun', () => {
  it('a batch beyond it is a 413; at it is accepted', async () => {
    const api = await start('{ maxCallsPerRun: 3 }');
    const calls = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `c${i}`, tool: 'echo' }));
    const over = await api.post('/v1/runs', { calls: calls(4) });
    expect(over.status).toBe(413);
    expect(over.body.error).toMatchObject({ code: 'payload_too_large', message: expect.stringContaining('3') });
    expect((await api.get('/v1/runs')).body.items).toEqual([]);
    const at = await api.post('/v1/runs', { calls: calls(3), waitMs: 10_000 });
    expect(at.status).toBe(201);
    expect(at.body.status).toBe('succeeded');
  });

  it('a replan that would take the run beyond it is a 413', async () => {
    const api = await start('{ maxCallsPerRun: 2 }');
    const run = await api.post('/v1/runs', {
      calls: [{ id: 'c1', tool: 'work', args: { status: 400 } }],
      failure: 'replan',
      waitMs: 10_000,
    });
    expect(run.body.status).toBe('needs_replan');
    const over = await api.post(`/v1/runs/${run.body.id}/replan`, {
      calls: [
        { id: 'r1', tool: 'echo' },
        { id: 'r2', tool: 'echo' },
      ],
    });
    expect(over.status).toBe(413);
    expect(over.body.error.code).toBe('payload_too_large');
    const ok = await api.post(`/v1/runs/${run.body.id}/replan`, { calls: [{ id: 'r1', tool: 'echo' }] });
    expect(ok.status).toBe(202);
  });
});
