// Client-run tools in process (DESIGN §17): the ClientDesk (tokens, timeout, abort), the engine's
// stamping of tokens on starts and `call.started`, and `Engine.answer` as the library offers it.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { RunEvent } from '../../src/core/events.js';
import type { Output } from '../../src/core/scheduler.js';
import type { ToolManifest } from '../../src/core/tool.js';
import { Engine } from '../../src/engine/engine.js';
import { stampDispatch } from '../../src/engine/client-dispatch.js';
import { ClientDesk, dispatchToken } from '../../src/executors/client.js';
import { createExecutors } from '../../src/executors/index.js';
import type { ExecuteRequest } from '../../src/executors/types.js';

const tool: ToolManifest = {
  name: 'cl',
  scope: 'tenant',
  risk: 'read',
  idempotent: false,
  timeoutMs: 5000,
  after: [],
  requires: [],
  executor: { kind: 'client' },
};

function request(token: string | undefined, opts: { signal?: AbortSignal; timeoutMs?: number; attempt?: number } = {}): ExecuteRequest {
  return {
    runId: 'run_1',
    callId: 'c1',
    tool,
    args: {},
    attempt: opts.attempt ?? 1,
    signal: opts.signal ?? new AbortController().signal,
    timeoutMs: opts.timeoutMs ?? 5000,
    ...(token !== undefined ? { dispatch: { token } } : {}),
  };
}

describe('ClientDesk', () => {
  it('takes only the waiting attempt’s token, once', async () => {
    const desk = new ClientDesk();
    const pending = desk.execute(request('tok-1', { attempt: 2 }));
    expect(desk.size).toBe(1);
    expect(desk.answer('run_1', 'c1', 'tok-2', { output: 'x' })).toEqual({ accepted: false });
    expect(desk.answer('run_1', 'c2', 'tok-1', { output: 'x' })).toEqual({ accepted: false });
    expect(desk.answer('run_1', 'c1', 'tok-1', { output: { v: 1 } })).toEqual({ accepted: true, attempt: 2 });
    expect(await pending).toEqual({ ok: true, output: { v: 1 } });
    expect(desk.size).toBe(0);
    expect(desk.answer('run_1', 'c1', 'tok-1', { output: 'again' })).toEqual({ accepted: false });
  });

  it('an answer that comes before the announced attempt runs here is kept for it (once)', async () => {
    const desk = new ClientDesk();
    desk.announce('run_1', 'c1', 1, 'tok');
    expect(desk.answer('run_1', 'c1', 'nope', { output: 'x' })).toEqual({ accepted: false });
    expect(desk.answer('run_1', 'c1', 'tok', { output: 'early' })).toEqual({ accepted: true, attempt: 1 });
    expect(desk.answer('run_1', 'c1', 'tok', { output: 'twice' })).toEqual({ accepted: false });
    expect(await desk.execute(request('tok'))).toEqual({ ok: true, output: 'early' });
    expect(desk.size).toBe(0);
    // Announced attempts of a dropped run are forgotten; ones of other runs stay.
    desk.announce('run_1', 'c1', 1, 'a');
    desk.announce('run_2', 'c1', 1, 'b');
    desk.forgetUnrun('run_1');
    expect(desk.answer('run_1', 'c1', 'a', { output: 1 })).toEqual({ accepted: false });
    expect(desk.size).toBe(1);
    desk.forgetUnrun();
    expect(desk.size).toBe(0);
  });

  it('an error answer is a tool_error, retryable only when it says so', async () => {
    const desk = new ClientDesk();
    const a = desk.execute(request('t'));
    desk.answer('run_1', 'c1', 't', { error: { message: 'nope' } });
    expect(await a).toMatchObject({ ok: false, error: { code: 'tool_error', message: 'nope' }, retryable: false });
    const b = desk.execute(request('u'));
    desk.answer('run_1', 'c1', 'u', { error: { message: 'busy', retryable: true } });
    expect(await b).toMatchObject({ ok: false, error: { code: 'tool_error', message: 'busy' }, retryable: true });
  });

  it('times out like any executor, and an abort is cancelled; the token is stale after either', async () => {
    const desk = new ClientDesk();
    expect(await desk.execute(request('t', { timeoutMs: 20 }))).toMatchObject({ ok: false, error: { code: 'timeout' }, retryable: true });
    expect(desk.answer('run_1', 'c1', 't', { output: 1 })).toEqual({ accepted: false });
    const controller = new AbortController();
    const pending = desk.execute(request('u', { signal: controller.signal }));
    controller.abort();
    expect(await pending).toMatchObject({ ok: false, error: { code: 'cancelled' } });
    expect(desk.answer('run_1', 'c1', 'u', { output: 1 })).toEqual({ accepted: false });
    expect(await desk.execute(request(undefined))).toMatchObject({ ok: false, error: { code: 'tool_error' } });
  });

  it('tokens are fresh and URL-safe; an executor of its own refuses a client tool', async () => {
    const tokens = new Set(Array.from({ length: 1000 }, dispatchToken));
    expect(tokens.size).toBe(1000);
    for (const t of tokens) expect(t).toMatch(/^[A-Za-z0-9_-]{24}$/);
    const executors = createExecutors();
    expect(await executors.execute(request('t'))).toMatchObject({
      ok: false,
      error: { code: 'tool_error', message: expect.stringContaining('client tool') },
    });
    await executors.close();
  });
});

