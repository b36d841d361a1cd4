/**
 * The API's error codes, each with its HTTP status: the one table every error answer is made from.
 * A body is `{ "error": { "code", "message", "details"? } }` (DESIGN §7). Errors raised below the
 * API (the scheduler's, the store's, Fastify's) are translated to these codes by the one error
 * handler (api/errors.ts); they never reach a client under their own names.
 */
export const API_ERRORS = {
  invalid_request: 400,
  invalid_json: 400,
  invalid_args: 400,
  invalid_cursor: 400,
  unauthorized: 401,
  forbidden: 403,
  forbidden_host: 403,
  /** A run `priority` more urgent than the key's `auth.keys[].maxPriority` (DESIGN §4). */
  priority_not_allowed: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  conflict: 409,
  /** `onConcurrent: reject` (DESIGN §4): an unfinished run of the tenant holds the `concurrencyKey`; `details.runId` names it. */
  concurrent_run: 409,
  /**
   * A client tool's result (DESIGN §17) whose token no attempt waits for: a wrong token, an earlier
   * attempt's, or one that timed out, was cancelled or was taken over. Nothing was changed.
   */
  stale_token: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  too_many_runs: 429,
  headers_too_large: 431,
  internal: 500,
  shutting_down: 503,
  /** The store cannot be reached or cannot write now (DESIGN §7 Faults); with `Retry-After`. */
  store_unavailable: 503,
  /**
   * Several replicas (DESIGN §12): the replica that owns the run did not apply a command in time (it
   * may be dying; another takes the run over within the lease); with `Retry-After`.
   */
  owner_unavailable: 503,
} as const;

export type ApiErrorCode = keyof typeof API_ERRORS;

/** The body of every error answer. */
export function errorBody(code: ApiErrorCode, message: string, details?: unknown) {
  return { error: details === undefined ? { code, message } : { code, message, details } };
}
