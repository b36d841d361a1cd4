/**
 * Timing for the benchmark suite: what a piece of work costs (wall and CPU time), and a pause between
 * measurements so one does not bleed into the next.
 */
import { readFileSync } from 'node:fs';

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

/**
 * The main thread's own CPU time so far, in µs (user + system), from Linux's per-thread counters, in
 * ticks of 10 ms: good for rounds of a second or more. NaN where there are none. `process.cpuUsage()`
 * counts every thread of the process (the SQLite writer, the trace export thread, …).
 */
export function mainThreadCpuUs(): number {
  try {
    // The fields after the command name (which may hold spaces), from the state on: utime is the 12th, stime the 13th.
    const fields = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return NaN;
  }
}
