/**
 * `toolgraph mcp [--config FILE] [--db FILE|postgres://…] [--port N] [--host H]` (DESIGN §16): toolgraph
 * as an MCP server over stdio, for one local client (an IDE, a desktop agent) that starts it. stdout
 * carries the protocol only: logs go to stderr. With `auth.keys` configured, `TOOLGRAPH_KEY` names
 * the key the client acts with (its tenant owns the runs); without it the command stops (exit 2).
 *
 * `--port` also serves the API, the dashboard and `/mcp` on that port (loopback by default): the way
 * to watch the client's runs and decide its reviews when the store is a SQLite file only this process
 * may run. On PostgreSQL the process joins the cluster, and any replica's dashboard does that.
 * The process ends when the client closes stdin (or on SIGTERM/SIGINT), letting running calls finish
 * for `--drain-ms` (default 2000).
 */
import { hostname } from 'node:os';
import { pino } from 'pino';
import { authenticate, isLoopback, type Principal } from '../api/auth.js';
import { ApiError } from '../api/errors.js';
import { buildServer } from '../api/server.js';
import { openService, type Service } from '../api/service.js';
import { mcpRoutes } from '../mcp-server/http.js';
import { serveStdio } from '../mcp-server/stdio.js';
import { chooseStore, describeChoice, openStore } from '../store/select.js';
import type { Store } from '../store/types.js';
import { tracingFromEnv, TracingConfigError } from '../telemetry/index.js';
import { readConfig, UsageError } from './input.js';
import { startCliMcp } from './mcp.js';
import { parseOptions, type Io } from './options.js';

function principalOf(keys: Parameters<typeof authenticate>[0], key: string | undefined): Principal {
  if (keys.length > 0 && (key === undefined || key === ''))
    throw new UsageError('the config has auth.keys: set TOOLGRAPH_KEY to the key this client acts with');
  try {
    return authenticate(keys, key === undefined ? undefined : `Bearer ${key}`);
  } catch (e) {
    throw new UsageError(`TOOLGRAPH_KEY: ${e instanceof ApiError ? e.message : String(e)}`);
  }
}

export async function mcpCommand(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseOptions(args, {
    config: { type: 'string' },
    db: { type: 'string' },
    port: { type: 'string' },
    host: { type: 'string', default: '127.0.0.1' },
    'replica-id': { type: 'string' },
    'drain-ms': { type: 'string', default: '2000' },
  });
  if (positionals.length > 0) throw new UsageError(`mcp takes no positional arguments, got "${positionals.join(' ')}"`);
  const port = values.port === undefined ? undefined : Number(values.port);
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535))
    throw new UsageError(`--port must be an integer from 0 to 65535, got "${String(values.port)}"`);
  const drainMs = Number(values['drain-ms']);
  if (!Number.isFinite(drainMs) || drainMs < 0)
    throw new UsageError(`--drain-ms must be a number of milliseconds, got "${String(values['drain-ms'])}"`);
  const host = values.host as string;
  // stdout is the protocol's: every log line goes to stderr.
  const logger = pino({ name: 'toolgraph', level: process.env.LOG_LEVEL ?? 'warn' }, pino.destination(2));
  const base = readConfig(values.config as string | undefined);
  const principal = principalOf(base.auth.keys, process.env.TOOLGRAPH_KEY);
  if (port !== undefined && base.auth.keys.length === 0 && !isLoopback(host))
    throw new UsageError(`refusing to listen on ${host} with no auth.keys: open development mode serves loopback addresses only`);

  const mcp = await startCliMcp(base, logger);
  const config = mcp.config;
  const cleanups: (() => Promise<unknown>)[] = [() => mcp.close()];
  const cleanup = async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  };
  let store: Store;
  let service: Service;
  try {
    const choice = chooseStore({
      flag: values.db as string | undefined,
      env: process.env.TOOLGRAPH_DB,
      url: config.store.url,
      file: config.server.db,
    });
    const dbFile = describeChoice(choice);
    store = await openStore(choice, { poolSize: config.store.poolSize }).catch((e: unknown) => {
      throw new UsageError(`${dbFile}: cannot open the database: ${(e as Error).message}`);
    });
    cleanups.push(() => store.close());
    const tracing = await tracingFromEnv(process.env).catch((e: unknown) => {
      throw e instanceof TracingConfigError ? new UsageError(e.message) : e;
    });
    if (tracing) cleanups.push(() => tracing.shutdown());
    const replica = (values['replica-id'] as string | undefined) ?? `${hostname()}-${process.pid}`;
    service = await openService({
      config,
      store,
      ...(mcp.executor ? { executor: mcp.executor } : {}),
      ...(tracing ? { tracing } : {}),
      replica,
      logger,
    });
    cleanups.push(() => service.close({ drainMs }));
    const { unrecoverable } = await service.recover();
    for (const u of unrecoverable) logger.error({ runId: u.runId, reason: u.reason }, 'a run could not be recovered: it ended failed');
  } catch (e) {
    await cleanup();
    throw e instanceof UsageError ? e : new UsageError((e as Error).message);
  }

  if (port !== undefined) {
    const { dashboardRoutes } = await import('../dashboard/routes.js').catch(() => ({ dashboardRoutes: undefined }));
    const app = buildServer({ service, logger, plugins: [...(dashboardRoutes ? [dashboardRoutes] : []), mcpRoutes()] });
    try {
      await app.listen({ host, port });
    } catch (e) {
      await cleanup();
      throw new UsageError(`cannot listen on ${host}:${port}: ${(e as Error).message}`);
    }
    cleanups.push(() => app.close());
    const address = app.server.address();
    const actual = typeof address === 'object' && address ? address.port : port;
    io.err(`toolgraph serving http://${host.includes(':') ? `[${host}]` : host}:${actual} (dashboard at /, MCP at /mcp)\n`);
  }

  const stdio = await serveStdio({ service, principal, logger });
  io.err(`toolgraph mcp: serving MCP on stdio, session ${stdio.session}\n`);
  await new Promise<void>((resolve) => {
    void stdio.closed.then(resolve);
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await stdio.close();
  await cleanup();
  return 0;
}
