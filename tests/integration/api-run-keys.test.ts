/**
 * One run per key (DESIGN §4) on one process: `concurrencyKey` + `onConcurrent` on `POST /v1/runs`,
 * validated (4xx naming the field), `reject` (409 concurrent_run naming the run that holds the key) and
 * `cancel_running` (the earlier run's running call aborted, its calls `superseded` naming the new run,
 * the new run started at once). Keys are per tenant; an ended run holds nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { closeAll, expectApiError, startToolApi, type Api } from '../helpers/server.js';
import type { ToolServer } from '../helpers/toolserver.js';

let ts: ToolServer;
let api: Api;

beforeEach(async () => {
  ({ ts, api } = await startToolApi());
});

afterEach(closeAll);

/** Submits a run whose one `work` call is held by the tool server until released. */
async function heldRun(key: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'work', args: { hold: true } }], concurrencyKey: key, ...extra });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  await ts.call('a', res.body.id);
  return res.body.id;
}

describe('concurrencyKey validation', () => {
  it.each([
    [{ concurrencyKey: '' }, 'concurrencyKey'],
    [{ concurrencyKey: 'k'.repeat(201) }, 'concurrencyKey'],
    [{ concurrencyKey: 7 }, 'concurrencyKey'],
    [{ concurrencyKey: 'k', onConcurrent: 'later' }, 'onConcurrent'],
    [{ onConcurrent: 'reject' }, 'onConcurrent'],
    [{ open: true, concurrencyKey: 'k' }, 'onConcurrent'],
  ])('%j is a 400 naming the field', async (fields, name) => {
    const res = await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'echo', args: {} }], ...fields });
    expectApiError(res, 400, 'invalid_request');
    expect(res.body.error.message).toContain(name);
  });

  it('a key of 200 characters is taken', async () => {
    const res = await api.post('/v1/runs', {
      calls: [{ id: 'a', tool: 'echo', args: {} }],
      concurrencyKey: 'k'.repeat(200),
      onConcurrent: 'reject',
      waitMs: 10_000,
    });
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('succeeded');
  });
});

describe('onConcurrent: queue (the default)', () => {
  it('the new run stays queued, its calls not started, until the earlier runs of the key have ended; then it runs', async () => {
    const first = await heldRun('conv-1');
    const second = await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'work', args: { hold: true } }], concurrencyKey: 'conv-1' });
    expect(second.status).toBe(201);
    expect(second.body.status).toBe('queued');
    const third = await api.post('/v1/runs', {
      calls: [{ id: 'a', tool: 'echo', args: {} }],
      concurrencyKey: 'conv-1',
      onConcurrent: 'queue',
    });
    expect(third.body.status).toBe('queued');
    // Another key is not held.
    const other = await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'echo', args: {} }], concurrencyKey: 'conv-2', waitMs: 10_000 });
    expect(other.body.status).toBe('succeeded');
    const queued = await api.get('/v1/runs?status=queued');
    expect(queued.body.items.map((r: { id: string }) => r.id).sort()).toEqual([second.body.id, third.body.id].sort());
    expect((await api.get(`/v1/runs/${second.body.id}`)).body.calls[0].status).toBe('pending');
    expect(ts.seen('a', second.body.id)).toHaveLength(0);

    ts.call('a', first).then((r) => r.respond());
    expect((await api.settled(first)).status).toBe('succeeded');
    // The second starts (the third still waits for it), and runs once the first has ended.
    const started = await ts.call('a', second.body.id);
    expect((await api.get(`/v1/runs/${third.body.id}`)).body.status).toBe('queued');
    started.respond();
    expect((await api.settled(second.body.id)).status).toBe('succeeded');
    expect((await api.settled(third.body.id)).status).toBe('succeeded');
    // Each started only after the one before it had ended.
    const s1 = Date.parse((await api.get(`/v1/runs/${second.body.id}`)).body.calls[0].startedAt);
    const e0 = Date.parse((await api.get(`/v1/runs/${first}`)).body.calls[0].endedAt);
    expect(s1).toBeGreaterThanOrEqual(e0);
  });

  it('a queued run can be cancelled: its calls end cancelled without running, and the next one is not held by it', async () => {
    const first = await heldRun('conv-1');
    const second = await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'work', args: {} }], concurrencyKey: 'conv-1' });
    expect(second.body.status).toBe('queued');
    expect((await api.post(`/v1/runs/${second.body.id}/cancel`)).status).toBe(202);
    const cancelled = await api.settled(second.body.id);
    expect(cancelled).toMatchObject({ status: 'cancelled', calls: [{ status: 'cancelled' }] });
    expect(ts.seen('a', second.body.id)).toHaveLength(0);
    ts.release();
    expect((await api.settled(first)).status).toBe('succeeded');
  });
});

