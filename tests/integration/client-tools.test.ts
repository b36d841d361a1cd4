/**
 * Client-run tools over HTTP (DESIGN §17): calls of `kind: client` tools wait for their agent, which
 * finds them in `GET /v1/runs/{id}/work` (or in `call.started`'s `data.dispatch`) and answers with
 * `POST /v1/runs/{id}/calls/{callId}/result`. Ordering, retries, timeouts, cancel and size caps apply
 * to them as to any call; a token no attempt waits for is a 409 that changes nothing.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkRecording } from '../../src/replay/check.js';
import { parseRecording } from '../../src/replay/schema.js';
import { closeAll, expectApiError, startApi, type Api } from '../helpers/server.js';

afterEach(closeAll);

const YAML = `
tools:
  - name: write_file
    input: { type: object, properties: { path: { type: string }, content: { type: string } }, required: [path] }
    reads: []
    writes: ["file:{path}"]
    executor: { kind: client }
  - name: read_file
    input: { type: object, properties: { path: { type: string } }, required: [path] }
    reads: ["file:{path}"]
    writes: []
    risk: read
    idempotent: true
    executor: { kind: client }
  - name: flaky
    reads: []
    writes: []
    idempotent: true
    retry: { attempts: 2, backoffMs: 10, maxBackoffMs: 10 }
    executor: { kind: client }
  - name: slow
    reads: []
    writes: []
    timeoutMs: 300
    executor: { kind: client }
  - name: small
    reads: []
    writes: []
    maxOutputBytes: 100
    executor: { kind: client }
  - name: one_at_a_time
    reads: []
    writes: []
    concurrency: 1
    executor: { kind: client }
  - name: deploy
    reads: []
    writes: []
    risk: dangerous
    executor: { kind: client }
  - name: echo
    reads: []
    writes: []
    idempotent: true
    executor: { kind: builtin, name: echo }
policy:
  rules:
    - match: { risk: dangerous }
      review: true
defaults: { timeoutMs: 20000, failure: partial }
`;

interface Work {
  runId: string;
  callId: string;
  tool: string;
  args: Record<string, unknown>;
  attempt: number;
  token: string;
}

async function work(api: Api, runId: string, waitMs = 10_000): Promise<Work[]> {
  const res = await api.get(`/v1/runs/${runId}/work?waitMs=${waitMs}`);
  expect(res.status, res.text).toBe(200);
  return res.body.items as Work[];
}

/** The work list once it holds `callId` (attempt `attempt` or later). */
async function waitingFor(api: Api, runId: string, callId: string, attempt = 1): Promise<Work> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const item = (await work(api, runId)).find((w) => w.callId === callId && w.attempt >= attempt);
    if (item) return item;
    if (Date.now() > deadline) throw new Error(`${callId} (attempt ${attempt}) never waited for its agent`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function post(api: Api, w: Pick<Work, 'runId' | 'callId'>, body: unknown) {
  return api.post(`/v1/runs/${w.runId}/calls/${w.callId}/result`, body);
}

async function events(api: Api, runId: string): Promise<any[]> {
  const stored = await api.store.events(runId);
  return stored as any[];
}

describe('client tools', () => {
  it('lists the calls that wait for their agent; a read of a file waits for the write of it, then sees its content', async () => {
    const api = await startApi({ yaml: YAML });
    const submitted = await api.post('/v1/runs', {
      calls: [
        { id: 'w', tool: 'write_file', args: { path: '/x', content: 'hello' } },
        { id: 'rx', tool: 'read_file', args: { path: '/x' } },
        { id: 'ry', tool: 'read_file', args: { path: '/y' } },
      ],
    });
    expect(submitted.status).toBe(201);
    const runId = submitted.body.id as string;
    await waitingFor(api, runId, 'w');
    const first = await waitingFor(api, runId, 'ry');
    const items = await work(api, runId, 0);
    // The write and the read of /y wait for their agent, in call order; the read of /x is not dispatched.
    expect(items.map((w) => w.callId)).toEqual(['w', 'ry']);
    expect(items[0]).toEqual({
      runId,
      callId: 'w',
      tool: 'write_file',
      args: { path: '/x', content: 'hello' },
      attempt: 1,
      token: expect.any(String),
    });
    expect(items[0]?.token).not.toBe(items[1]?.token);
    expect(items[0]?.token.length).toBeGreaterThanOrEqual(20);
    // Each call.started carries its attempt's token; the read of /x has not started.
    const started = (await events(api, runId)).filter((e) => e.type === 'call.started');
    expect(started.map((e) => [e.callId, e.data.dispatch?.token])).toEqual([
      ['w', items[0]?.token],
      ['ry', items[1]?.token],
    ]);
    expect((await api.get(`/v1/runs/${runId}`)).body.calls[1].status).toBe('pending');

    expect((await post(api, first, { token: first.token, output: { content: null } })).status).toBe(202);
    const w = items[0] as Work;
    const taken = await post(api, w, { token: w.token, output: { bytes: 5 } });
    expect(taken.status).toBe(202);
    expect(taken.body).toEqual({ runId, callId: 'w', attempt: 1 });
    const rx = await waitingFor(api, runId, 'rx');
    expect(rx.args).toEqual({ path: '/x' });
    const log = await events(api, runId);
    const at = (type: string, callId: string) => log.findIndex((e) => e.type === type && e.callId === callId);
    expect(at('call.succeeded', 'w')).toBeGreaterThan(-1);
    expect(at('call.started', 'rx')).toBeGreaterThan(at('call.succeeded', 'w'));
    expect((await post(api, rx, { token: rx.token, output: { content: 'hello' } })).status).toBe(202);
    const run = await api.settled(runId);
    expect(run.status).toBe('succeeded');
    expect(run.calls.map((c: any) => [c.id, c.status, c.output])).toEqual([
      ['w', 'succeeded', { bytes: 5 }],
      ['rx', 'succeeded', { content: 'hello' }],
      ['ry', 'succeeded', { content: null }],
    ]);
    expect(await work(api, runId, 0)).toEqual([]);
  });

  it('a long poll of the work list returns once a call waits, and at once when the run has ended', async () => {
    const api = await startApi({ yaml: YAML });
    const runId = (
      await api.post('/v1/runs', {
        calls: [
          { id: 'a', tool: 'echo', args: {} },
          { id: 'b', tool: 'flaky', args: { v: '${a.output}' } },
        ],
      })
    ).body.id as string;
    const items = await work(api, runId, 10_000);
    expect(items.map((w) => [w.callId, w.args])).toEqual([['b', { v: {} }]]);
    expect((await post(api, items[0] as Work, { token: items[0]?.token, output: 1 })).status).toBe(202);
    await api.settled(runId);
    const t0 = Date.now();
    expect(await work(api, runId, 10_000)).toEqual([]);
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it('a wrong token, an earlier attempt’s and a late one are 409 stale_token and change nothing', async () => {
    const api = await startApi({ yaml: YAML });
    const runId = (await api.post('/v1/runs', { calls: [{ id: 'f', tool: 'flaky', args: {} }] })).body.id as string;
    const one = await waitingFor(api, runId, 'f', 1);
    expectApiError(await post(api, one, { token: 'not-the-token', output: 1 }), 409, 'stale_token');
    expect((await work(api, runId, 0)).map((w) => [w.callId, w.attempt, w.token])).toEqual([['f', 1, one.token]]);
    // A retryable error: the tool retries, with a new token.
    expect((await post(api, one, { token: one.token, error: { message: 'busy', retryable: true } })).status).toBe(202);
    const two = await waitingFor(api, runId, 'f', 2);
    expect(two.token).not.toBe(one.token);
    expectApiError(await post(api, one, { token: one.token, output: 'from attempt 1' }), 409, 'stale_token');
    expect((await work(api, runId, 0)).map((w) => w.attempt)).toEqual([2]);
    expect((await post(api, two, { token: two.token, output: 'from attempt 2' })).status).toBe(202);
    expectApiError(await post(api, two, { token: two.token, output: 'again' }), 409, 'stale_token');
    const run = await api.settled(runId);
    expect(run.calls[0]).toMatchObject({ status: 'succeeded', attempts: 2, output: 'from attempt 2' });
    const retry = (await events(api, runId)).find((e) => e.type === 'call.retry_scheduled');
    expect(retry.data.error).toMatchObject({ code: 'tool_error', message: 'busy' });
  });

  it('an error result fails the call with tool_error (not retried unless it says retryable)', async () => {
    const api = await startApi({ yaml: YAML });
    const runId = (await api.post('/v1/runs', { calls: [{ id: 'f', tool: 'flaky', args: {} }] })).body.id as string;
    const one = await waitingFor(api, runId, 'f');
    expect((await post(api, one, { token: one.token, error: { message: 'no such file' } })).status).toBe(202);
    const run = await api.settled(runId);
    expect(run.status).toBe('failed');
    expect(run.calls[0]).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'tool_error', message: 'no such file' } });
  });

  it('no answer within timeoutMs times the attempt out; the late answer is 409', async () => {
    const api = await startApi({ yaml: YAML });
    const runId = (await api.post('/v1/runs', { calls: [{ id: 's', tool: 'slow', args: {} }] })).body.id as string;
    const item = await waitingFor(api, runId, 's');
    const run = await api.settled(runId);
    // Not idempotent: the agent may have acted on it, so the outcome is unknown (DESIGN §4), its cause the timeout.
    expect(run.calls[0]).toMatchObject({ status: 'failed', error: { code: 'outcome_unknown', details: { cause: 'timeout' } } });
    expectApiError(await post(api, item, { token: item.token, output: 'late' }), 409, 'stale_token');
    expect((await api.get(`/v1/runs/${runId}`)).body.calls[0].status).toBe('failed');
  });

  it('a cancel ends the waiting call; its token is then stale', async () => {
    const api = await startApi({ yaml: YAML });
    const runId = (await api.post('/v1/runs', { calls: [{ id: 'w', tool: 'write_file', args: { path: '/a' } }] })).body.id as string;
    const item = await waitingFor(api, runId, 'w');
    expect((await api.post(`/v1/runs/${runId}/cancel`)).status).toBe(202);
    const run = await api.settled(runId);
    expect(run.status).toBe('cancelled');
    expect(run.calls[0].status).toBe('cancelled');
    expect(await work(api, runId, 0)).toEqual([]);
    expectApiError(await post(api, item, { token: item.token, output: 'after cancel' }), 409, 'stale_token');
  });

  it('an output past maxOutputBytes fails the call output_too_large, like any output', async () => {
    const api = await startApi({ yaml: YAML });
    const runId = (await api.post('/v1/runs', { calls: [{ id: 'b', tool: 'small', args: {} }] })).body.id as string;
    const item = await waitingFor(api, runId, 'b');
    expect((await post(api, item, { token: item.token, output: 'x'.repeat(500) })).status).toBe(202);
    const run = await api.settled(runId);
    expect(run.calls[0]).toMatchObject({ status: 'failed', error: { code: 'output_too_large' } });
  });

  it('bad bodies are 400s that name the field; unknown calls 404; calls of other tools 409', async () => {
    const api = await startApi({ yaml: YAML });
    const runId = (
      await api.post('/v1/runs', {
        calls: [
          { id: 'w', tool: 'write_file', args: { path: '/a' } },
          { id: 'e', tool: 'echo' },
        ],
      })
    ).body.id as string;
    const item = await waitingFor(api, runId, 'w');
    const bad = async (body: unknown, field: string) => {
      const res = await post(api, item, body);
      expectApiError(res, 400, 'invalid_request');
      expect(res.body.error.message).toContain(field);
    };
    await bad({ output: 1 }, 'token');
    await bad({ token: item.token }, 'output');
    await bad({ token: item.token, output: 1, error: { message: 'x' } }, 'error');
    await bad({ token: item.token, error: { message: 1 } }, 'error.message');
    await bad({ token: item.token, error: { message: 'x', retryable: 'yes' } }, 'error.retryable');
    await bad({ token: item.token, output: 1, extra: true }, 'extra');
    await bad({ token: 'x'.repeat(201), output: 1 }, 'token');
    const nested = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
    for (const depth of [257, 20_000]) {
      const res = await api.request('POST', `/v1/runs/${runId}/calls/w/result`, {
        raw: `{"token":"${item.token}","output":${nested(depth)}}`,
        contentType: 'application/json',
      });
      expectApiError(res, 400, 'invalid_request');
      expect(res.body.error.message).toContain('output');
    }
    expectApiError(await api.get(`/v1/runs/${runId}/work?waitMs=70000`), 400, 'invalid_request');
    expectApiError(await api.get(`/v1/runs/${runId}/work?waitMs=soon`), 400, 'invalid_request');
    expectApiError(await post(api, { runId, callId: 'nope' }, { token: item.token, output: 1 }), 404, 'not_found');
    expectApiError(await post(api, { runId: 'run_none', callId: 'w' }, { token: item.token, output: 1 }), 404, 'not_found');
    expectApiError(await api.get('/v1/runs/run_none/work'), 404, 'not_found');
    expectApiError(await post(api, { runId, callId: 'e' }, { token: item.token, output: 1 }), 409, 'conflict');
    // Nothing of that changed the waiting call.
    expect((await work(api, runId, 0)).map((w) => w.token)).toEqual([item.token]);
    expect((await post(api, item, { token: item.token, output: null })).status).toBe(202);
    expect((await api.settled(runId)).calls[0]).toMatchObject({ status: 'succeeded', output: null });
  });

  it('limits hold for client calls: one of a concurrency-1 tool waits for its agent at a time, in call order', async () => {
    const api = await startApi({ yaml: YAML });
    const calls = ['a', 'b', 'c'].map((id) => ({ id, tool: 'one_at_a_time', args: {} }));
    const runId = (await api.post('/v1/runs', { calls })).body.id as string;
    const seen: string[][] = [];
    for (const id of ['a', 'b', 'c']) {
      const item = await waitingFor(api, runId, id);
      const listed = (await work(api, runId, 0)).map((w) => w.callId);
      seen.push(listed);
      const view = (await api.get(`/v1/runs/${runId}`)).body;
      expect(view.calls.filter((c: any) => c.status === 'running').map((c: any) => c.id)).toEqual([id]);
      expect((await post(api, item, { token: item.token, output: id })).status).toBe(202);
    }
    // Never more than one, and always one (the limit was reached).
    expect(seen).toEqual([['a'], ['b'], ['c']]);
    expect((await api.settled(runId)).status).toBe('succeeded');
  });

  it('a dangerous client tool is dispatched only once its review approves it', async () => {
    const api = await startApi({ yaml: YAML });
    const runId = (await api.post('/v1/runs', { calls: [{ id: 'd', tool: 'deploy', args: { to: 'prod' } }] })).body.id as string;
    const review = await until(async () => (await api.get(`/v1/reviews?runId=${runId}`)).body.items[0]);
    expect(await work(api, runId, 0)).toEqual([]);
    expect((await api.post(`/v1/reviews/${review.id}`, { decision: 'edit', args: { to: 'staging' } })).status).toBe(200);
    const item = await waitingFor(api, runId, 'd');
    expect(item.args).toEqual({ to: 'staging' });
    expect((await post(api, item, { token: item.token, output: 'deployed' })).status).toBe(202);
    expect((await api.settled(runId)).calls[0]).toMatchObject({ status: 'succeeded', output: 'deployed' });
  });

  it('a run of client calls is recorded with its outcomes and replays exactly', async () => {
    const api = await startApi({ yaml: YAML });
    const runId = (
      await api.post('/v1/runs', {
        calls: [
          { id: 'w', tool: 'write_file', args: { path: '/x', content: 'c' } },
          { id: 'r', tool: 'read_file', args: { path: '/x' } },
          { id: 'f', tool: 'flaky', args: {} },
        ],
      })
    ).body.id as string;
    const f1 = await waitingFor(api, runId, 'f');
    expect((await post(api, f1, { token: f1.token, error: { message: 'busy', retryable: true } })).status).toBe(202);
    const f2 = await waitingFor(api, runId, 'f', 2);
    expect((await post(api, f2, { token: f2.token, output: 'f' })).status).toBe(202);
    const w = await waitingFor(api, runId, 'w');
    expect((await api.get('/metrics')).text).toMatch(/^toolgraph_client_calls_waiting 1$/m);
    expect((await post(api, w, { token: w.token, output: 'w' })).status).toBe(202);
    const r = await waitingFor(api, runId, 'r');
    expect((await post(api, r, { token: r.token, output: 'c' })).status).toBe(202);
    await api.settled(runId);
    const recording = parseRecording((await api.get(`/v1/runs/${runId}/recording`)).body, 'recording');
    expect(recording.config.tools.find((t) => t.name === 'read_file')?.executor).toEqual({ kind: 'client' });
    expect(recording.attempts.map((a) => [a.callId, a.attempt, a.ok])).toEqual(
      expect.arrayContaining([
        ['f', 1, false],
        ['f', 2, true],
        ['w', 1, true],
        ['r', 1, true],
      ]),
    );
    const result = checkRecording(recording, 'recording');
    expect(result.divergences).toEqual([]);
    expect(result.ok).toBe(true);
  });
});

