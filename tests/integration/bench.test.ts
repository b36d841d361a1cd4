/**
 * The benchmark harness works: the smallest configuration of every part runs and the `--out` JSON has
 * the documented shape; the pieces (workloads, bound, violation check, baselines' batching, exact
 * optimum) give known answers on hand-made cases. No timing assertions: timings are the benchmark's job.
 */
import { describe, expect, it } from 'vitest';
import { partitionBatches } from '../../src/bench/baselines.js';
import { clairvoyantMakespan, laneMakespan, tightBound } from '../../src/bench/bounds.js';
import { instanceOf, lowerBound, violations, type Instance } from '../../src/bench/instance.js';
import { decomposedOptimum, optimum } from '../../src/bench/optimum.js';
import { PRESETS, runSuite } from '../../src/bench/suite.js';
import { runVirtual } from '../../src/bench/run-toolgraph.js';
import { benchConfig, FAMILIES, LIMITS, workload } from '../../src/bench/workloads.js';
import { main } from '../../src/cli/main.js';

const config = benchConfig();

function inst(
  durations: number[],
  preds: number[][],
  tools?: string[],
  limits = { perRun: 2, tool: {} as Record<string, number> },
): Instance {
  return {
    ids: durations.map((_, i) => `c${i}`),
    tools: tools ?? durations.map(() => 'search'),
    durations,
    dataPreds: preds,
    preds,
    conflicts: [],
    safe: durations.map(() => true),
    limits,
  };
}

describe('bench workloads', () => {
  it('are deterministic, 20–50 ms per call, and plan without diagnostics', () => {
    for (const f of FAMILIES) {
      const a = workload(f, 20, 3);
      expect(workload(f, 20, 3)).toEqual(a);
      expect(workload(f, 20, 4)).not.toEqual(a);
      for (const c of a.calls) expect((c.args as { ms: number }).ms).toBeGreaterThanOrEqual(20);
      for (const c of a.calls) expect((c.args as { ms: number }).ms).toBeLessThanOrEqual(50);
      expect(() => instanceOf(a, config, LIMITS)).not.toThrow();
    }
  });

  it('finds every conflicting pair of a read/write chain, in model order', () => {
    const w = {
      family: 'rw-chain' as const,
      seed: 0,
      calls: [
        { id: 'w1', tool: 'write', args: { ms: 20, path: '/f' } },
        { id: 'r1', tool: 'read', args: { ms: 20, path: '/f' } },
        { id: 'r2', tool: 'read', args: { ms: 20, path: '/f' } },
        { id: 'w2', tool: 'write', args: { ms: 20, path: '/f' } },
      ],
    };
    const i = instanceOf(w, config, LIMITS);
    expect(i.conflicts).toEqual([
      [0, 1],
      [0, 2],
      [0, 3],
      [1, 3],
      [2, 3],
    ]);
    expect(i.safe).toEqual([false, true, true, false]);
    expect(lowerBound(i).criticalPathMs).toBe(60);
    const overlapping = [
      { start: 0, end: 20 },
      { start: 20, end: 40 },
      { start: 30, end: 50 },
      { start: 35, end: 55 },
    ];
    const v = violations(i, overlapping);
    expect(v.hazards).toBe(2); // r1–w2 and r2–w2 overlap; r1–r2 is read–read
    expect(v.peak).toBe(3);
  });
});

