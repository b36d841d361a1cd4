/**
 * Part 1 of the suite: makespan with real timers. For each family and seed, the same batch runs on
 * toolgraph's engine and on each baseline, one after the other in the same process (the order rotates
 * with the seed, so no executor always runs first after a pause). Also, per seed:
 * - the lower bound `max(critical path, work ÷ capacity)` from the nominal durations;
 * - the bound from the durations the calls actually took in toolgraph's run (its events): how close the
 *   schedule came given this machine's timer lateness;
 * - toolgraph's schedule on the virtual clock (no jitter), and the exact optimum of the full batch
 *   when it splits at cut calls into small segments;
 * - a bracket around the full batch's optimum: a tighter valid lower bound, and the best schedule
 *   known (src/bench/bounds.ts);
 * and, on small batches (≤ 10 calls), the exact optimum by branch and bound, to tell whether any
 * schedule at all could reach the bound.
 */
import type { Config } from '../config/types.js';
import type { Executor } from '../executors/types.js';
import { BASELINES, runBaseline, type Baseline } from './baselines.js';
import { clairvoyantMakespan, laneMakespan, tightBound } from './bounds.js';
import { instanceOf, lowerBound, violations, type Bound, type Instance, type Violations } from './instance.js';
import { decomposedOptimum, optimum, type Decomposed } from './optimum.js';
import { runEngine, runVirtual } from './run-toolgraph.js';
import { settle } from './timing.js';
import { LIMITS, workload, type BenchLimits, type Family } from './workloads.js';

export interface MakespanOptions {
  families: readonly Family[];
  /** Seeds 1..seeds. */
  seeds: number;
  calls: number;
  /** Small instances per family for the exact optimum (seeds 1..smallSeeds), of `smallCalls` calls. */
  smallSeeds: number;
  smallCalls: number;
  /** Time budget of one branch-and-bound search, ms. */
  optimumMs: number;
  log?: (line: string) => void;
}

export type Executed = 'toolgraph' | Baseline;

export interface SeedRun {
  seed: number;
  calls: number;
  bound: Bound;
  /** The sum of the nominal durations. */
  workTotalMs: number;
  toolgraphMs: number;
  eventSpanMs: number;
  /** The bound recomputed with the durations the calls took in toolgraph's run. */
  observedBoundMs: number;
  virtualMs: number;
  baselinesMs: Record<Baseline, number>;
  violations: Record<Executed, Violations>;
  /** The exact optimum of the full batch, when it splits at cut calls (else undefined). */
  exact?: Decomposed;
  /** Where the optimum of the full batch lies: a valid lower bound tighter than `bound`, and the best schedule known. */
  bracket: Bracket;
}

export interface Bracket {
  tightBoundMs: number;
  /** The shortest of: toolgraph's virtual schedule, the clairvoyant list schedule, the lane packing, the exact optimum. */
  bestKnownMs: number;
  bestKnownBy: 'toolgraph' | 'clairvoyant' | 'lanes' | 'exact';
}

export interface SmallRun {
  seed: number;
  calls: number;
  lowerBoundMs: number;
  optimumMs: number;
  proven: boolean;
  /** toolgraph's schedule on the virtual clock. */
  virtualMs: number;
}

export interface FamilyResult {
  name: Family;
  limits: BenchLimits;
  runs: SeedRun[];
  small: SmallRun[];
}

