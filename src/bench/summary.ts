/**
 * From raw measurements to the figures the issue asks for: per family the medians (and min–max over
 * the seeds) of makespans, ratios to the bound and speedups; the JSON document of `--out`; and the
 * targets, each with whether it was met.
 */
import { BASELINES, type Baseline } from './baselines.js';
import type { CoreResult } from './core.js';
import type { HttpResult } from './http.js';
import type { FamilyResult } from './makespan.js';
import { median, round, spread, type Spread } from './stats.js';

export interface FamilySummary {
  name: string;
  calls: number;
  seeds: number;
  limits: FamilyResult['limits'];
  lowerBoundMs: number;
  criticalPathMs: number;
  workMs: number;
  toolgraphMs: number;
  ratioToBound: Spread;
  /** Event span ÷ the bound of the durations the calls actually took. */
  ratioToObservedBound: Spread;
  /** The virtual-clock schedule ÷ the bound: the scheduling policy alone. */
  virtualRatio: Spread;
  /** Real makespan ÷ virtual makespan: what real timers and the shell add. */
  realToVirtual: Spread;
  /** The sequential baseline ÷ the sum of nominal durations: this machine's timer lateness per call. */
  timerInflation: Spread;
  baselinesMs: Record<Baseline, number>;
  speedup: Record<Exclude<Baseline, 'promiseAll'>, Spread>;
  violations: { toolgraph: number[]; promiseAll: number[]; promiseAllData: number[]; toolgraphData: number[] };
  promiseAllPeak: number;
  small: { instances: number; optimumToBound: Spread; virtualToOptimum: Spread; reachable: number; proven: number };
  exact?: { instances: number; exactToBound: Spread; toolgraphVirtualToExact: Spread; realToExact: Spread };
  /** Full-size batches: the tighter lower bound and the best schedule known, both ÷ the bound. */
  bracket: { tightToBound: Spread; bestKnownToBound: Spread; virtualToBestKnown: Spread; bestKnownBy: string[]; unreachable: number };
}

export function summarizeFamily(f: FamilyResult): FamilySummary {
  const r = f.runs;
  const med = (g: (x: (typeof r)[number]) => number) => median(r.map(g));
  const sp = (g: (x: (typeof r)[number]) => number) => spread(r.map(g));
  const speedup = {} as FamilySummary['speedup'];
  for (const b of ['sequential', 'partition', 'gate'] as const) speedup[b] = sp((x) => x.baselinesMs[b] / x.toolgraphMs);
  const baselinesMs = {} as Record<Baseline, number>;
  for (const b of BASELINES) baselinesMs[b] = med((x) => x.baselinesMs[b]);
  const exactRuns = r.filter((x) => x.exact);
  const s = f.small;
  return {
    name: f.name,
    calls: med((x) => x.calls),
    seeds: r.length,
    limits: f.limits,
    lowerBoundMs: med((x) => x.bound.lowerBoundMs),
    criticalPathMs: med((x) => x.bound.criticalPathMs),
    workMs: med((x) => x.bound.workMs),
    toolgraphMs: med((x) => x.toolgraphMs),
    ratioToBound: sp((x) => x.toolgraphMs / x.bound.lowerBoundMs),
    ratioToObservedBound: sp((x) => x.eventSpanMs / x.observedBoundMs),
    virtualRatio: sp((x) => x.virtualMs / x.bound.lowerBoundMs),
    realToVirtual: sp((x) => x.toolgraphMs / x.virtualMs),
    timerInflation: sp((x) => x.baselinesMs.sequential / x.workTotalMs),
    baselinesMs,
    speedup,
    violations: {
      toolgraph: r.map((x) => x.violations.toolgraph.hazards),
      toolgraphData: r.map((x) => x.violations.toolgraph.data),
      promiseAll: r.map((x) => x.violations.promiseAll.hazards),
      promiseAllData: r.map((x) => x.violations.promiseAll.data),
    },
    promiseAllPeak: med((x) => x.violations.promiseAll.peak),
    small: {
      instances: s.length,
      optimumToBound: spread(s.map((x) => x.optimumMs / x.lowerBoundMs)),
      virtualToOptimum: spread(s.map((x) => x.virtualMs / x.optimumMs)),
      reachable: s.filter((x) => x.optimumMs <= x.lowerBoundMs + 1e-9).length,
      proven: s.filter((x) => x.proven).length,
    },
    bracket: {
      tightToBound: sp((x) => x.bracket.tightBoundMs / x.bound.lowerBoundMs),
      bestKnownToBound: sp((x) => x.bracket.bestKnownMs / x.bound.lowerBoundMs),
      virtualToBestKnown: sp((x) => x.virtualMs / x.bracket.bestKnownMs),
      bestKnownBy: [...new Set(r.map((x) => x.bracket.bestKnownBy))],
      unreachable: r.filter((x) => x.bracket.tightBoundMs > 1.05 * x.bound.lowerBoundMs + 1e-9).length,
    },
    ...(exactRuns.length > 0
      ? {
          exact: {
            instances: exactRuns.length,
            exactToBound: spread(exactRuns.map((x) => (x.exact?.makespanMs as number) / x.bound.lowerBoundMs)),
            toolgraphVirtualToExact: spread(exactRuns.map((x) => x.virtualMs / (x.exact?.makespanMs as number))),
            realToExact: spread(exactRuns.map((x) => x.toolgraphMs / (x.exact?.makespanMs as number))),
          },
        }
      : {}),
  };
}

export interface Target {
  name: string;
  goal: string;
  result: string;
  met: boolean;
}

