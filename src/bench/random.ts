/**
 * Seeded random choices for the workloads (so every executor sees the same durations).
 */

export { rng } from '../core/random.js';

/** An integer in [lo, hi], both included. */
export function intIn(rand: () => number, lo: number, hi: number): number {
  return lo + Math.floor(rand() * (hi - lo + 1));
}

export function pick<T>(rand: () => number, xs: readonly T[]): T {
  return xs[Math.floor(rand() * xs.length)] as T;
}