describe('stampDispatch', () => {
  it('stamps each start of a client tool and its call.started with the same token, and nothing else', () => {
    const http: ToolManifest = { ...tool, name: 'h', executor: { kind: 'http', url: 'http://127.0.0.1:9/' } };
    const out: Output = {
      events: [
        { type: 'call.started', runId: 'r', callId: 'a', at: 0, data: { attempt: 1, args: {} } },
        { type: 'call.started', runId: 'r', callId: 'b', at: 0, data: { attempt: 3, args: {} } },
      ],
      starts: [
        { kind: 'call', runId: 'r', callId: 'a', index: 0, attempt: 1, tool, args: {}, timeoutMs: 1 },
        { kind: 'call', runId: 'r', callId: 'b', index: 1, attempt: 3, tool: http, args: {}, timeoutMs: 1 },
      ],
      aborts: [],
    };
    let n = 0;
    const announced: string[] = [];
    stampDispatch(out, { token: () => `tok${++n}`, announce: (s) => announced.push(`${s.callId}:${s.dispatch?.token}`) });
    expect(announced).toEqual(['a:tok1']);
    expect(out.starts.map((s) => s.dispatch)).toEqual([{ token: 'tok1' }, undefined]);
    expect(out.events.map((e) => (e.data as { dispatch?: unknown }).dispatch)).toEqual([{ token: 'tok1' }, undefined]);
  });
});

describe('Engine.answer', () => {
  it('a client call waits for its answer in process; its call.started carries the token', async () => {
    const config = parseConfig(
      `
tools:
  - { name: write_file, reads: [], writes: ["file:{path}"], executor: { kind: client } }
  - { name: read_file, reads: ["file:{path}"], writes: [], risk: read, executor: { kind: client } }
`,
      'test.yaml',
    );
    const engine = new Engine({ config });
    const started: RunEvent[] = [];
    let secondStarted = () => {};
    const second$ = new Promise<void>((resolve) => (secondStarted = resolve));
    engine.onEvent((e) => {
      if (e.type !== 'call.started') return;
      started.push(e);
      if (started.length === 2) secondStarted();
    });
    const run = await engine.submit({
      calls: [
        { id: 'w', tool: 'write_file', args: { path: '/x' } },
        { id: 'r', tool: 'read_file', args: { path: '/x' } },
      ],
    });
    expect(started.map((e) => e.callId)).toEqual(['w']);
    const token = ((started[0] as RunEvent).data as { dispatch: { token: string } }).dispatch.token;
    expect(engine.projection(run.id)?.work()).toEqual([
      { runId: run.id, callId: 'w', tool: 'write_file', args: { path: '/x' }, attempt: 1, token },
    ]);
    expect(engine.answer(run.id, 'w', token, { output: 'done' })).toEqual({ accepted: true, attempt: 1 });
    await second$;
    const second = ((started[1] as RunEvent).data as { dispatch: { token: string } }).dispatch.token;
    expect(second).not.toBe(token);
    expect(engine.answer(run.id, 'r', second, { output: 'read' })).toEqual({ accepted: true, attempt: 1 });
    const ended = await engine.wait(run.id);
    expect(ended?.calls.map((c) => [c.id, c.output])).toEqual([
      ['w', 'done'],
      ['r', 'read'],
    ]);
    await engine.close();
  });

  it('with clients: false (toolgraph run: no agent), a client call fails at once, naming its tool', async () => {
    const config = parseConfig('tools:\n  - { name: write_file, reads: [], writes: [], executor: { kind: client } }\n', 'test.yaml');
    const engine = new Engine({ config, clients: false });
    const run = await engine.submit({ calls: [{ id: 'w', tool: 'write_file', args: {} }] });
    const ended = await engine.wait(run.id);
    expect(ended?.calls[0]).toMatchObject({
      status: 'failed',
      error: { code: 'tool_error', message: expect.stringContaining('write_file is a client tool') },
    });
    await engine.close();
  });
});
