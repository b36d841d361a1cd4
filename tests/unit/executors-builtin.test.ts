// Builtin executor (sleep, echo, fail) and the dispatching createExecutors(): timeouts, aborts, errors.
import { describe, it, expect, afterAll } from 'vitest';
import { createExecutors } from '../../src/executors/index.js';
import type { ExecuteRequest } from '../../src/executors/types.js';
import type { ExecutorSpec, ToolManifest } from '../../src/core/tool.js';

function request(
  executor: ExecutorSpec,
  args: Record<string, unknown>,
  opts: { signal?: AbortSignal; timeoutMs?: number } = {},
): ExecuteRequest {
  const timeoutMs = opts.timeoutMs ?? 5000;
  const tool: ToolManifest = { name: 't', scope: 'tenant', risk: 'read', idempotent: true, timeoutMs, after: [], requires: [], executor };
  return { runId: 'run_1', callId: 'c1', tool, args, attempt: 1, signal: opts.signal ?? new AbortController().signal, timeoutMs };
}

const executors = createExecutors();
afterAll(() => executors.close());

describe('builtin executor', () => {
  it('sleep resolves { ms } after ms', async () => {
    const started = performance.now();
    const result = await executors.execute(request({ kind: 'builtin', name: 'sleep' }, { ms: 50 }));
    expect(result).toEqual({ ok: true, output: { ms: 50 } });
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
  });

  it('sleep resolves at once with cancelled on abort', async () => {
    const controller = new AbortController();
    const started = performance.now();
    const pending = executors.execute(request({ kind: 'builtin', name: 'sleep' }, { ms: 10_000 }, { signal: controller.signal }));
    controller.abort();
    const result = await pending;
    expect(result).toMatchObject({ ok: false, error: { code: 'cancelled' }, retryable: false });
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('sleep past the timeout fails with a retryable timeout', async () => {
    const result = await executors.execute(request({ kind: 'builtin', name: 'sleep' }, { ms: 10_000 }, { timeoutMs: 50 }));
    expect(result).toMatchObject({ ok: false, error: { code: 'timeout' }, retryable: true });
  });

  it('sleep rejects a bad ms', async () => {
    const result = await executors.execute(request({ kind: 'builtin', name: 'sleep' }, { ms: 'soon' }));
    expect(result).toMatchObject({ ok: false, error: { code: 'tool_error' }, retryable: false });
  });

  it('echo returns its args', async () => {
    const args = { a: 1, b: { c: [1, 2] } };
    expect(await executors.execute(request({ kind: 'builtin', name: 'echo' }, args))).toEqual({ ok: true, output: args });
  });

  it('fail fails with tool_error, retryable only when asked', async () => {
    const plain = await executors.execute(request({ kind: 'builtin', name: 'fail' }, {}));
    expect(plain).toMatchObject({ ok: false, error: { code: 'tool_error', message: 'failed' }, retryable: false });
    const flaky = await executors.execute(request({ kind: 'builtin', name: 'fail' }, { message: 'flaky', retryable: true }));
    expect(flaky).toMatchObject({
      ok: false,
      error: { code: 'tool_error', message: 'flaky', details: { message: 'flaky' } },
      retryable: true,
    });
  });
});

describe('createExecutors', () => {
  it('an already aborted signal is cancelled without running', async () => {
    const controller = new AbortController();
    controller.abort();
    const result = await executors.execute(request({ kind: 'builtin', name: 'echo' }, {}, { signal: controller.signal }));
    expect(result).toMatchObject({ ok: false, error: { code: 'cancelled' } });
  });

  it('an unknown executor kind is a tool_error, not a throw', async () => {
    const result = await executors.execute(request({ kind: 'nope' } as unknown as ExecutorSpec, {}));
    expect(result).toMatchObject({ ok: false, error: { code: 'tool_error' }, retryable: false });
  });

  it('after close, calls are cancelled', async () => {
    const closing = createExecutors();
    await closing.close();
    const result = await closing.execute(request({ kind: 'builtin', name: 'echo' }, {}));
    expect(result).toMatchObject({ ok: false, error: { code: 'cancelled' } });
  });
});
