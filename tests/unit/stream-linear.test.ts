// Streaming a run costs what its calls cost (DESIGN §10): an append plans only the calls it brings,
// settling looks only at the calls that wait for what settled, and the whole run is planned once, at
// the seal. Held to counts of the planner's work (`StreamPlanner.work`), not to timings. That the
// results are those of planning the whole run on every append is tests/unit/stream-golden.test.ts.
import { describe, expect, it } from 'vitest';
import type { CallInput } from '../../src/core/calls.js';
import { Scheduler } from '../../src/core/scheduler.js';
import { StreamPlanner } from '../../src/core/stream-plan.js';
import { catalogOf, DEFAULTS, limits, tool } from '../helpers/sched.js';

const TOOLS = [
  tool('read', { reads: ['file:{path}'], writes: [], risk: 'read' }),
  tool('write', { reads: [], writes: ['file:{path}'] }),
  tool('gate', { reads: [], writes: [], after: ['write'] }),
  tool('sum', { reads: [], writes: [] }),
];
const catalog = catalogOf(TOOLS);
const planner = () => new StreamPlanner('acme', catalog, { rules: [] });

/** Reads of distinct files; every fourth call writes a file read earlier with the output of the read before it. */
function mix(n: number, from = 0): CallInput[] {
  return Array.from({ length: n }, (_, k): CallInput => {
    const i = from + k;
    if (i % 4 === 3) return { id: `c${i}`, tool: 'write', args: { path: `/f${i - 3}`, body: `\${c${i - 1}.output}` } };
    return { id: `c${i}`, tool: 'read', args: { path: `/f${i}` } };
  });
}

describe('streaming one call per append', () => {
  it('plans each call once as it arrives, and the whole run once, at the seal', () => {
    const p = planner();
    const n = 2000;
    for (const c of mix(n)) {
      const step = p.add([c]);
      expect(step.settled).toHaveLength(1);
    }
    expect(p.work.plans).toBe(0);
    expect(p.work.calls).toBe(n);
    expect(p.work.visits).toBeLessThanOrEqual(2 * n);
    const seal = p.seal();
    expect(seal.settled).toEqual([]);
    expect(p.work.plans).toBe(1);
  });

  it('does not look at calls that wait for the seal when later calls settle', () => {
    const p = planner();
    // 500 calls that only the seal settles: by tool name, or with an `after` policy.
    for (let i = 0; i < 500; i++)
      p.add([i % 2 ? { id: `g${i}`, tool: 'gate', args: {} } : { id: `s${i}`, tool: 'sum', args: { of: '${read.output}' } }]);
    const before = { ...p.work };
    for (const c of mix(1000)) p.add([c]);
    expect(p.work.calls - before.calls).toBe(1000);
    expect(p.work.visits - before.visits).toBeLessThanOrEqual(2000);
    const seal = p.seal();
    expect(seal.settled).toHaveLength(500);
    expect(p.work.plans).toBe(1);
  });

  it('settles what waited for a call when it arrives, looking only at those', () => {
    const p = planner();
    // Each waits for the call after it, which has not arrived: one arrival settles one call.
    const n = 1500;
    for (let i = 0; i < n; i++) {
      const step = p.add([{ id: `c${i}`, tool: 'sum', args: { next: `\${c${i + 1}.output}` } }]);
      expect(step.settled).toEqual([]);
    }
    // The last one arrives: the chain settles backwards, in passes, in one step.
    const last = p.add([{ id: `c${n}`, tool: 'sum', args: {} }]);
    expect(last.settled).toEqual(Array.from({ length: n + 1 }, (_, k) => n - k));
    expect(p.work.plans).toBe(0);
    // Each call planned when it arrived, and again when it settled (the call it names had arrived).
    expect(p.work.calls).toBe(2 * n + 1);
    expect(p.work.visits).toBeLessThanOrEqual(2 * (n + 1));
  });

  it('spreads the origins of calls that never run at the seal along each edge a bounded number of times', () => {
    const p = planner();
    // A chain of calls each naming the next, which only the seal settles (the last names a tool), and
    // an unknown tool at its end: every call of the chain is blocked through it.
    const n = 1500;
    for (let i = 0; i < n; i++) p.add([{ id: `c${i}`, tool: 'sum', args: { next: `\${c${i + 1}.output}` } }]);
    p.add([{ id: `c${n}`, tool: 'nope', args: { x: '${sum.output}' } }]);
    const seal = p.seal();
    expect(seal.settled).toHaveLength(n + 1);
    expect(new Set(seal.origin.values())).toEqual(new Set([n]));
    expect(p.work.spread).toBeLessThanOrEqual(2 * n);
  });

  it('the scheduler plans an appended call once, and the run once at the seal', () => {
    const s = new Scheduler({ catalog, policy: { rules: [] }, limits: limits({ maxCallsPerRun: 100_000 }), defaults: DEFAULTS });
    s.submit(0, { runId: 'r', tenant: 'acme', calls: [], open: true });
    const stream = (s as unknown as { state: { runs: Map<string, { stream: StreamPlanner }> } }).state.runs.get('r')
      ?.stream as StreamPlanner;
    const n = 1000;
    for (const c of mix(n)) s.append(0, 'r', [c]);
    expect(stream.work).toMatchObject({ plans: 0, calls: n });
    s.seal(0, 'r');
    expect(stream.work.plans).toBe(1);
  });
});
