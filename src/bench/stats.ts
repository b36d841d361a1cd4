/**
 * Order statistics and their formatting, for the benchmark's figures and report: quantiles, the
 * median, the spread over seeds, rounding for the JSON document.
 */

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
