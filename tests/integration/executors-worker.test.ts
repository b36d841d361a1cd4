// Worker executor with real tinypool threads running modules written to a temp dir: values, thrown
// errors, and a never-yielding loop that an abort or a timeout must stop by replacing its thread.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWorkerExecutor, moduleUrl } from '../../src/executors/worker.js';
import type { ExecuteRequest, ExecuteResult } from '../../src/executors/types.js';
import type { ToolManifest } from '../../src/core/tool.js';

let dir = '';
const CHANNEL = `toolgraph-worker-test-${process.pid}`;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'toolgraph-worker-'));
  const files: Record<string, string> = {
    'value.mjs': `import { threadId } from 'node:worker_threads';
export default async (args, { signal }) => ({ doubled: args.n * 2, threadId, hasSignal: signal instanceof AbortSignal });`,
    'throws.mjs': `export default async () => { throw new Error('boom'); };`,
    'flaky.mjs': `export default async () => { throw Object.assign(new Error('try again'), { retryable: true }); };`,
    'nodefault.mjs': `export const x = 1;`,
    // Announces that it started (BroadcastChannel delivers without this thread yielding), then spins.
    'busy.mjs': `import { threadId } from 'node:worker_threads';
export default async () => {
  new BroadcastChannel(${JSON.stringify(CHANNEL)}).postMessage({ started: threadId });
  while (true) {}
};`,
  };
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function request(
  module: string,
  args: Record<string, unknown> = {},
  opts: { signal?: AbortSignal; timeoutMs?: number } = {},
): ExecuteRequest {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const tool: ToolManifest = {
    name: 'w',
    scope: 'tenant',
    risk: 'read',
    idempotent: true,
    timeoutMs,
    after: [],
    requires: [],
    executor: { kind: 'worker', module },
  };
  return { runId: 'run_1', callId: 'c1', tool, args, attempt: 1, signal: opts.signal ?? new AbortController().signal, timeoutMs };
}

/** Resolves with the thread id of the next busy.mjs that starts. */
function nextBusyStart(): Promise<number> {
  const channel = new BroadcastChannel(CHANNEL);
  return new Promise((resolve) => {
    channel.onmessage = (event) => {
      channel.close();
      resolve((event as unknown as { data: { started: number } }).data.started);
    };
  });
}

function threadOf(result: ExecuteResult): number {
  expect(result.ok).toBe(true);
  return (result as { output: { threadId: number } }).output.threadId;
}

describe('worker executor', () => {
  const executor = createWorkerExecutor({ maxThreads: 1, baseDir: '/nonexistent' });
  afterAll(() => executor.close());

  it('returns the default export’s value', async () => {
    const result = await executor.execute(request(join(dir, 'value.mjs'), { n: 21 }));
    expect(result).toMatchObject({ ok: true, output: { doubled: 42, hasSignal: true } });
  });

  it('accepts file URLs and resolves relative paths against baseDir', async () => {
    const viaUrl = await executor.execute(request(moduleUrl(join(dir, 'value.mjs'), '/'), { n: 1 }));
    expect(viaUrl).toMatchObject({ ok: true, output: { doubled: 2 } });
    const relative = createWorkerExecutor({ maxThreads: 1, baseDir: dir });
    try {
      expect(await relative.execute(request('./value.mjs', { n: 2 }))).toMatchObject({ ok: true, output: { doubled: 4 } });
    } finally {
      await relative.close();
    }
  });

  it('a thrown error is a tool_error, retryable only when the error says so', async () => {
    const boom = await executor.execute(request(join(dir, 'throws.mjs')));
    expect(boom).toMatchObject({
      ok: false,
      error: { code: 'tool_error', message: 'boom', details: { message: 'boom' } },
      retryable: false,
    });
    const flaky = await executor.execute(request(join(dir, 'flaky.mjs')));
    expect(flaky).toMatchObject({ ok: false, error: { code: 'tool_error', message: 'try again' }, retryable: true });
    const missing = await executor.execute(request(join(dir, 'missing.mjs')));
    expect(missing).toMatchObject({ ok: false, error: { code: 'tool_error' }, retryable: false });
    const noDefault = await executor.execute(request(join(dir, 'nodefault.mjs')));
    expect(noDefault).toMatchObject({ ok: false, error: { code: 'tool_error' }, retryable: false });
  });

  it('an abort stops a never-yielding loop and the pool runs new tasks on a fresh thread', async () => {
    const controller = new AbortController();
    const started = nextBusyStart();
    const pending = executor.execute(request(join(dir, 'busy.mjs'), {}, { signal: controller.signal }));
    const busyThread = await started;
    controller.abort();
    expect(await pending).toMatchObject({ ok: false, error: { code: 'cancelled' }, retryable: false });
    // maxThreads is 1: this can only run if the spinning thread was taken out of the pool.
    const after = await executor.execute(request(join(dir, 'value.mjs'), { n: 1 }));
    expect(threadOf(after)).not.toBe(busyThread);
  });

  it('a timeout stops a never-yielding loop with a retryable timeout', async () => {
    const started = nextBusyStart();
    const pending = executor.execute(request(join(dir, 'busy.mjs'), {}, { timeoutMs: 300 }));
    const busyThread = await started;
    expect(await pending).toMatchObject({ ok: false, error: { code: 'timeout' }, retryable: true });
    const after = await executor.execute(request(join(dir, 'value.mjs'), { n: 1 }));
    expect(threadOf(after)).not.toBe(busyThread);
  });

  it('after close, calls are cancelled', async () => {
    const closing = createWorkerExecutor({ maxThreads: 1 });
    expect(await closing.execute(request(join(dir, 'value.mjs'), { n: 1 }))).toMatchObject({ ok: true });
    await closing.close();
    expect(await closing.execute(request(join(dir, 'value.mjs'), { n: 1 }))).toMatchObject({ ok: false, error: { code: 'cancelled' } });
  });

  it('close stops a running task, which ends cancelled', async () => {
    const closing = createWorkerExecutor({ maxThreads: 1 });
    const started = nextBusyStart();
    const pending = closing.execute(request(join(dir, 'busy.mjs')));
    await started;
    await closing.close();
    expect(await pending).toMatchObject({ ok: false, error: { code: 'cancelled' } });
  });
});
