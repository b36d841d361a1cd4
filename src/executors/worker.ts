/**
 * Worker executor (DESIGN §2): `{ kind: worker, module }` runs the module's default export in a tinypool
 * worker thread, through worker-boot.mjs. An abort (request signal or timeout) makes tinypool reject the
 * task and terminate its thread, so even a never-yielding loop stops. One lazily created pool serves all
 * worker tools; `close()` destroys it.
 */
import { availableParallelism } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import Tinypool from 'tinypool';
import type { ExecuteRequest, ExecuteResult, Executor } from './types.js';
import { abortResult, cancelledResult, deadline, messageOf, toolError } from './deadline.js';

export interface WorkerExecutorOptions {
  /** Most threads at once (default: the number of cores). */
  maxThreads?: number;
  /** Threads kept alive while idle (default 0). */
  minThreads?: number;
  /** How long an idle thread above minThreads lives, in ms (default 30000). */
  idleTimeoutMs?: number;
  /** Directory that relative `module` paths resolve against (default: process.cwd()). */
  baseDir?: string;
}

/** The boot file sits next to this module in src/ (tsx, vitest) and in dist/ (copied by the build). */
export const WORKER_BOOT_URL = new URL('./worker-boot.mjs', import.meta.url);

type BootResult = { ok: true; output: unknown } | { ok: false; error: { message: string; name?: string; retryable: boolean } };

/** A module spec as a file URL: absolute paths and file: URLs as they are, relative paths from baseDir. */
export function moduleUrl(module: string, baseDir: string): string {
  if (module.startsWith('file:')) return module;
  return pathToFileURL(isAbsolute(module) ? module : resolve(baseDir, module)).href;
}

export interface WorkerExecutor extends Executor {
  /** The pool's live threads (0 before the first call); for tests and metrics. */
  threadCount(): number;
}

export function createWorkerExecutor(opts: WorkerExecutorOptions = {}): WorkerExecutor {
  const baseDir = opts.baseDir ?? process.cwd();
  let pool: Tinypool | null = null;
  let closed = false;

  const getPool = (): Tinypool => {
    if (pool) return pool;
    const maxThreads = Math.max(1, opts.maxThreads ?? availableParallelism());
    pool = new Tinypool({
      filename: WORKER_BOOT_URL.href,
      maxThreads,
      minThreads: Math.min(opts.minThreads ?? 0, maxThreads),
      idleTimeout: opts.idleTimeoutMs ?? 30_000,
    });
    return pool;
  };

  async function run(request: ExecuteRequest, module: string): Promise<ExecuteResult> {
    const d = deadline(request);
    try {
      if (d.signal.aborted) return abortResult(d);
      const task = { moduleUrl: moduleUrl(module, baseDir), args: request.args };
      const result = (await getPool().run(task, { signal: d.signal })) as BootResult;
      if (result.ok) return { ok: true, output: result.output };
      const { message, name, retryable } = result.error;
      return toolError(message, retryable, { message, ...(name ? { name } : {}) });
    } catch (err) {
      if (d.cause() !== null) return abortResult(d);
      if (closed) return cancelledResult('the worker pool was closed');
      return toolError(`worker failed: ${messageOf(err)}`, false, { message: messageOf(err) });
    } finally {
      d.dispose();
    }
  }

  return {
    async execute(request) {
      const spec = request.tool.executor;
      if (spec.kind !== 'worker') return toolError(`not a worker tool: ${spec.kind}`, false);
      if (closed) return cancelledResult('the worker pool was closed');
      try {
        return await run(request, spec.module);
      } catch (err) {
        return toolError(messageOf(err), false);
      }
    },
    threadCount: () => pool?.threads.length ?? 0,
    async close() {
      closed = true;
      const p = pool;
      pool = null;
      if (p) await p.destroy();
    },
  };
}
