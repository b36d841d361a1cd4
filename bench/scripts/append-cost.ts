/**
 * The cost of streaming a run one call per append (DESIGN §10), in the pure core: how the time per
 * append grows with the number of calls already in the run. It should stay flat (linear in total).
 *
 * The batch is `streamedBatch` (streamed-batch.ts), a realistic mix: reads of distinct files, and every fourth
 * call a write that uses the previous read's output (a data edge) and writes a file an earlier call read
 * (a conflict). Two variants of it: `live`, where every reference names an earlier call (each call is
 * settled when it arrives), and `forward`, where every eighth call also refers to the call after it (it
 * waits for that call) and every 64th call refers to a tool by name (it waits for the seal).
 *
 * Measured: the `StreamPlanner` alone (append N calls one at a time, then seal), and the `Scheduler`
 * (open a run, append the calls one at a time, seal; attempts are started, none ends).
 *
 * Measured on a loaded 2-core box (ms, planner / scheduler, `live`): before this work (the planner
 * planned the whole run again on every append) 1000 calls 1915 / 1720, 2000 calls 7991 / 8849, 10,000
 * calls ≈ 990 s (scheduler, one run); after, warm, 1000 calls 17 / 18 (cold, with the JIT: 119 / 136),
 * 10,000 calls 107 / 179, and the time per append stays flat up to 40,000 calls.
 *
 *   npx tsx bench/scripts/append-cost.ts [--n 1000,10000] [--repeat 5] [--variant live,forward] [--only planner|scheduler] [--no-warmup]
 */
import type { CallInput } from '../../src/core/calls.js';
import { Scheduler } from '../../src/core/scheduler.js';
import { StreamPlanner } from '../../src/core/stream-plan.js';
import { STREAM_CONFIG as CONFIG, streamedBatch } from './streamed-batch.js';

function planner(calls: CallInput[]): number {
  const t0 = performance.now();
  const p = new StreamPlanner('t', CONFIG.catalog, CONFIG.policy);
  for (const c of calls) p.add([c]);
  p.seal();
  return performance.now() - t0;
}

function scheduler(calls: CallInput[]): number {
  const t0 = performance.now();
  const s = new Scheduler({ catalog: CONFIG.catalog, policy: CONFIG.policy, limits: CONFIG.limits, defaults: CONFIG.defaults });
  s.submit(0, { runId: 'r', tenant: 't', calls: [], open: true });
  for (const c of calls) s.append(0, 'r', [c]);
  s.seal(0, 'r');
  return performance.now() - t0;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

function arg(name: string, fallback: string): string {
  const k = process.argv.indexOf(`--${name}`);
  return k >= 0 ? (process.argv[k + 1] as string) : fallback;
}

const sizes = arg('n', '1000,10000').split(',').map(Number);
const repeat = Number(arg('repeat', '5'));
const variants = arg('variant', 'live,forward').split(',');
const only = arg('only', 'both');
// Warm up (the JIT, which takes a few thousand appends), so the first size measured is not the slowest
// per call; --no-warmup to see a cold start.
if (!process.argv.includes('--no-warmup')) {
  for (let k = 0; k < 8; k++) {
    for (const forward of [false, true]) {
      planner(streamedBatch(1000, forward));
      scheduler(streamedBatch(1000, forward));
    }
  }
}
console.log('calls   variant  planner ms  scheduler ms  (median of', repeat, 'runs, one call per append, then seal)');
for (const n of sizes) {
  for (const forward of variants.map((v) => v === 'forward')) {
    const calls = streamedBatch(n, forward);
    // Big runs before the fix take seconds to minutes: fewer repeats there.
    const reps = n > 5000 && repeat > 1 ? Math.max(1, Math.floor(repeat / 2)) : repeat;
    const p: number[] = [];
    const s: number[] = [];
    for (let r = 0; r < reps; r++) {
      p.push(only === 'scheduler' ? NaN : planner(calls));
      s.push(only === 'planner' ? NaN : scheduler(calls));
    }
    console.log(
      `${String(n).padStart(6)}  ${(forward ? 'forward' : 'live').padEnd(7)}  ${median(p).toFixed(1).padStart(10)}  ${median(s).toFixed(1).padStart(12)}`,
    );
  }
}