export function targets(fams: FamilySummary[], core: CoreResult | undefined, http: HttpResult | undefined): Target[] {
  const out: Target[] = [];
  if (fams.length > 0) {
    const worst = [...fams].sort((a, b) => b.ratioToBound.median - a.ratioToBound.median)[0] as FamilySummary;
    const over = fams.filter((f) => f.ratioToBound.median > 1.05).map((f) => `${f.name} ${f.ratioToBound.median.toFixed(3)}×`);
    const virtualOk = fams.filter((f) => f.virtualRatio.median <= 1.05).length;
    const result = over.length === 0 ? `worst: ${worst.name} ${worst.ratioToBound.median.toFixed(3)}×` : `over: ${over.join(', ')}`;
    out.push({
      name: 'makespan',
      goal: 'makespan ≤ 1.05× the lower bound in every family (median over seeds)',
      result:
        `${result} (on the virtual clock, without timer lateness: ${virtualOk} of ${fams.length} families within 1.05×; ` +
        `no schedule at all is within 1.05× on ${fams.reduce((n, f) => n + f.bracket.unreachable, 0)} of ${fams.reduce((n, f) => n + f.seeds, 0)} batches)`,
      met: over.length === 0,
    });
    const mixed = fams.find((f) => f.name === 'mixed-rw');
    if (mixed) {
      out.push({
        name: 'mixed-rw',
        goal: '≥ 2× faster than consecutive-safe partitioning on mixed-rw (median)',
        result: `${mixed.speedup.partition.median.toFixed(2)}× (min ${mixed.speedup.partition.min.toFixed(2)}×)`,
        met: mixed.speedup.partition.median >= 2,
      });
    }
    const hazards = fams.reduce(
      (n, f) => n + f.violations.toolgraph.reduce((a, b) => a + b, 0) + f.violations.toolgraphData.reduce((a, b) => a + b, 0),
      0,
    );
    const runs = fams.reduce((n, f) => n + f.seeds, 0);
    out.push({
      name: 'violations',
      goal: 'zero hazard violations for toolgraph',
      result: `${hazards} in ${runs} runs`,
      met: hazards === 0,
    });
  }
  if (core) {
    out.push({
      name: 'core',
      goal: 'core overhead ≤ 20 µs per node (scheduler, virtual clock, 100k nodes, CPU time)',
      result: `${core.usPerNode.toFixed(1)} µs/node (wall ${core.usPerNodeWall.toFixed(1)})`,
      met: core.usPerNode <= 20,
    });
  }
  if (http) {
    out.push({
      name: 'http',
      goal: "HTTP ≥ 50% of the bare route's runs per second",
      result: `${(http.ratio * 100).toFixed(1)}% (${http.runsPerSec.toFixed(0)} vs ${http.bareRunsPerSec.toFixed(0)} runs/s)`,
      met: http.ratio >= 0.5,
    });
  }
  return out;
}

/** The `--out` document: the shape (medians), plus spreads and extras beside it. */
export function toJson(fams: FamilySummary[], core: CoreResult | undefined, http: HttpResult | undefined, meta: Record<string, unknown>) {
  const r = (x: number) => round(x, 3);
  const rs = (s: Spread) => ({ min: r(s.min), median: r(s.median), max: r(s.max) });
  return {
    meta,
    families: fams.map((f) => ({
      name: f.name,
      calls: f.calls,
      lowerBoundMs: r(f.lowerBoundMs),
      toolgraphMs: r(f.toolgraphMs),
      ratioToBound: r(f.ratioToBound.median),
      baselinesMs: Object.fromEntries(BASELINES.map((b) => [b, r(f.baselinesMs[b])])),
      speedup: { sequential: r(f.speedup.sequential.median), partition: r(f.speedup.partition.median), gate: r(f.speedup.gate.median) },
      violations: { toolgraph: median(f.violations.toolgraph), promiseAll: median(f.violations.promiseAll) },
      seeds: f.seeds,
      limits: f.limits,
      spread: {
        ratioToBound: rs(f.ratioToBound),
        ratioToObservedBound: rs(f.ratioToObservedBound),
        virtualRatio: rs(f.virtualRatio),
        realToVirtual: rs(f.realToVirtual),
        timerInflation: rs(f.timerInflation),
        speedup: { sequential: rs(f.speedup.sequential), partition: rs(f.speedup.partition), gate: rs(f.speedup.gate) },
        violations: f.violations,
      },
      small: { ...f.small, optimumToBound: rs(f.small.optimumToBound), virtualToOptimum: rs(f.small.virtualToOptimum) },
      bracket: {
        ...f.bracket,
        tightToBound: rs(f.bracket.tightToBound),
        bestKnownToBound: rs(f.bracket.bestKnownToBound),
        virtualToBestKnown: rs(f.bracket.virtualToBestKnown),
      },
      ...(f.exact
        ? {
            exact: {
              instances: f.exact.instances,
              exactToBound: rs(f.exact.exactToBound),
              toolgraphVirtualToExact: rs(f.exact.toolgraphVirtualToExact),
              realToExact: rs(f.exact.realToExact),
            },
          }
        : {}),
    })),
    ...(core
      ? {
          core: {
            ...Object.fromEntries(
              Object.entries(core).map(([k, v]) => [
                k,
                typeof v === 'number' ? r(v) : Object.fromEntries(Object.entries(v).map(([n, x]) => [n, r(x as number)])),
              ]),
            ),
          },
        }
      : {}),
    ...(http ? { http: Object.fromEntries(Object.entries(http).map(([k, v]) => [k, typeof v === 'number' ? r(v) : v])) } : {}),
    targets: targets(fams, core, http),
  };
}