describe('onConcurrent: reject', () => {
  it('answers 409 concurrent_run naming the run that holds the key; another key, tenant or an ended run does not hold it', async () => {
    const first = await heldRun('conv-1', { onConcurrent: 'reject' });
    const refused = await api.post('/v1/runs', {
      calls: [{ id: 'b', tool: 'echo', args: {} }],
      concurrencyKey: 'conv-1',
      onConcurrent: 'reject',
    });
    expectApiError(refused, 409, 'concurrent_run');
    expect(refused.body.error.details).toEqual({ runId: first, concurrencyKey: 'conv-1' });
    expect(refused.body.error.message).toContain(first);
    // Nothing was created for the refused submission.
    expect((await api.get('/v1/runs')).body.items.map((r: { id: string }) => r.id)).toEqual([first]);

    const otherKey = await api.post('/v1/runs', {
      calls: [{ id: 'b', tool: 'echo', args: {} }],
      concurrencyKey: 'conv-2',
      onConcurrent: 'reject',
      waitMs: 10_000,
    });
    expect(otherKey.status).toBe(201);
    const otherTenant = await api.post('/v1/runs', {
      calls: [{ id: 'b', tool: 'echo', args: {} }],
      tenant: 'globex',
      concurrencyKey: 'conv-1',
      onConcurrent: 'reject',
      waitMs: 10_000,
    });
    expect(otherTenant.status).toBe(201);

    ts.release();
    expect((await api.settled(first)).status).toBe('succeeded');
    const after = await api.post('/v1/runs', {
      calls: [{ id: 'b', tool: 'echo', args: {} }],
      concurrencyKey: 'conv-1',
      onConcurrent: 'reject',
      waitMs: 10_000,
    });
    expect(after.status).toBe(201);
    expect(after.body.status).toBe('succeeded');
  });

  it('two submissions of one key at the same instant: one is created, the other refused', async () => {
    const body = { calls: [{ id: 'a', tool: 'work', args: { hold: true } }], concurrencyKey: 'race', onConcurrent: 'reject' };
    const answers = await Promise.all([api.post('/v1/runs', body), api.post('/v1/runs', body)]);
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
    ts.release();
  });
});

describe('onConcurrent: cancel_running', () => {
  it('cancels the earlier run (its running call aborted, superseded naming the new run) and starts the new one at once', async () => {
    const first = await heldRun('conv-1', { onConcurrent: 'cancel_running' });
    const held = ts.seen('a', first)[0];
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'a', tool: 'work', args: { hold: true } },
        { id: 'b', tool: 'echo', args: { from: '${a.output}' } },
      ],
      concurrencyKey: 'conv-1',
      onConcurrent: 'cancel_running',
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const second = res.body.id as string;
    // The new run's call reaches the tool while nothing of the first runs any more.
    await ts.call('a', second);
    await held?.aborted;
    const old = await api.settled(first);
    expect(old.status).toBe('cancelled');
    expect(old.calls[0]).toMatchObject({ status: 'cancelled', error: { code: 'superseded', details: { runId: second } } });
    expect(old.calls[0].error.message).toContain(second);
    ts.release();
    expect((await api.settled(second)).status).toBe('succeeded');
  });

  it('with no earlier run it just runs; runs of other keys are left alone', async () => {
    const other = await heldRun('conv-2', { onConcurrent: 'cancel_running' });
    const res = await api.post('/v1/runs', {
      calls: [{ id: 'b', tool: 'echo', args: {} }],
      concurrencyKey: 'conv-1',
      onConcurrent: 'cancel_running',
      waitMs: 10_000,
    });
    expect(res.body.status).toBe('succeeded');
    expect((await api.get(`/v1/runs/${other}`)).body.status).toBe('running');
    ts.release();
  });
});
