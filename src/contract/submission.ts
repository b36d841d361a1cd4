/**
 * A run to start, as the engine takes it. Built once — from a request body by the API's route, from a
 * batch file by the CLI, by a library caller — and handed unchanged through admission to the engine.
 */
import type { CallInput } from '../core/calls.js';
import type { FailureMode } from '../core/tool.js';

export interface SubmitRequest {
  /** Default: a new id. */
  runId?: string;
  /** Default: `default`. The API always sets it: the tenant of the key, or the one the body names. */
  tenant?: string;
  calls: readonly CallInput[];
  /** Default: the config's `defaults.failure`. */
  failure?: FailureMode;
  tags?: Record<string, string>;
  /** Stored with the run so that a repeated request finds it (`Idempotency-Key`). */
  idempotencyKey?: string;
  /** With tracing on: the trace the run continues (kept in its `run.created`). */
  traceparent?: string;
  /** A streamed run: more calls come with `append` until `seal` (DESIGN §10). */
  open?: boolean;
  /** 1 (most urgent) to 5; default 3 (DESIGN §4): among ready calls the more urgent run goes first. */
  priority?: number;
  /**
   * One run per key (DESIGN §4): the tenant's runs that carry the same key do not run at once. Kept in
   * the run's `run.created`.
   */
  concurrencyKey?: string;
  /** What to do when an earlier unfinished run of the tenant holds `concurrencyKey`. Default: `queue`. */
  onConcurrent?: OnConcurrent;
  /** Set by the service for `queue`: the run waits `queued` until `Engine.release` starts it. */
  held?: boolean;
}

/** The strategies of one run per key (DESIGN §4). */
export const ON_CONCURRENT = ['queue', 'cancel_running', 'reject'] as const;
export type OnConcurrent = (typeof ON_CONCURRENT)[number];
/** The longest `concurrencyKey`, in characters. */
export const MAX_CONCURRENCY_KEY_CHARS = 200;