async function until<T>(probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('client tools and hooks', () => {
  it('a before_call hook’s args are the ones the agent gets, a denied call is never dispatched, an after_call hook sees and replaces the agent’s output', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-client-hooks-'));
    writeFileSync(
      path.join(dir, 'guard.mjs'),
      `export default async function guard(req) {
  if (req.on === 'after_call') return req.output === 'secret' ? { output: '[redacted]' } : {};
  if (req.args.path === '/etc') return { decision: 'deny', reason: 'not /etc' };
  return { decision: 'allow', args: { ...req.args, checkedBy: 'guard' } };
}
`,
    );
    const yaml = `
tools:
  - name: write_file
    input: { type: object, properties: { path: { type: string }, checkedBy: { type: string } }, required: [path] }
    reads: []
    writes: ["file:{path}"]
    executor: { kind: client }
hooks:
  - { on: before_call, name: guard, match: { tool: write_file }, module: ./guard.mjs, timeoutMs: 10000 }
  - { on: after_call, name: redact, match: { tool: write_file }, module: ./guard.mjs, timeoutMs: 10000 }
`;
    const api = await startApi({ yaml, dir });
    const runId = (
      await api.post('/v1/runs', {
        calls: [
          { id: 'ok', tool: 'write_file', args: { path: '/a' } },
          { id: 'no', tool: 'write_file', args: { path: '/etc' } },
        ],
      })
    ).body.id as string;
    const item = await waitingFor(api, runId, 'ok');
    expect(item.args).toEqual({ path: '/a', checkedBy: 'guard' });
    expect((await work(api, runId, 0)).map((w) => w.callId)).toEqual(['ok']);
    expect((await post(api, item, { token: item.token, output: 'secret' })).status).toBe(202);
    const run = await api.settled(runId);
    expect(run.calls.map((c: any) => [c.id, c.status, c.output, c.error?.code ?? null])).toEqual([
      ['ok', 'succeeded', '[redacted]', null],
      ['no', 'failed', null, 'hook_denied'],
    ]);
    expect((await events(api, runId)).filter((e) => e.type === 'call.started').map((e) => e.callId)).toEqual(['ok']);
  });
});
