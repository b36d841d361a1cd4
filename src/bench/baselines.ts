/**
 * The executors toolgraph is compared with, run in the same process on the same batch, each call
 * going through the same builtin `sleep` executor (real timers) as toolgraph's.
 *
 * - `sequential`: one call at a time, in model order.
 * - `partition` (Claude Code's batching): consecutive concurrency-safe calls (those that write nothing)
 *   run together, up to 10 at a time; any other call runs alone; batches run one after the other.
 * - `gate` (all-or-nothing): when every call is safe, all run in parallel up to 4; otherwise the whole
 *   batch runs in order.
 * - `promiseAll`: every call at once; it ignores resources and limits (its overlaps are counted as
 *   violations), but a call still awaits the calls whose output it references, since it cannot run
 *   with a hole in its args.
 *
 * Fairness: the first three keep the same limits as toolgraph (the per-run limit caps their width, and
 * a call waits for a slot of its tool's limit), and inside a batch a call awaits the outputs it
 * references. Calls are taken in model order by a fixed number of workers, so nothing can deadlock.
 */
import type { CallInput } from '../core/calls.js';
import type { Config } from '../config/types.js';
import type { Executor } from '../executors/types.js';
import type { Instance, Interval } from './instance.js';

export const BASELINES = ['sequential', 'partition', 'gate', 'promiseAll'] as const;
export type Baseline = (typeof BASELINES)[number];

export interface Execution {
  /** Wall time from the first dispatch to the last end, ms. */
  makespanMs: number;
  /** Per call, in the same order as the batch; ms from the start of the execution. */
  runs: Interval[];
}

class Semaphore {
  private used = 0;
  private readonly queue: (() => void)[] = [];
  constructor(private readonly cap: number) {}
  async acquire(): Promise<void> {
    if (this.used < this.cap) {
      this.used++;
      return;
    }
    await new Promise<void>((r) => this.queue.push(r));
  }
  release(): void {
    const next = this.queue.shift();
    if (next) next();
    else this.used--;
  }
}

interface Ctx {
  run(i: number): Promise<void>;
}

/** Workers take the calls of `idx` in order, at most `cap` at once. */
async function pool(ctx: Ctx, idx: readonly number[], cap: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < idx.length) await ctx.run(idx[next++] as number);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(cap, idx.length)) }, worker));
}

/** The batches of the consecutive-safe partitioning: runs of safe calls (≤ 10), unsafe calls alone. */
export function partitionBatches(safe: readonly boolean[], max = 10): number[][] {
  const out: number[][] = [];
  let cur: number[] = [];
  safe.forEach((s, i) => {
    if (s && cur.length < max) cur.push(i);
    else if (s) {
      out.push(cur);
      cur = [i];
    } else {
      if (cur.length > 0) out.push(cur);
      out.push([i]);
      cur = [];
    }
  });
  if (cur.length > 0) out.push(cur);
  return out;
}

export async function runBaseline(
  kind: Baseline,
  calls: readonly CallInput[],
  inst: Instance,
  config: Config,
  executor: Executor,
): Promise<Execution> {
  const n = calls.length;
  const runs: Interval[] = calls.map(() => ({ start: NaN, end: NaN }));
  const done = calls.map(() => {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    return { promise, resolve };
  });
  const limited = kind !== 'promiseAll';
  const sems = new Map(Object.entries(inst.limits.tool).map(([t, cap]) => [t, new Semaphore(cap)]));
  const t0 = performance.now();
  const ctx: Ctx = {
    async run(i) {
      const c = calls[i] as CallInput;
      const deps = inst.dataPreds[i] as number[];
      if (deps.length > 0) await Promise.all(deps.map((d) => done[d]?.promise));
      const sem = limited ? sems.get(c.tool) : undefined;
      await sem?.acquire();
      const r = runs[i] as Interval;
      r.start = performance.now() - t0;
      const tool = config.catalog.get(c.tool);
      if (!tool) throw new Error(`unknown tool ${c.tool}`);
      const res = await executor.execute({
        runId: 'baseline',
        callId: c.id,
        tool,
        args: c.args ?? {},
        attempt: 1,
        signal: new AbortController().signal,
        timeoutMs: 60_000,
      });
      r.end = performance.now() - t0;
      sem?.release();
      if (!res.ok) throw new Error(`${kind}: ${c.id} failed: ${res.error.message}`);
      done[i]?.resolve();
    },
  };
  const all = Array.from({ length: n }, (_, i) => i);
  const width = inst.limits.perRun;
  switch (kind) {
    case 'sequential':
      await pool(ctx, all, 1);
      break;
    case 'partition':
      for (const batch of partitionBatches(inst.safe)) await pool(ctx, batch, Math.min(10, width));
      break;
    case 'gate':
      await pool(ctx, all, inst.safe.every(Boolean) ? Math.min(4, width) : 1);
      break;
    case 'promiseAll':
      await Promise.all(all.map((i) => ctx.run(i)));
      break;
  }
  return { makespanMs: performance.now() - t0, runs };
}
