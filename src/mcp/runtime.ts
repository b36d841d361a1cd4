/**
 * Starting the MCP servers of a config and merging their tools into the catalog (DESIGN §13).
 *
 * `startMcp(config)` connects to every server at once, lists every page of its tools, turns them into
 * manifests (./manifests.ts), runs the name checks on the merged catalog (./checks.ts), and returns
 * the config with the merged tools and a live catalog. A server that cannot start or be reached is an
 * `McpStartError` naming it; a config problem is a `ConfigError`. Without servers it returns the
 * config as it is.
 *
 * When a server sends `notifications/tools/list_changed`, its tools are listed again and the catalog
 * swaps to the new list for new runs (a run keeps the manifests it was planned with). A burst of them
 * is one refresh and one log line (100 ms after the last, at most 1 s after the first). A refresh that
 * fails its checks keeps the old list, with a warning.
 */
import type { Catalog, ToolManifest } from '../core/tool.js';
import { createAjv, createCatalog } from '../config/catalog.js';
import { ConfigError } from '../config/load.js';
import type { McpServerConfig } from '../config/mcp-schema.js';
import type { Config } from '../config/types.js';
import { checkMerged, type ServerTools } from './checks.js';
import { McpConnection, messageOf } from './connection.js';
import { manifestsOf } from './manifests.js';
import { maxFrameBytesFor } from './frames.js';
import { DEFAULT_MAX_OUTPUT_BYTES } from '../core/size.js';

/** A burst of `tools/list_changed` is refreshed once this long after its last notification (ms). */
const REFRESH_QUIET_MS = 100;
/** …or this long after its first, for a burst that does not stop (ms). */
const REFRESH_MAX_WAIT_MS = 1000;

/** The largest output any tool of the server may give: a tool's override, the server's, else the limit. */
function largestOutput(s: McpServerConfig, limit: number | undefined): number {
  const own = Object.values(s.tools ?? {}).flatMap((o) => (o.maxOutputBytes !== undefined ? [o.maxOutputBytes] : []));
  return Math.max(s.maxOutputBytes ?? limit ?? DEFAULT_MAX_OUTPUT_BYTES, ...own);
}

/** A server could not start or be reached at start. */
export class McpStartError extends Error {
  override readonly name = 'McpStartError';
}

export interface McpLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface StartMcpOptions {
  /** How long each server may take to start and answer `initialize`. @default 8000 */
  connectTimeoutMs?: number;
  /** Where warnings go (skipped tools, refreshes, dropped connections). @default stderr lines */
  logger?: McpLogger;
}

export interface McpRuntime {
  /** The config with the servers' tools merged in; its catalog follows `tools/list_changed`. */
  readonly config: Config;
  /** One connection per server, by server name; the `mcp` executor calls through them. */
  readonly servers: ReadonlyMap<string, McpConnection>;
  /** Warnings from the start (tools skipped). */
  readonly warnings: readonly string[];
  close(): Promise<void>;
}

const stderrLogger: McpLogger = {
  warn: (_o, msg) => process.stderr.write(`toolgraph: ${msg}\n`),
  info: () => {},
};

