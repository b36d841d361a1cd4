/**
 * The engine makes an attempt's AbortSignal only when its executor reads it (src/engine/engine.ts,
 * `Attempt`), and the builtin executor's instant tools never do (src/executors/builtin.ts). What must
 * not change: an abort that comes before the executor looks at the signal still reaches it (the signal
 * is born aborted, with the engine's reason), one after it fires it, and `aborted()` tells either.
 */
import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine/engine.js';
import { createBuiltinExecutor } from '../../src/executors/builtin.js';
import type { ExecuteRequest, ExecuteResult, Executor } from '../../src/executors/types.js';
import type { ToolManifest } from '../../src/core/tool.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { benchConfig } from '../../src/bench/workloads.js';
import { untilTrue } from '../helpers/wait.js';

/** Holds every attempt until `release`; reads the signal only then. */
function heldExecutor() {
  const held: { request: ExecuteRequest; release: () => void }[] = [];
  const executor: Executor = {
    execute: (request) =>
      new Promise<ExecuteResult>((resolve) => {
        held.push({
          request,
          release: () =>
            resolve(
              request.signal.aborted
                ? {
                    ok: false,
                    error: { code: 'cancelled', message: String(request.signal.reason?.message ?? request.signal.reason) },
                    retryable: false,
                  }
                : { ok: true, output: {} },
            ),
        });
      }),
    async close() {},
  };
  return { executor, held };
}

describe('the lazy signal of an attempt', () => {
  it('an abort before the executor reads the signal: the signal is born aborted, with the reason', async () => {
    const { executor, held } = heldExecutor();
    const engine = new Engine({ config: benchConfig(), sink: createMemoryStore(), executor });
    const view = await engine.submit({ calls: [{ id: 'a', tool: 'echo', args: {} }] });
    await untilTrue(() => held.length === 1);
    const h = held[0]!;
    expect(h.request.aborted?.()).toBe(false);
    await engine.cancel(view.id);
    expect(h.request.aborted?.()).toBe(true);
    expect(h.request.signal.aborted).toBe(true);
    expect(h.request.signal.reason).toMatchObject({ code: 'cancelled' });
    h.release();
    expect((await engine.wait(view.id, 5000))?.status).toBe('cancelled');
    await engine.close();
  });

  it('an abort after the executor read the signal fires it', async () => {
    const { executor, held } = heldExecutor();
    const engine = new Engine({ config: benchConfig(), sink: createMemoryStore(), executor });
    const view = await engine.submit({ calls: [{ id: 'a', tool: 'echo', args: {} }] });
    await untilTrue(() => held.length === 1);
    const signal = held[0]!.request.signal;
    let fired = 0;
    signal.addEventListener('abort', () => fired++);
    await engine.cancel(view.id);
    expect(fired).toBe(1);
    expect(signal.aborted).toBe(true);
    held[0]!.release();
    expect((await engine.wait(view.id, 5000))?.status).toBe('cancelled');
    await engine.close();
  });

  it('a run of builtin echo calls never makes a signal', async () => {
    let reads = 0;
    const builtin = createBuiltinExecutor();
    const executor: Executor = {
      execute: (request) => {
        const spy = Object.create(request, {
          signal: {
            get: () => {
              reads++;
              return request.signal;
            },
          },
        }) as ExecuteRequest;
        return builtin.execute(spy);
      },
      close: () => builtin.close(),
    };
    const engine = new Engine({ config: benchConfig(), sink: createMemoryStore(), executor });
    const view = await engine.submit({ calls: ['a', 'b', 'c'].map((id) => ({ id, tool: 'echo', args: { id } })) });
    expect((await engine.wait(view.id, 5000))?.status).toBe('succeeded');
    expect(reads).toBe(0);
    await engine.close();
  });
});

describe('builtin instant tools and the abort check', () => {
  const tool = (name: 'sleep' | 'echo' | 'fail'): ToolManifest => ({
    name,
    scope: 'tenant',
    risk: 'read',
    idempotent: true,
    timeoutMs: 50,
    after: [],
    requires: [],
    executor: { kind: 'builtin', name },
  });
  const base = { runId: 'r', callId: 'c', attempt: 1, timeoutMs: 50 };
  const builtin = createBuiltinExecutor();

  it('echo and fail answer cancelled when `aborted()` says so, without reading the signal', async () => {
    for (const name of ['echo', 'fail'] as const) {
      const request = {
        ...base,
        tool: tool(name),
        args: {},
        aborted: () => true,
        get signal(): AbortSignal {
          throw new Error('read');
        },
      };
      expect(await builtin.execute(request)).toMatchObject({ ok: false, error: { code: 'cancelled' } });
    }
  });

  it('without `aborted()`, echo checks the signal', async () => {
    const c = new AbortController();
    c.abort();
    expect(await builtin.execute({ ...base, tool: tool('echo'), args: { x: 1 }, signal: c.signal })).toMatchObject({
      ok: false,
      error: { code: 'cancelled' },
    });
    expect(await builtin.execute({ ...base, tool: tool('echo'), args: { x: 1 }, signal: new AbortController().signal })).toEqual({
      ok: true,
      output: { x: 1 },
    });
  });

  it('sleep still has its deadline: a timeout, and an abort while it sleeps', async () => {
    expect(await builtin.execute({ ...base, tool: tool('sleep'), args: { ms: 5000 }, signal: new AbortController().signal })).toMatchObject(
      { ok: false, error: { code: 'timeout' }, retryable: true },
    );
    const c = new AbortController();
    const pending = builtin.execute({ ...base, timeoutMs: 60_000, tool: tool('sleep'), args: { ms: 5000 }, signal: c.signal });
    setTimeout(() => c.abort(), 10);
    expect(await pending).toMatchObject({ ok: false, error: { code: 'cancelled' } });
  });
});
