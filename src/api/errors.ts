/**
 * Errors to HTTP, in one place. `ApiError` is an error the API raises itself, with a code of the
 * catalog (contract/errors.ts), which gives its status. `httpErrorOf` is what the one Fastify error
 * handler (server.ts) answers for any error: an `ApiError` as it is; an error raised below the API
 * (the scheduler's, the store's, Fastify's own) translated by `TRANSLATED`; a database driver's error that
 * means the store is away (store/errors.ts `isUnavailableError`) a `503 store_unavailable`; anything else a
 * logged 500.
 */
import type { FastifyError } from 'fastify';
import { SchedulerError } from '../core/scheduler.js';
import { isUnavailableError, StoreError, type StoreErrorCode } from '../store/errors.js';
import { API_ERRORS, errorBody, type ApiErrorCode } from '../contract/errors.js';

export { errorBody, type ApiErrorCode };

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

/**
 * The API code of each error code raised below the API, by who raises it. A code that is not here
 * (a store's `seq_out_of_order`, say) is a bug, not bad input: a 500.
 */
const TRANSLATED: {
  scheduler: Record<SchedulerError['code'], ApiErrorCode>;
  store: Partial<Record<StoreErrorCode, ApiErrorCode>>;
  fastify: Record<string, ApiErrorCode>;
} = {
  scheduler: { run_not_found: 'not_found', call_not_found: 'not_found', conflict: 'conflict', invalid_args: 'invalid_args' },
  store: {
    invalid_cursor: 'invalid_cursor',
    invalid_limit: 'invalid_request',
    store_unavailable: 'store_unavailable',
    lease_lost: 'store_unavailable',
  },
  fastify: {
    FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
    FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_json',
    FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
    FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
    FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'invalid_request',
    FST_ERR_BAD_URL: 'invalid_request',
    FST_ERR_ASYNC_CONSTRAINT: 'invalid_request',
  },
};

/** What to answer for an error. `unexpected` marks a 500: log it, and tell the client nothing of it. */
export interface HttpError {
  status: number;
  body: ReturnType<typeof errorBody>;
  headers: Record<string, string>;
  unexpected: boolean;
}

function answer(code: ApiErrorCode, message: string, details?: unknown, headers: Record<string, string> = {}): HttpError {
  return { status: API_ERRORS[code], body: errorBody(code, message, details), headers, unexpected: code === 'internal' };
}

const UNEXPECTED = 'an unexpected error occurred; it has been logged';

export function httpErrorOf(err: unknown): HttpError {
  if (err instanceof ApiError) return answer(err.code, err.message, err.details, err.headers);
  if (err instanceof SchedulerError) return answer(TRANSLATED.scheduler[err.code], err.message);
  if (err instanceof StoreError) {
    const code = TRANSLATED.store[err.code];
    if (code === 'store_unavailable') return storeUnavailable();
    return code ? answer(code, err.message) : answer('internal', UNEXPECTED);
  }
  // A driver's error that reached the API as it is (a connection terminated, the pool's connect bound,
  // a statement past its bound): the store is away, not a bug (DESIGN §7 Faults).
  if (isUnavailableError(err)) return storeUnavailable();
  const f = (err ?? {}) as Partial<FastifyError>;
  const code = f.code === undefined ? undefined : TRANSLATED.fastify[f.code];
  if (code) return answer(code, f.message ?? code);
  // Another 4xx that Fastify raised for a request it refused: bad input, under Fastify's status.
  if (typeof f.statusCode === 'number' && f.statusCode >= 400 && f.statusCode < 500) {
    return { ...answer('invalid_request', f.message ?? 'invalid request'), status: f.statusCode };
  }
  return answer('internal', UNEXPECTED);
}

function storeUnavailable(): HttpError {
  return answer('store_unavailable', 'the store cannot be reached now; retry later', undefined, { 'retry-after': STORE_RETRY_AFTER });
}

/** `Retry-After` (seconds) of a `503 store_unavailable`: the engine tries the store again every second. */
export const STORE_RETRY_AFTER = '1';