export async function startMcp(config: Config, opts: StartMcpOptions = {}): Promise<McpRuntime> {
  const servers = config.mcp?.servers ?? [];
  if (servers.length === 0) return { config, servers: new Map(), warnings: [], close: async () => {} };
  const logger = opts.logger ?? stderrLogger;
  const ajv = createAjv();
  const connections = new Map<string, McpConnection>();
  let refresh: (server: McpServerConfig) => void = () => {};
  for (const s of servers) {
    connections.set(
      s.name,
      new McpConnection(s, {
        ...(opts.connectTimeoutMs !== undefined ? { connectTimeoutMs: opts.connectTimeoutMs } : {}),
        onToolsChanged: () => refresh(s),
        onDown: (why) => logger.warn({ server: s.name }, `mcp server "${s.name}": ${why}`),
        maxFrameBytes: maxFrameBytesFor(largestOutput(s, config.limits.maxOutputBytes)),
        onDropped: (bytes) =>
          logger.warn(
            { server: s.name, bytes },
            `mcp server "${s.name}": an answer of ${bytes} bytes passed its tools' maxOutputBytes: dropped`,
          ),
      }),
    );
  }
  const closeAll = () => Promise.allSettled([...connections.values()].map((c) => c.close())).then(() => {});

  const listed = await Promise.allSettled(
    servers.map(async (s) => {
      const c = connections.get(s.name) as McpConnection;
      await c.start();
      try {
        return await c.listTools();
      } catch (err) {
        throw new Error(`mcp server "${s.name}": tools/list failed: ${messageOf(err)}`);
      }
    }),
  );
  const failed = listed.flatMap((r) => (r.status === 'rejected' ? [messageOf(r.reason)] : []));
  if (failed.length > 0) {
    await closeAll();
    throw new McpStartError(failed.join('\n'));
  }

  const build = (index: number, tools: Parameters<typeof manifestsOf>[1]) =>
    manifestsOf(servers[index] as McpServerConfig, tools, { index, defaults: config.defaults, limits: config.limits, ajv });
  const perServer = listed.map((r, i) => build(i, (r as PromiseFulfilledResult<Parameters<typeof manifestsOf>[1]>).value));
  const warnings = perServer.flatMap((p) => p.warnings);
  for (const w of warnings) logger.warn({}, w);
  const serverTools: ServerTools[] = perServer.map((p, i) => ({ server: servers[i]!.name, index: i, manifests: p.manifests }));
  const problems = [...perServer.flatMap((p) => p.problems), ...checkMerged(config, serverTools)];
  if (problems.length > 0) {
    await closeAll();
    throw new ConfigError(config.source, problems);
  }

  const merge = (st: readonly ServerTools[]): ToolManifest[] => [...config.tools, ...st.flatMap((s) => s.manifests)];
  let current = createCatalog(merge(serverTools), { ajv });
  const catalog: Catalog = {
    get: (name) => current.get(name),
    checkArgs: (name, args) => current.checkArgs(name, args),
    list: () => current.list(),
  };
  const tools = current.list();
  const toolLimits: Record<string, number> = { ...config.limits.tool };
  for (const t of tools) {
    if (t.concurrency !== undefined && !Object.hasOwn(toolLimits, t.name)) toolLimits[t.name] = t.concurrency;
  }
  const merged: Config = Object.freeze({
    ...config,
    tools,
    limits: Object.freeze({ ...config.limits, tool: Object.freeze(toolLimits) }),
    catalog,
  });

  let refreshing = Promise.resolve();
  const relist = (server: McpServerConfig, notifications: number) => {
    refreshing = refreshing.then(async () => {
      const i = servers.indexOf(server);
      try {
        const next = build(i, await (connections.get(server.name) as McpConnection).listTools());
        const candidate = serverTools.map((s, j) => (j === i ? { ...s, manifests: next.manifests } : s));
        const bad = [...next.problems, ...checkMerged(config, candidate)];
        for (const w of next.warnings) logger.warn({ server: server.name }, w);
        if (bad.length > 0) {
          logger.warn(
            { server: server.name, problems: bad },
            `mcp server "${server.name}": its new tool list is not used: ${bad.join('; ')}`,
          );
          return;
        }
        serverTools[i] = candidate[i] as ServerTools;
        current = createCatalog(merge(serverTools), { ajv });
        logger.info(
          { server: server.name, tools: next.manifests.length, notifications },
          `mcp server "${server.name}": tool list refreshed (${notifications} ${notifications === 1 ? 'notification' : 'notifications'})`,
        );
      } catch (err) {
        logger.warn({ server: server.name }, `mcp server "${server.name}": could not list its tools again: ${messageOf(err)}`);
      }
    });
  };
  // A burst of list_changed is one refresh (and one log line): REFRESH_QUIET_MS after the last
  // notification, or REFRESH_MAX_WAIT_MS after the first of a burst that does not stop.
  const bursts = new Map<McpServerConfig, { count: number; first: number; timer: NodeJS.Timeout }>();
  refresh = (server) => {
    const now = Date.now();
    const b = bursts.get(server);
    if (b) clearTimeout(b.timer);
    const burst = b ?? { count: 0, first: now, timer: undefined as unknown as NodeJS.Timeout };
    burst.count++;
    const fire = () => {
      bursts.delete(server);
      relist(server, burst.count);
    };
    burst.timer = setTimeout(fire, Math.max(0, Math.min(REFRESH_QUIET_MS, burst.first + REFRESH_MAX_WAIT_MS - now)));
    burst.timer.unref();
    bursts.set(server, burst);
  };
  const closeRuntime = async () => {
    for (const b of bursts.values()) clearTimeout(b.timer);
    bursts.clear();
    await closeAll();
  };

  return { config: merged, servers: connections, warnings, close: closeRuntime };
}
