/**
 * The PostgreSQL connections of a process (DESIGN §7 Faults, §12): every wait on the database is
 * bounded, and no connection fault ends the process.
 *
 * - Bounds (`PG_BOUNDS`): a connection, or a free place in the pool, within `connectTimeoutMs`; a
 *   statement's answer within `statementTimeoutMs` (pg's `query_timeout`: a frozen server, a lost
 *   network). Past them the driver's error is `store_unavailable` (errors.ts), so every request that
 *   needs the database answers `503` within their sum (5 s by default), never later. The server
 *   cancels a statement of ours itself at twice the bound (`statement_timeout`), so one that we gave
 *   up on does not hold locks for long.
 * - Faults: every client of the pool has an `'error'` listener from its first moment (pg emits
 *   `'error'` on a client whose connection ends, even one checked out and idle between statements of
 *   a transaction, and an unheard `'error'` ends the process). A client whose statement passed the
 *   bound is cut off (its socket destroyed): it takes no more statements (a `ROLLBACK` after it fails
 *   at once instead of waiting behind the lost one) and the pool drops it on release and opens another.
 */
import pg from 'pg';

/**
 * The pool as the rest of the service holds it: a handle it passes to the statements of
 * store/postgres/*, without touching the driver itself.
 */
export type PgPool = pg.Pool;

/** The bounds of every wait on PostgreSQL (ms). */
export const PG_BOUNDS = {
  /** A new connection, or a free one of the pool. */
  connectTimeoutMs: 2000,
  /** One statement's answer. */
  statementTimeoutMs: 3000,
} as const;

export interface PgPoolOptions {
  url: string;
  /** The most connections at once; default 10. */
  max?: number;
  /** Default `PG_BOUNDS.connectTimeoutMs`. */
  connectTimeoutMs?: number;
  /** Default `PG_BOUNDS.statementTimeoutMs`; 0: no bound (migrations, which wait for each other's lock). */
  statementTimeoutMs?: number;
  /** Told of each connection fault (logged by the caller); the pool goes on with a new connection. */
  onError?: (err: Error) => void;
}

/** BIGINT columns hold epoch milliseconds: numbers, not strings. */
const TYPES = {
  getTypeParser: (oid: number, format?: string) => (oid === 20 ? Number : pg.types.getTypeParser(oid, format as 'text')),
} as pg.CustomTypesConfig;

/** A pool whose waits are bounded and whose faults never end the process (see the top of the file). */
export function createPgPool(opts: PgPoolOptions): pg.Pool {
  const statementMs = opts.statementTimeoutMs ?? PG_BOUNDS.statementTimeoutMs;
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.max ?? 10,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? PG_BOUNDS.connectTimeoutMs,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    ...(statementMs > 0 ? { query_timeout: statementMs, statement_timeout: 2 * statementMs } : {}),
    types: TYPES,
  });
  const onError = opts.onError ?? (() => {});
  // An idle connection that breaks: the pool drops it; the next statement opens another.
  pool.on('error', (err) => onError(err));
  pool.on('connect', (client) => guardClient(client, onError));
  return pool;
}

/**
 * Makes a client safe to hold: an `'error'` listener for its whole life, and cut off once a statement
 * passes its bound (see the top of the file). Idempotent.
 */
export function guardClient(client: pg.Client, onError: (err: Error) => void = () => {}): void {
  const c = client as pg.Client & { [GUARDED]?: true };
  if (c[GUARDED]) return;
  c[GUARDED] = true;
  client.on('error', (err) => onError(err));
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  const cutOff = (err: unknown) => {
    if ((err as Error | null)?.message !== 'Query read timeout') return;
    // The lost statement holds the connection: nothing more goes through it.
    (client as unknown as { _queryable: boolean })._queryable = false;
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  };
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const last = args.length - 1;
    const cb = args[last];
    if (typeof cb === 'function') {
      args[last] = (err: unknown, res: unknown) => {
        if (err) cutOff(err);
        (cb as (e: unknown, r: unknown) => void)(err, res);
      };
      return query(...args);
    }
    const out = query(...args);
    if (out instanceof Promise) out.catch(cutOff);
    return out;
  };
}

const GUARDED = Symbol('toolgraph.guarded');
