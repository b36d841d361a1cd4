/**
 * The API's error catalog: stable codes, each with its HTTP status. One Fastify error handler
 * (server.ts) turns every error into `{ "error": { "code", "message", "details"? } }`.
 */
export const API_ERRORS = {
  invalid_request: 400,
  invalid_json: 400,
  invalid_args: 400,
  invalid_cursor: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  too_many_runs: 429,
  shutting_down: 503,
  store_unavailable: 503,
} as const;

export type ApiErrorCode = keyof typeof API_ERRORS;

export class ApiError extends Error {
  readonly status: number;

  constructor(
    readonly code: ApiErrorCode,
    message: string,
    readonly details?: unknown,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = API_ERRORS[code];
  }
}

export function errorBody(code: string, message: string, details?: unknown) {
  return { error: details === undefined ? { code, message } : { code, message, details } };
}

/** `Retry-After` (seconds) of a `503 store_unavailable`: the engine tries the store again every second. */
export const STORE_RETRY_AFTER = '1';
