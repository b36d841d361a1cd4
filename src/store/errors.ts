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
