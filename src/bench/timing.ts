/**
 * Timing for the benchmark suite: what a piece of work costs (wall and CPU time), and a pause between
 * measurements so one does not bleed into the next.
 */

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
