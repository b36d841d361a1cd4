import { pino } from 'pino';
import { authenticate, isLoopback, type Principal } from '../api/auth.js';
import { ApiError } from '../api/errors.js';
import { buildServer } from '../api/server.js';
import { mcpRoutes } from '../mcp-server/http.js';
import { serveStdio } from '../mcp-server/stdio.js';
import { readConfig, UsageError } from './input.js';
import { startService } from './startup.js';
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

  const started = await startService({
    base,
    logger,
    ...(values.db !== undefined ? { db: values.db as string } : {}),
    ...(values['replica-id'] !== undefined ? { replicaId: values['replica-id'] as string } : {}),
  });
  const { service } = started;
  let closeApp: (() => Promise<unknown>) | undefined;
  const cleanup = () => started.close({ drainMs, ...(closeApp ? { alsoWait: closeApp() } : {}) });

  if (port !== undefined) {
    const { dashboardRoutes } = await import('../dashboard/routes.js').catch(() => ({ dashboardRoutes: undefined }));
    const app = buildServer({ service, logger, plugins: [...(dashboardRoutes ? [dashboardRoutes] : []), mcpRoutes()] });
    try {
      await app.listen({ host, port });
    } catch (e) {
      await cleanup();
      throw new UsageError(`cannot listen on ${host}:${port}: ${(e as Error).message}`);
    }
    closeApp = () => app.close();
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
