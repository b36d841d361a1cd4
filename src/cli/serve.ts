/**
 * `toolgraph serve [--config FILE] [--host H] [--port N] [--db FILE|postgres://…] [--replica-id NAME]`
 * (and `npm start`): the API and the dashboard on one port, with the SQLite store, or PostgreSQL
 * (`--db`, `TOOLGRAPH_DB`, `store.url`, in that order, above `server.db`; DESIGN §12). On start it resumes unfinished runs. On SIGTERM
 * or SIGINT it stops accepting, lets running calls finish for a while (`--drain-ms`, default 10 s),
 * then exits; whatever is left is resumed by the next start.
 */
import { pino } from 'pino';
import { isLoopback } from '../api/auth.js';
import { buildServer } from '../api/server.js';
import { openService, type Service } from '../api/service.js';
import { tracingFromEnv, TracingConfigError } from '../telemetry/index.js';
import { hostname } from 'node:os';
import { chooseStore, describeChoice, openStore, type StoreChoice } from '../store/select.js';
import type { Store } from '../store/types.js';
import { readConfig, UsageError } from './input.js';
import { parseOptions, type Io } from './options.js';
import { startCliMcp } from './mcp.js';
import { mcpRoutes } from '../mcp-server/http.js';

/** After SIGTERM, how long past `--drain-ms` the server may take to close before it exits anyway (ms). */
const STOP_GRACE_MS = 5000;

export async function serveCommand(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseOptions(args, {
    config: { type: 'string' },
    host: { type: 'string' },
    port: { type: 'string' },
    db: { type: 'string' },
    'replica-id': { type: 'string' },
    'drain-ms': { type: 'string', default: '10000' },
  });
  if (positionals.length > 0) throw new UsageError(`serve takes no positional arguments, got "${positionals.join(' ')}"`);
  const logger = pino({ name: 'toolgraph', level: process.env.LOG_LEVEL ?? 'info' });
  const mcp = await startCliMcp(readConfig(values.config as string | undefined), logger);
  const config = mcp.config;
  const host = (values.host as string | undefined) ?? config.server.host;
  const port = values.port !== undefined ? Number(values.port) : config.server.port;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new UsageError(`--port must be an integer from 0 to 65535, got "${String(values.port)}"`);
  const drainMs = Number(values['drain-ms']);
  if (!Number.isFinite(drainMs) || drainMs < 0)
    throw new UsageError(`--drain-ms must be a number of milliseconds, got "${String(values['drain-ms'])}"`);
  if (config.auth.keys.length === 0 && !isLoopback(host)) {
    throw new UsageError(
      `refusing to listen on ${host} with no auth.keys: open development mode serves loopback addresses only (127.0.0.1, ::1)`,
    );
  }
  let choice: StoreChoice;
  try {
    choice = chooseStore({
      flag: values.db as string | undefined,
      env: process.env.TOOLGRAPH_DB,
      url: config.store.url,
      file: config.server.db,
    });
  } catch (e) {
    await mcp.close();
    throw new UsageError((e as Error).message);
  }
  const dbFile = describeChoice(choice);
  const replica = (values['replica-id'] as string | undefined) ?? `${hostname()}-${process.pid}`;
  let store: Store;
  try {
    store = await openStore(choice, {
      poolSize: config.store.poolSize,
      // A connection fault never ends the process (store/pg-pool.ts): the pool opens another.
      onConnectionError: (err) => logger.warn({ err: err.message }, 'a database connection failed; it is replaced'),
    });
  } catch (e) {
    await mcp.close();
    throw new UsageError(`${dbFile}: cannot open the database: ${(e as Error).message}`);
  }
  // Traces (DESIGN §15) only with an OTLP endpoint in the environment; otherwise nothing of OpenTelemetry loads.
  const onExportError = (message: string, failures: number) =>
    logger.warn({ failures, err: message }, 'traces: export to the OTLP endpoint failed');
  const onDropped = (message: string, spans: number) =>
    logger.warn({ spans, detail: message }, 'traces: spans dropped (the export thread or its queue fell behind)');
  const tracing = await tracingFromEnv(process.env, { onExportError, onDropped }).catch(async (e: unknown) => {
    await store.close();
    await mcp.close();
    throw e instanceof TracingConfigError ? new UsageError(e.message) : e;
  });
  let service: Service;
  try {
    service = await openService({
      config,
      store,
      ...(mcp.executor ? { executor: mcp.executor } : {}),
      ...(tracing ? { tracing } : {}),
      replica,
      logger,
    });
  } catch (e) {
    await mcp.close();
    await tracing?.shutdown();
    await store.close();
    throw new UsageError(`${dbFile}: cannot join the cluster: ${(e as Error).message}`);
  }
  let resumed: number;
  try {
    let unrecoverable: { runId: string; reason: string }[];
    ({ resumed, unrecoverable } = await service.recover());
    // A run that cannot be taken back ended `failed` (DESIGN §4); the server starts all the same.
    for (const u of unrecoverable)
      logger.error({ runId: u.runId, reason: u.reason }, 'a run could not be recovered: it ended failed (unrecoverable), its events kept');
  } catch (e) {
    // The store itself cannot be read: say so, without a stack trace, and leave the database as it is.
    await service.close();
    await mcp.close();
    await tracing?.shutdown();
    await store.close();
    throw new UsageError(`${dbFile}: cannot resume the unfinished runs: ${(e as Error).message}`);
  }
  const { dashboardRoutes } = await import('../dashboard/routes.js').catch(() => ({ dashboardRoutes: undefined }));
  const app = buildServer({ service, logger, plugins: [...(dashboardRoutes ? [dashboardRoutes] : []), mcpRoutes()] });
  try {
    await app.listen({ host, port });
  } catch (e) {
    await mcp.close();
    await tracing?.shutdown();
    await store.close();
    throw new UsageError(`cannot listen on ${host}:${port}: ${(e as Error).message}`);
  }
  const address = app.server.address();
  const actualPort = typeof address === 'object' && address ? address.port : port;
  logger.info(
    {
      host,
      port: actualPort,
      db: dbFile,
      config: config.source,
      store: store.kind,
      replica,
      resumed,
      auth: config.auth.keys.length > 0 ? 'keys' : 'open',
      traces: tracing ? 'otlp' : 'off',
    },
    'toolgraph listening',
  );
  io.err(
    `toolgraph serving http://${host.includes(':') ? `[${host}]` : host}:${actualPort} (dashboard at /, API reference at /docs, MCP at /mcp)\n`,
  );

  // A reader that went away (a closed pipe: EPIPE) must not end the server, nor hold its exit.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      // Whatever holds the process (a database that does not answer a goodbye, a child that lingers),
      // it ends within its drain time and a few seconds; unref'd, so it never keeps it alive itself.
      setTimeout(() => {
        logger.warn({ signal, drainMs }, 'did not stop within the drain time and 5 s: exiting now');
        process.exit(1);
      }, drainMs + STOP_GRACE_MS).unref();
      logger.info({ signal, drainMs }, 'shutting down: no new runs; letting running calls finish');
      const closing = app.close();
      await service.close({ drainMs });
      await mcp.close();
      await closing;
      // The last spans go out, for 2 s at most (a dead collector does not hold the exit).
      await tracing?.shutdown();
      await store.close();
      logger.info('stopped');
      resolve(0);
    };
    process.once('SIGTERM', () => void stop('SIGTERM'));
    process.once('SIGINT', () => void stop('SIGINT'));
  });
}
