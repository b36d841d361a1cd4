/**
 * The CLI's side of MCP (DESIGN §13): `serve`, `plan`, `run` and `tools` connect to the config's MCP
 * servers before they do anything else, and stop with exit 2 naming the server when one cannot start
 * or be reached (or when the merged catalog breaks a config check). Without servers nothing of the SDK
 * is loaded.
 */
import type { Config } from '../config/types.js';
import { ConfigError } from '../config/load.js';
import { createExecutors, type Executor } from '../executors/index.js';
import type { McpLogger } from '../mcp/runtime.js';
import { UsageError } from './input.js';

export interface CliMcp {
  /** The config with the servers' tools merged in (the same config when there are none). */
  config: Config;
  /** The executors with the MCP connections, when there are servers (else the engine makes its own). */
  executor?: Executor;
  /** Closes the executors made here and the connections. */
  close(): Promise<void>;
}

export async function startCliMcp(config: Config, logger?: McpLogger): Promise<CliMcp> {
  if ((config.mcp?.servers.length ?? 0) === 0) return { config, close: async () => {} };
  const { startMcp, McpStartError } = await import('../mcp/runtime.js');
  try {
    const mcp = await startMcp(config, logger ? { logger } : {});
    const executor = createExecutors({ mcp: mcp.servers });
    return {
      config: mcp.config,
      executor,
      close: async () => {
        await executor.close();
        await mcp.close();
      },
    };
  } catch (e) {
    if (e instanceof McpStartError || e instanceof ConfigError) throw new UsageError(e.message);
    throw e;
  }
}