/** Runs one batch through every executor; the order rotates with `turn`. */
async function runSeed(
  family: Family,
  seed: number,
  turn: number,
  o: MakespanOptions,
  config: Config,
  executor: Executor,
): Promise<SeedRun> {
  const w = workload(family, o.calls, seed);
  const inst = instanceOf(w, config, LIMITS);
  const order: Executed[] = ['toolgraph', ...BASELINES];
  const rotated = [...order.slice(turn % order.length), ...order.slice(0, turn % order.length)];
  const ms = {} as Record<Executed, number>;
  const viol = {} as Record<Executed, Violations>;
  let eventSpanMs = NaN;
  let observed: number[] = [];
  for (const who of rotated) {
    await settle(20);
    if (who === 'toolgraph') {
      const e = await runEngine(w.calls, config, executor);
      ms.toolgraph = e.makespanMs;
      eventSpanMs = e.eventSpanMs;
      viol.toolgraph = violations(inst, e.runs);
      observed = e.runs.map((r) => r.end - r.start);
    } else {
      const b = await runBaseline(who, w.calls, inst, config, executor);
      ms[who] = b.makespanMs;
      viol[who] = violations(inst, b.runs);
    }
  }
  const observedInst: Instance = { ...inst, durations: observed };
  const exact = decomposedOptimum(inst, { maxMs: o.optimumMs, maxSegment: 14 });
  const virtualMs = runVirtual(w.calls, config).makespanMs;
  return {
    seed,
    calls: w.calls.length,
    bound: lowerBound(inst),
    workTotalMs: inst.durations.reduce((a, b) => a + b, 0),
    toolgraphMs: ms.toolgraph,
    eventSpanMs,
    observedBoundMs: lowerBound(observedInst).lowerBoundMs,
    virtualMs,
    baselinesMs: { sequential: ms.sequential, partition: ms.partition, gate: ms.gate, promiseAll: ms.promiseAll },
    violations: viol,
    ...(exact.proven && exact.cuts > 0 ? { exact } : {}),
    bracket: bracketOf(inst, virtualMs, exact.proven ? exact.makespanMs : undefined),
  };
}

export function bracketOf(inst: Instance, virtualMs: number, exactMs: number | undefined): Bracket {
  const known: [Bracket['bestKnownBy'], number | undefined][] = [
    ['exact', exactMs],
    ['toolgraph', virtualMs],
    ['clairvoyant', clairvoyantMakespan(inst)],
    ['lanes', laneMakespan(inst)],
  ];
  let [bestKnownBy, bestKnownMs]: [Bracket['bestKnownBy'], number] = ['toolgraph', virtualMs];
  for (const [by, x] of known) if (x !== undefined && x < bestKnownMs) [bestKnownBy, bestKnownMs] = [by, x];
  return { tightBoundMs: tightBound(inst).lowerBoundMs, bestKnownMs, bestKnownBy };
}

export function smallRun(family: Family, seed: number, calls: number, config: Config, optimumMs: number): SmallRun {
  const w = workload(family, calls, seed);
  const inst = instanceOf(w, config, LIMITS);
  const opt = optimum(inst, { maxMs: optimumMs });
  return {
    seed,
    calls: w.calls.length,
    lowerBoundMs: lowerBound(inst).lowerBoundMs,
    optimumMs: opt.makespanMs,
    proven: opt.proven,
    virtualMs: runVirtual(w.calls, config).makespanMs,
  };
}

/** One untimed pass of every executor over a small batch, so the first measurement is not a cold start. */
async function warmUp(config: Config, executor: Executor): Promise<void> {
  const w = workload('random-dag', 12, 999);
  const inst = instanceOf(w, config, LIMITS);
  await runEngine(w.calls, config, executor);
  for (const b of BASELINES) await runBaseline(b, w.calls, inst, config, executor);
}

export async function runMakespan(o: MakespanOptions, config: Config, executor: Executor): Promise<FamilyResult[]> {
  await warmUp(config, executor);
  const out: FamilyResult[] = [];
  for (const family of o.families) {
    const runs: SeedRun[] = [];
    for (let seed = 1; seed <= o.seeds; seed++) {
      const r = await runSeed(family, seed, seed - 1, o, config, executor);
      runs.push(r);
      o.log?.(
        `  ${family} seed ${seed}: ${r.calls} calls, bound ${r.bound.lowerBoundMs.toFixed(0)} ms, toolgraph ${r.toolgraphMs.toFixed(0)} ms ` +
          `(${(r.toolgraphMs / r.bound.lowerBoundMs).toFixed(3)}×), virtual ${r.virtualMs} ms, ` +
          BASELINES.map((b) => `${b} ${r.baselinesMs[b].toFixed(0)}`).join(', '),
      );
    }
    const small: SmallRun[] = [];
    for (let seed = 1; seed <= o.smallSeeds; seed++) small.push(smallRun(family, seed, o.smallCalls, config, o.optimumMs));
    out.push({ name: family, limits: LIMITS, runs, small });
  }
  return out;
}
