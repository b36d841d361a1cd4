/**
 * Store errors: one class with a stable `code` (DESIGN §22), so the API layer can map them to HTTP
 * (`invalid_cursor` and `invalid_limit` are bad input; the others mean the caller broke the log's rules).
 */
export const STORE_ERROR_CODES = [
  /** A `cursor` that no `list` ever returned. */
  'invalid_cursor',
  /** A `limit` outside 1..200. */
  'invalid_limit',
  /** An event whose `seq` is not exactly the next one of its run. */
  'seq_out_of_order',
  /** An event whose shape or place in the log is wrong (a first event that is not `run.created`…). */
  'invalid_event',
  /** A `run.created` that reuses a tenant's idempotency key. */
  'duplicate_idempotency_key',
  /**
   * The database cannot be reached or cannot write (PostgreSQL gone, a full disk): nothing of the batch
   * is known to be stored. Not the caller's fault; the same batch may go in later.
   */
  'store_unavailable',
  /**
   * Several replicas (DESIGN §12): this replica's lease ended, so another may own its runs now; it
   * writes nothing more to them (the fence), drops them, and takes runs again under a new lease.
   */
  'lease_lost',
] as const;
export type StoreErrorCode = (typeof STORE_ERROR_CODES)[number];

export class StoreError extends Error {
  override readonly name = 'StoreError';
  constructor(
    readonly code: StoreErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** Whether an error says the database is away (try again later), rather than that a batch broke a rule. */
export function isStoreUnavailable(err: unknown): boolean {
  return err instanceof StoreError && err.code === 'store_unavailable';
}

/** Whether an error says this replica lost its lease (see `lease_lost`). */
export function isLeaseLost(err: unknown): boolean {
  return err instanceof StoreError && err.code === 'lease_lost';
}

/**
 * SQLSTATE classes that mean the server or the connection is in trouble, not the statement: 08
 * (connection exception), 53 (insufficient resources), 57 (operator intervention: 57P01 terminated by
 * an administrator, 57P02 crash shutdown, 57P03 cannot connect now, 57014 a statement cancelled by
 * `statement_timeout`), 58 (system error).
 */
const UNAVAILABLE_STATES = /^(08|53|57|58)/;

/** Node socket errors that mean the server cannot be reached or went away. */
const UNAVAILABLE_SYSCALLS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** What node-postgres and pg-pool say, without a code, when a connection fails or a bound passes. */
const UNAVAILABLE_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|not queryable|Client was closed|connection timeout|Cannot use a pool after calling end/i;

/**
 * Whether a database driver's error means "the store is unavailable now" (try again later) rather than
 * "this statement is wrong": the one place that reads driver errors (DESIGN §7 Faults). A `StoreError`
 * says so by its code; a pg error by its SQLSTATE class; a socket error by its code; pg's own errors
 * without a code (a terminated connection, the pool's connect bound, a statement past `query_timeout`)
 * by their message.
 */
export function isUnavailableError(err: unknown): boolean {
  if (err instanceof StoreError) return err.code === 'store_unavailable';
  if (err === null || typeof err !== 'object') return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (/^[0-9A-Z]{5}$/.test(code)) return UNAVAILABLE_STATES.test(code);
    if (UNAVAILABLE_SYSCALLS.has(code)) return true;
  }
  const message = (err as { message?: unknown }).message;
  if (typeof message === 'string' && UNAVAILABLE_MESSAGES.test(message)) return true;
  const cause = (err as { cause?: unknown }).cause;
  return cause !== undefined && cause !== err && isUnavailableError(cause);
}

/**
 * A driver error as the store reports it: a `StoreError('store_unavailable')` naming `where` (host and
 * port, never a password) when `isUnavailableError` says so; anything else as it is.
 */
export function asStoreError(err: unknown, where: string): unknown {
  if (err instanceof StoreError || !isUnavailableError(err)) return err;
  const reason = (err as Error | null)?.message ?? String(err);
  return new StoreError('store_unavailable', `PostgreSQL at ${where} cannot be reached: ${reason}`);
}
