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
  forbidden_host: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  headers_too_large: 431,
  too_many_runs: 429,
  shutting_down: 503,
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
