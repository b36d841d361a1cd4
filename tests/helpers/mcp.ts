/**
 * Test helpers for MCP: the published servers' entry files (dev dependencies), the tests' own server,
 * and an in-process toolgraph (config parsed from YAML, servers started with `startMcp`, an Engine
 * with the mcp executor) whose events are kept for assertions.
 */
import { fileURLToPath } from 'node:url';
import type { CallInput } from '../../src/core/calls.js';
import type { RunEvent } from '../../src/core/events.js';
import type { RunView } from '../../src/core/view.js';
import { parseConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/types.js';
import { Engine } from '../../src/engine/engine.js';
import { createExecutors } from '../../src/executors/index.js';
import { startMcp, type McpLogger, type McpRuntime } from '../../src/mcp/runtime.js';

const pkg = (name: string) => fileURLToPath(new URL(`../../node_modules/@modelcontextprotocol/${name}/dist/index.js`, import.meta.url));

export const FS_SERVER = pkg('server-filesystem');
export const MEMORY_SERVER = pkg('server-memory');
export const EVERYTHING_SERVER = pkg('server-everything');
export const TEST_SERVER = fileURLToPath(new URL('../fixtures/mcp/test-server.mjs', import.meta.url));

/** A logger that keeps what it is told. */
export function memoryLogger(): McpLogger & { lines: string[] } {
  const lines: string[] = [];
  return { lines, warn: (_o, m) => void lines.push(m), info: (_o, m) => void lines.push(m) };
}

export interface Toolgraph {
  config: Config;
  mcp: McpRuntime;
  engine: Engine;
  events: RunEvent[];
  logger: ReturnType<typeof memoryLogger>;
  run(calls: CallInput[], opts?: { failure?: 'fail_fast' | 'partial' | 'replan' }): Promise<RunView>;
  close(): Promise<void>;
}

export async function startToolgraph(yaml: string, env: Record<string, string> = {}): Promise<Toolgraph> {
  const logger = memoryLogger();
  const mcp = await startMcp(parseConfig(yaml, 'test.yaml', { env, baseDir: process.cwd() }), { logger });
  const events: RunEvent[] = [];
  const executor = createExecutors({ mcp: mcp.servers });
  const engine = new Engine({ config: mcp.config, executor, sink: { append: (es) => void events.push(...es) } });
  return {
    config: mcp.config,
    mcp,
    engine,
    events,
    logger,
    async run(calls, opts = {}) {
      const started = await engine.submit({ calls, ...(opts.failure ? { failure: opts.failure } : {}) });
      return (await engine.wait(started.id)) as RunView;
    },
    async close() {
      await engine.close();
      await executor.close();
      await mcp.close();
    },
  };
}

/** The events of one run, of the given types, as `type callId` strings in order. */
export function trace(events: readonly RunEvent[], runId: string, types: readonly string[]): string[] {
  return events.filter((e) => e.runId === runId && types.includes(e.type)).map((e) => `${e.type.replace('call.', '')} ${e.callId}`);
}
