/**
 * Retry backoff: exponential, capped, with jitter derived from the run id, call id and attempt (not
 * from a random source), so a replay waits exactly as long as the recorded run did.
 */
import type { RetryPolicy } from './tool.js';

/** FNV-1a, 32 bits: a small, stable string hash. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The wait before attempt `failedAttempt + 1`: `backoffMs · 2^(failedAttempt-1)`, capped at
 * `maxBackoffMs`, then "equal jitter": half of it fixed, the other half scaled by a hash in [0, 1).
 *
 * @example backoffDelay({ attempts: 3, backoffMs: 200, maxBackoffMs: 5000 }, 'run_1', 'c1', 1) // 100..199
 */
export function backoffDelay(retry: RetryPolicy, runId: string, callId: string, failedAttempt: number): number {
  const base = Math.min(retry.maxBackoffMs, retry.backoffMs * 2 ** (failedAttempt - 1));
  const unit = hash32(`${runId}/${callId}/${failedAttempt}`) / 2 ** 32;
  return Math.floor(base / 2 + (base / 2) * unit);
}
