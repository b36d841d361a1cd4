/**
 * Small helpers shared by the benchmark suite: a seeded PRNG (so every executor sees the same
 * durations), order statistics, and a few formatting helpers for the report.
 */

export { rng } from '../core/random.js';

/** An integer in [lo, hi], both included. */
export function intIn(rand: () => number, lo: number, hi: number): number {
  return lo + Math.floor(rand() * (hi - lo + 1));
}

export function pick<T>(rand: () => number, xs: readonly T[]): T {
  return xs[Math.floor(rand() * xs.length)] as T;
}

/** The q-quantile (0 ≤ q ≤ 1) by the nearest-rank method; NaN for an empty list. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1));
  return s[rank] as number;
}

/** The median; for an even count, the mean of the two middle values. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

export interface Spread {
  min: number;
  median: number;
  max: number;
}

export function spread(xs: readonly number[]): Spread {
  return { min: Math.min(...xs), median: median(xs), max: Math.max(...xs) };
}

/** Rounds to `digits` decimals (for the JSON figures). */
export function round(x: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function fmt(x: number, digits = 2): string {
  return Number.isFinite(x) ? x.toFixed(digits) : String(x);
}

export function fmtSpread(s: Spread, digits = 2, unit = ''): string {
  return `${fmt(s.median, digits)}${unit} (${fmt(s.min, digits)}–${fmt(s.max, digits)})`;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Lets pending timers and I/O run (a pause between measurements, so one does not bleed into the next). */
export async function settle(ms = 50): Promise<void> {
  await sleep(ms);
  (globalThis as { gc?: () => void }).gc?.();
}

/** Wall and CPU time (user + system, every thread of the process) of a synchronous piece of work. */
export interface Cost {
  wallMs: number;
  cpuMs: number;
}

export function cost<T>(f: () => T): { value: T } & Cost {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = f();
  const wallMs = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { value, wallMs, cpuMs: (c.user + c.system) / 1000 };
}

export async function costAsync<T>(f: () => Promise<T>): Promise<{ value: T } & Cost> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await f();
  const wallMs = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { value, wallMs, cpuMs: (c.user + c.system) / 1000 };
}
