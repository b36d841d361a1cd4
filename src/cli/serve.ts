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
import { readConfig, UsageError } from './input.js';
import { parseOptions, type Io } from './options.js';
import { startService } from './startup.js';
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
  const base = readConfig(values.config as string | undefined);
  const host = (values.host as string | undefined) ?? base.server.host;
  const port = values.port !== undefined ? Number(values.port) : base.server.port;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new UsageError(`--port must be an integer from 0 to 65535, got "${String(values.port)}"`);
  const drainMs = Number(values['drain-ms']);
  if (!Number.isFinite(drainMs) || drainMs < 0)
    throw new UsageError(`--drain-ms must be a number of milliseconds, got "${String(values['drain-ms'])}"`);
  if (base.auth.keys.length === 0 && !isLoopback(host)) {
    throw new UsageError(
      `refusing to listen on ${host} with no auth.keys: open development mode serves loopback addresses only (127.0.0.1, ::1)`,
    );
  }
  const started = await startService({
    base,
    logger,
    ...(values.db !== undefined ? { db: values.db as string } : {}),
    ...(values['replica-id'] !== undefined ? { replicaId: values['replica-id'] as string } : {}),
  });
  const { config, service, store, tracing, dbFile, replica, resumed } = started;
  const { dashboardRoutes } = await import('../dashboard/routes.js').catch(() => ({ dashboardRoutes: undefined }));
  const app = buildServer({ service, logger, plugins: [...(dashboardRoutes ? [dashboardRoutes] : []), mcpRoutes()] });
  try {
    await app.listen({ host, port });
  } catch (e) {
    await started.close({ drainMs: 0 });
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
      await started.close({ drainMs, alsoWait: app.close() });
      logger.info('stopped');
      resolve(0);
    };
    process.once('SIGTERM', () => void stop('SIGTERM'));
    process.once('SIGINT', () => void stop('SIGINT'));
  });
}