describe('bench baselines and bounds', () => {
  it('partitions consecutive safe calls, at most 10 together, unsafe ones alone', () => {
    const safe = [true, true, false, true, ...Array<boolean>(11).fill(true), false];
    expect(partitionBatches(safe)).toEqual([[0, 1], [2], [3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [13, 14], [15]]);
  });

  it('finds the exact optimum where the bound cannot be reached', () => {
    // three 10 ms calls on two lanes: the bound is max(10, 30 / 2) = 15, the optimum 20
    const i = inst([10, 10, 10], [[], [], []]);
    expect(lowerBound(i).lowerBoundMs).toBe(15);
    const o = optimum(i);
    expect(o).toMatchObject({ makespanMs: 20, proven: true });
  });

  it('respects precedence and tool limits in the optimum, and sums segments at cut calls', () => {
    // 0 → {1, 2, 3} → 4, the middle ones limited to one at a time by a tool limit
    const tools = ['join', 'search', 'search', 'search', 'join'];
    const i = inst([5, 10, 10, 10, 5], [[], [0], [0], [0], [1, 2, 3]], tools, { perRun: 3, tool: { search: 1 } });
    expect(optimum(i).makespanMs).toBe(40);
    expect(decomposedOptimum(i)).toMatchObject({ makespanMs: 40, proven: true, cuts: 2, largestSegment: 3 });
  });

  it("the tighter bound sees what the issue's bound misses: a join that waits for more work than one round", () => {
    // 0 → {1..4} → 5, four 10 ms searches on a search limit of 2: the join cannot start before 5 + 20
    const tools = ['join', 'search', 'search', 'search', 'search', 'join'];
    const i = inst([5, 10, 10, 10, 10, 5], [[], [0], [0], [0], [0], [1, 2, 3, 4]], tools, { perRun: 6, tool: { search: 2 } });
    expect(lowerBound(i).lowerBoundMs).toBe(20); // critical path 5 + 10 + 5; work 40 ÷ 2
    expect(tightBound(i).lowerBoundMs).toBe(30);
    expect(optimum(i).makespanMs).toBe(30);
    // energy: two 10 ms calls after a 10 ms head on one lane, and nothing after them
    const j = inst([10, 10, 10], [[], [0], [0]], ['a', 'a', 'a'], { perRun: 1, tool: {} });
    expect(tightBound(j).lowerBoundMs).toBe(30);
  });

  it("the tighter bound lies between the issue's bound and the exact optimum on every family", () => {
    for (const f of FAMILIES) {
      for (const seed of [1, 2, 3]) {
        const i = instanceOf(workload(f, 8, seed), config, LIMITS);
        const o = optimum(i, { maxMs: 2000 });
        expect(o.proven).toBe(true);
        const tb = tightBound(i).lowerBoundMs;
        expect(tb).toBeGreaterThanOrEqual(lowerBound(i).lowerBoundMs - 1e-9);
        expect(tb).toBeLessThanOrEqual(o.makespanMs + 1e-9);
        // the schedules found with the durations known are real schedules: never below the optimum
        expect(clairvoyantMakespan(i)).toBeGreaterThanOrEqual(o.makespanMs);
        expect(laneMakespan(i) ?? Infinity).toBeGreaterThanOrEqual(o.makespanMs);
      }
    }
  });

  it('packs independent calls into lanes per tool with the durations known', () => {
    // searches 30, 20, 20, 10 on a search limit of 2 (lanes 30+10 | 20+20 = 40), a read of 35 beside them
    const i = inst([30, 20, 20, 10, 35], [[], [], [], [], []], ['search', 'search', 'search', 'search', 'read'], {
      perRun: 3,
      tool: { search: 2 },
    });
    expect(laneMakespan(i)).toBe(40);
    expect(tightBound(i).lowerBoundMs).toBe(40);
    expect(laneMakespan(inst([10, 10], [[], [0]]))).toBeUndefined(); // edges: not a lane problem
    // longest remaining path first, with real durations: the 30 ms chain head goes before the 25 ms call
    const chain = inst([10, 25, 20], [[], [], [0]], ['a', 'a', 'a'], { perRun: 1, tool: {} });
    expect(clairvoyantMakespan(chain)).toBe(55);
  });

  it('toolgraph on the virtual clock never beats the exact optimum', () => {
    for (const f of FAMILIES) {
      const w = workload(f, 6, 1);
      const i = instanceOf(w, config, LIMITS);
      const o = optimum(i, { maxMs: 2000 });
      expect(o.proven).toBe(true);
      expect(runVirtual(w.calls, config).makespanMs).toBeGreaterThanOrEqual(o.makespanMs);
      expect(o.makespanMs).toBeGreaterThanOrEqual(Math.floor(lowerBound(i).lowerBoundMs));
    }
  });
});

describe('bench suite', () => {
  it('keeps the sizes the issue names in the quick and full presets', () => {
    for (const p of [PRESETS.quick, PRESETS.full]) {
      expect(p.core.schedulerNodes).toBe(100_000);
      expect(p.core.buildSizes.map(([n]) => n)).toEqual([1000, 10_000, 100_000]);
    }
    expect(PRESETS.full.makespan.seeds).toBeGreaterThan(PRESETS.quick.makespan.seeds);
  });

  it('runs the smallest configuration of every part and gives JSON of the documented shape', async () => {
    const logs: string[] = [];
    const r = await runSuite({ preset: 'tiny', parts: ['makespan', 'core', 'http'], command: 'test', log: (l) => logs.push(l) });
    const json = JSON.parse(JSON.stringify(r.json)) as Record<string, any>;
    expect(json.families.map((f: { name: string }) => f.name)).toEqual([...FAMILIES]);
    for (const f of json.families) {
      for (const k of ['calls', 'lowerBoundMs', 'toolgraphMs', 'ratioToBound']) expect(typeof f[k]).toBe('number');
      expect(Object.keys(f.baselinesMs).sort()).toEqual(['gate', 'partition', 'promiseAll', 'sequential']);
      expect(Object.keys(f.speedup).sort()).toEqual(['gate', 'partition', 'sequential']);
      expect(Object.keys(f.violations).sort()).toEqual(['promiseAll', 'toolgraph']);
      expect(f.violations.toolgraph).toBe(0);
      for (const v of [...Object.values(f.baselinesMs), ...Object.values(f.speedup)]) expect(typeof v).toBe('number');
    }
    expect(typeof json.core.usPerNode).toBe('number');
    expect(Object.keys(json.core.buildMs)).toEqual(PRESETS.tiny.core.buildSizes.map(([n]) => String(n)));
    for (const k of ['runsPerSec', 'bareRunsPerSec', 'ratio', 'p50Ms', 'p99Ms']) expect(typeof json.http[k]).toBe('number');
    expect(json.http.errors).toBe(0);
    expect(json.targets.map((t: { name: string }) => t.name)).toEqual(['makespan', 'mixed-rw', 'violations', 'core', 'http']);
    expect(r.report).toContain('## Targets');
    expect(r.report).toContain('Reproduce');
    expect(logs.length).toBeGreaterThan(0);
  }, 180_000);

  it('rejects bad options with exit 2 and a message', async () => {
    const err: string[] = [];
    const io = { out: () => {}, err: (s: string) => void err.push(s), isTTY: false };
    expect(await main(['bench', '--only', 'nope'], io)).toBe(2);
    expect(await main(['bench', '--seeds', '0'], io)).toBe(2);
    expect(err.join('')).toMatch(/--only takes .*--seeds must be/s);
  });
});
