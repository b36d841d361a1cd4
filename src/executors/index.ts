/**
 * The executors the engine uses: one Executor that dispatches each attempt by the tool's
 * `executor.kind` (builtin, http, worker, mcp). It never throws: every failure is an ExecuteResult.
 */
import type { ToolManifest } from '../core/tool.js';
import type { ExecuteRequest, ExecuteResult, Executor } from './types.js';
import { createBuiltinExecutor } from './builtin.js';
import { createHttpExecutor } from './http.js';
import { createWorkerExecutor, type WorkerExecutorOptions } from './worker.js';
import { createMcpExecutor, type McpCaller } from './mcp.js';
import { cancelledResult, messageOf, toolError } from './deadline.js';

export type { ExecuteRequest, ExecuteResult, Executor } from './types.js';
export { createBuiltinExecutor } from './builtin.js';
export { createHttpExecutor, parseRetryAfter, isRetryableStatus } from './http.js';
export { createWorkerExecutor, WORKER_BOOT_URL, type WorkerExecutorOptions, type WorkerExecutor } from './worker.js';

export { createMcpExecutor, type McpCaller } from './mcp.js';

export interface ExecutorsOptions {
  worker?: WorkerExecutorOptions;
  /** The MCP servers' connections by name (`McpRuntime.servers`), for tools of kind `mcp`. */
  mcp?: ReadonlyMap<string, McpCaller>;
}

/** Whether the executor of `tool` sends an attempt's W3C `traceparent` on (only `http` does: DESIGN §15). */
export function sendsTraceparent(tool: ToolManifest | undefined): boolean {
  return tool?.executor?.kind === 'http';
}

const noAgent: Executor = {
  execute: async (r) => toolError(`${r.tool.name} is a client tool, and no agent answers its calls here (DESIGN §17)`, false),
  close: async () => {},
};

export function createExecutors(opts: ExecutorsOptions = {}): Executor {
  const byKind = new Map<string, Executor>([
    ['builtin', createBuiltinExecutor()],
    ['http', createHttpExecutor()],
    ['worker', createWorkerExecutor(opts.worker)],
    ['mcp', createMcpExecutor(opts.mcp ?? new Map())],
    // Client tools wait for their agent in the engine (EngineOptions.clients); an executor of its own has none.
    ['client', noAgent],
  ]);
  let closed = false;
  return {
    async execute(request: ExecuteRequest): Promise<ExecuteResult> {
      try {
        if (closed) return cancelledResult('the executors were closed');
        const kind = request.tool?.executor?.kind;
        const executor = typeof kind === 'string' ? byKind.get(kind) : undefined;
        if (!executor) return toolError(`unknown executor kind ${JSON.stringify(kind)}`, false);
        return await executor.execute(request);
      } catch (err) {
        return toolError(messageOf(err), false);
      }
    },
    async close() {
      closed = true;
      await Promise.allSettled([...byKind.values()].map((e) => e.close()));
    },
  };
}
