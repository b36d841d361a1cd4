/**
 * What `toolgraph serve` and `toolgraph mcp` both do before they serve anything: start the config's
 * MCP servers, open the store (`--db`, `TOOLGRAPH_DB`, `store.url`, then `server.db`; DESIGN §12),
 * start traces if the environment asks for them (DESIGN §15), open the service (joining the cluster on
 * PostgreSQL) and resume the unfinished runs. A step that fails closes what the earlier ones opened and
 * says which step it was, as a usage error (exit 2, no stack trace).
 */
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { openService, type Service } from '../api/service.js';
import type { Config } from '../contract/config.js';
import { chooseStore, describeChoice, openStore } from '../store/select.js';
import type { Store } from '../store/types.js';
import { type Tracing, TracingConfigError, tracingFromEnv } from '../telemetry/index.js';
import { UsageError } from './input.js';
import { type CliMcp, startCliMcp } from './mcp.js';

export interface StartOptions {
  /** The config as read from its file (before the MCP servers add their tools). */
  base: Config;
  /** `--db`, if given. */
  db?: string;
  /** `--replica-id`, if given; else `<host>-<pid>`. */
  replicaId?: string;
  logger: Logger;
}

export interface Started {
  /** The config with the MCP servers' tools in its catalog. */
  config: Config;
  store: Store;
  service: Service;
  tracing: Tracing | undefined;
  /** The store as the logs name it (a file path, or a URL without its password). */
  dbFile: string;
  replica: string;
  /** How many unfinished runs were resumed. */
  resumed: number;
  /**
   * Closes everything, in order: the service (letting running calls finish for `drainMs`), the MCP
   * servers, then, once `alsoWait` has settled (e.g. the HTTP server closing), the last spans and the
   * store. A part that fails to close does not keep the others open.
   */
  close(opts: { drainMs: number; alsoWait?: Promise<unknown> }): Promise<void>;
}

export async function startService(opts: StartOptions): Promise<Started> {
  const { logger } = opts;
  const mcp: CliMcp = await startCliMcp(opts.base, logger);
  const config = mcp.config;
  let store: Store | undefined;
  let tracing: Tracing | undefined;
  const undo = async () => {
    await tracing?.shutdown().catch(() => undefined);
    await store?.close().catch(() => undefined);
    await mcp.close().catch(() => undefined);
  };
  const step = async <T>(run: () => Promise<T>, what: (e: unknown) => Error): Promise<T> => {
    try {
      return await run();
    } catch (e) {
      await undo();
      throw what(e);
    }
  };
  const message = (e: unknown) => (e as Error).message;

  const choice = await step(
    async () => chooseStore({ flag: opts.db, env: process.env.TOOLGRAPH_DB, url: config.store.url, file: config.server.db }),
    (e) => new UsageError(message(e)),
  );
  const dbFile = describeChoice(choice);
  const opened = await step(
    () =>
      openStore(choice, {
        poolSize: config.store.poolSize,
        // A connection fault never ends the process (store/pg-pool.ts): the pool opens another.
        onConnectionError: (err) => logger.warn({ err: err.message }, 'a database connection failed; it is replaced'),
      }),
    (e) => new UsageError(`${dbFile}: cannot open the database: ${message(e)}`),
  );
  store = opened;
  // Traces only with an OTLP endpoint in the environment; otherwise nothing of OpenTelemetry loads.
  tracing = await step(
    () =>
      tracingFromEnv(process.env, {
        onExportError: (err, failures) => logger.warn({ failures, err }, 'traces: export to the OTLP endpoint failed'),
        onDropped: (detail, spans) => logger.warn({ spans, detail }, 'traces: spans dropped (the export thread or its queue fell behind)'),
      }),
    (e) => (e instanceof TracingConfigError ? new UsageError(e.message) : (e as Error)),
  );
  const replica = opts.replicaId ?? `${hostname()}-${process.pid}`;
  const service = await step(
    () =>
      openService({
        config,
        store: opened,
        ...(mcp.executor ? { executor: mcp.executor } : {}),
        ...(tracing ? { tracing } : {}),
        replica,
        logger,
      }),
    (e) => new UsageError(`${dbFile}: cannot join the cluster: ${message(e)}`),
  );
  let recovered: Awaited<ReturnType<Service['recover']>>;
  try {
    recovered = await service.recover();
  } catch (e) {
    // The store itself cannot be read: say so, without a stack trace, and leave the database as it is.
    await service.close().catch(() => undefined);
    await undo();
    throw new UsageError(`${dbFile}: cannot resume the unfinished runs: ${message(e)}`);
  }
  // A run that cannot be taken back ended `failed` (DESIGN §4); the server starts all the same.
  for (const u of recovered.unrecoverable)
    logger.error({ runId: u.runId, reason: u.reason }, 'a run could not be recovered: it ended failed (unrecoverable), its events kept');

  return {
    config,
    store: opened,
    service,
    tracing,
    dbFile,
    replica,
    resumed: recovered.resumed,
    async close({ drainMs, alsoWait }) {
      await service.close({ drainMs }).catch(() => undefined);
      await mcp.close().catch(() => undefined);
      await alsoWait?.catch(() => undefined);
      // The last spans go out, for 2 s at most (a dead collector does not hold the exit).
      await tracing?.shutdown().catch(() => undefined);
      await opened.close().catch(() => undefined);
    },
  };
}
