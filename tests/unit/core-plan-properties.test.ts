// Properties of buildPlan over random batches (DESIGN §3): random tools with reads/writes templates
// over a small key space (prefixes, wildcards, missing and referenced args), random data references
// (forward ones make cycles), random `after` policy and denials.
import fc from 'fast-check';
import { DirectedGraph } from 'graphology';
import { hasCycle, topologicalGenerations } from 'graphology-dag';
import { describe, expect, it } from 'vitest';
import type { CallInput, Edge } from '../../src/core/calls.js';
import { buildPlan, type Plan } from '../../src/core/plan.js';
import type { Catalog, Policy, ToolManifest } from '../../src/core/tool.js';
import { catalogOf, tool } from '../helpers/catalog.js';

const RUNS = Number(process.env.CORE_PROPERTY_RUNS ?? 200);
const TOOLS = 5;

const TEMPLATES = [
  'f:{p}',
  'f:{p}/x',
  'f:/a',
  'f:/a/b',
  'f:/ab',
  'f:*',
  'f:/{p}/*',
  'f:{o.p}',
  '*',
  's:*:web',
  's:{ns}:web',
  's:{ns}:{n}',
  's:prod',
  '{p}',
];

type Val = { lit: string } | { missing: true } | { ref: number } | { toolRef: number } | { badRef: true };

/** `ref` ≥ 0 names an earlier call (k mod i); `ref` < 0 any call, often a later one (cycles). */
const valArb: fc.Arbitrary<Val> = fc.oneof(
  { weight: 60, arbitrary: fc.constantFrom('a', 'b', 'ab', 'a/b', 'a/b/c', 'x', '*', '', 'prod', 'dev', 'web').map((lit) => ({ lit })) },
  { weight: 12, arbitrary: fc.constant({ missing: true as const }) },
  { weight: 10, arbitrary: fc.nat(20).map((ref) => ({ ref })) },
  { weight: 1, arbitrary: fc.integer({ min: -20, max: -1 }).map((ref) => ({ ref })) },
  { weight: 1, arbitrary: fc.nat(TOOLS - 1).map((toolRef) => ({ toolRef })) },
  { weight: 1, arbitrary: fc.constant({ badRef: true as const }) },
);

const declArb = fc.option(fc.array(fc.constantFrom(...TEMPLATES), { maxLength: 2 }), { nil: undefined, freq: 5 });

const toolSpecArb = fc.record({
  reads: declArb,
  writes: declArb,
  after: fc.oneof(
    { weight: 12, arbitrary: fc.constant<number[]>([]) },
    { weight: 1, arbitrary: fc.array(fc.nat(TOOLS - 1), { minLength: 1, maxLength: 2 }) },
  ),
});

const callSpecArb = fc.record({
  tool: fc.oneof({ weight: 30, arbitrary: fc.nat(TOOLS - 1) }, { weight: 1, arbitrary: fc.constant(-1) }),
  p: valArb,
  ns: valArb,
  n: valArb,
  o: fc.option(valArb, { nil: undefined }),
  extra: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.integer({ min: -3, max: 20 }) }),
});

const batchArb = fc.record({
  tools: fc.array(toolSpecArb, { minLength: TOOLS, maxLength: TOOLS }),
  calls: fc.array(callSpecArb, { minLength: 1, maxLength: 14 }),
  deny: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.nat(TOOLS - 1) }),
});

type BatchSpec = typeof batchArb extends fc.Arbitrary<infer T> ? T : never;

interface Batch {
  tools: ToolManifest[];
  calls: CallInput[];
  policy: Policy;
}

function materialize(spec: BatchSpec): Batch {
  const n = spec.calls.length;
  const tools = spec.tools.map((t, i) => {
    const partial: Partial<ToolManifest> = { after: t.after.map((a) => `t${a}`) };
    if (t.reads !== undefined) partial.reads = t.reads;
    if (t.writes !== undefined) partial.writes = t.writes;
    return tool(`t${i}`, partial);
  });
  const target = (k: number, i: number) => (k >= 0 ? k % i : -k % n);
  const value = (v: Val, i: number): string | undefined => {
    if ('lit' in v) return v.lit;
    if ('ref' in v) return i === 0 && v.ref >= 0 ? 'a' : `\${c${target(v.ref, i)}.output.v}`;
    if ('toolRef' in v) return `\${t${v.toolRef}.output}`;
    if ('badRef' in v) return '${nowhere.output}';
    return undefined;
  };
  const calls = spec.calls.map((c, i): CallInput => {
    const args: Record<string, unknown> = {};
    for (const name of ['p', 'ns', 'n'] as const) {
      const v = value(c[name], i);
      if (v !== undefined) args[name] = v;
    }
    if (c.o !== undefined) {
      const v = value(c.o, i);
      args.o = v === undefined ? {} : { p: v };
    }
    if (c.extra !== undefined && (i > 0 || c.extra < 0)) args.extra = `x-\${c${target(c.extra, i)}.output}`;
    return { id: `c${i}`, tool: c.tool < 0 ? 'nope' : `t${c.tool}`, args };
  });
  const policy: Policy = { rules: spec.deny === undefined ? [] : [{ match: { tool: `t${spec.deny}` }, deny: 'denied' }] };
  return { tools, calls, policy };
}

const build = (b: Batch, catalog: Catalog = catalogOf(b.tools)): Plan =>
  buildPlan({ calls: b.calls, tenant: 'acme', catalog, policy: b.policy });

// ---- oracles, independent of the code under test ----

const segs = (key: string) => key.split(/[/:]/).filter((s) => s !== '');
function keysOverlap(a: string, b: string): boolean {
  const x = segs(a);
  const y = segs(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i] && x[i] !== '*' && y[i] !== '*') return false;
  return true;
}
function anyOverlap(as: readonly { text: string }[], bs: readonly { text: string }[]): boolean {
  return as.some((a) => bs.some((b) => keysOverlap(a.text, b.text)));
}
function conflicts(plan: Plan, i: number, j: number): boolean {
  const a = plan.calls[i]!.access;
  const b = plan.calls[j]!.access;
  return anyOverlap(a.writes, [...b.reads, ...b.writes]) || anyOverlap(b.writes, a.reads);
}

interface Shape {
  n: number;
  index: Map<string, number>;
  /** Successors over data and policy edges only. */
  dp: number[][];
  /** Successors over every edge. */
  all: number[][];
}

function shape(plan: Plan): Shape {
  const n = plan.calls.length;
  const index = new Map(plan.calls.map((c, i) => [c.id, i]));
  const dp: number[][] = Array.from({ length: n }, () => []);
  const all: number[][] = Array.from({ length: n }, () => []);
  for (const e of plan.edges) {
    const f = index.get(e.from)!;
    const t = index.get(e.to)!;
    all[f]!.push(t);
    if (e.kind !== 'conflict') dp[f]!.push(t);
  }
  return { n, index, dp, all };
}

function reachable(succ: number[][], from: number): Set<number> {
  const seen = new Set<number>();
  const stack = [...succ[from]!];
  while (stack.length > 0) {
    const v = stack.pop()!;
    if (seen.has(v)) continue;
    seen.add(v);
    stack.push(...succ[v]!);
  }
  return seen;
}

/** Calls on a data/policy cycle; calls that will never run (failed, on a cycle, or downstream of those). */
function doom(plan: Plan, s: Shape): { onCycle: Set<number>; doomed: Set<number> } {
  const onCycle = new Set<number>();
  for (let i = 0; i < s.n; i++) if (reachable(s.dp, i).has(i)) onCycle.add(i);
  const doomed = new Set<number>();
  for (let i = 0; i < s.n; i++) {
    if (plan.calls[i]!.error || onCycle.has(i)) {
      doomed.add(i);
      for (const d of reachable(s.dp, i)) doomed.add(d);
    }
  }
  return { onCycle, doomed };
}

/** Position of each call in the data+policy order, ties by index (cycle members left out). */
function stablePositions(s: Shape, onCycle: Set<number>): Map<number, number> {
  const preds: number[][] = Array.from({ length: s.n }, () => []);
  s.dp.forEach((outs, f) => {
    if (!onCycle.has(f)) for (const t of outs) preds[t]!.push(f);
  });
  const pos = new Map<number, number>();
  for (;;) {
    let next = -1;
    for (let i = 0; i < s.n && next < 0; i++) if (!pos.has(i) && !onCycle.has(i) && preds[i]!.every((p) => pos.has(p))) next = i;
    if (next < 0) return pos;
    pos.set(next, pos.size);
  }
}

function graphOf(plan: Plan, kinds: ReadonlySet<Edge['kind']>): DirectedGraph {
  const g = new DirectedGraph();
  for (const c of plan.calls) g.addNode(c.id);
  for (const e of plan.edges) if (kinds.has(e.kind) && !g.hasDirectedEdge(e.from, e.to)) g.addDirectedEdge(e.from, e.to);
  return g;
}

const params = { numRuns: RUNS };

describe('buildPlan properties', () => {
  it('sometimes generates cycles, conflicts and failures (the generator is not degenerate)', () => {
    const samples = fc.sample(batchArb, { numRuns: 300, seed: 42 }).map((spec) => build(materialize(spec)));
    expect(samples.filter((p) => p.diagnostics.some((d) => d.code === 'cycle')).length).toBeGreaterThan(20);
    expect(samples.filter((p) => p.edges.some((e) => e.kind === 'conflict')).length).toBeGreaterThan(120);
    expect(samples.filter((p) => p.edges.some((e) => e.kind === 'policy')).length).toBeGreaterThan(20);
    expect(samples.filter((p) => p.calls.some((c) => c.error)).length).toBeGreaterThan(50);
  });

  it('the graph is acyclic whenever its data and policy edges are', () => {
    fc.assert(
      fc.property(batchArb, (spec) => {
        const plan = build(materialize(spec));
        const dp = graphOf(plan, new Set(['data', 'policy']));
        if (!hasCycle(dp)) expect(hasCycle(plan.graph)).toBe(false);
        // and conflict edges never close a cycle: without the cycle members every edge is acyclic
        const s = shape(plan);
        const { onCycle } = doom(plan, s);
        const rest = plan.graph.copy();
        for (const i of onCycle) rest.dropNode(plan.calls[i]!.id);
        expect(hasCycle(rest)).toBe(false);
      }),
      params,
    );
  });

  it('cycle members, and only they, are blocked with `cycle` (unless they failed)', () => {
    fc.assert(
      fc.property(batchArb, (spec) => {
        const plan = build(materialize(spec));
        const { onCycle } = doom(plan, shape(plan));
        plan.calls.forEach((c, i) => {
          expect(c.blockedBy?.code).toBe(onCycle.has(i) && !c.error ? 'cycle' : undefined);
        });
        const reported = new Set(plan.diagnostics.filter((d) => d.code === 'cycle').flatMap((d) => d.callIds ?? []));
        expect(plan.diagnostics.some((d) => d.code === 'cycle')).toBe(onCycle.size > 0);
        for (const id of reported) expect(onCycle.has(Number(id.slice(1)))).toBe(true);
      }),
      params,
    );
  });

  it('every conflicting pair of live calls is ordered by a path, in the stable data+policy order', () => {
    fc.assert(
      fc.property(batchArb, (spec) => {
        const plan = build(materialize(spec));
        const s = shape(plan);
        const { onCycle, doomed } = doom(plan, s);
        const pos = stablePositions(s, onCycle);
        const reach = Array.from({ length: s.n }, (_, i) => reachable(s.all, i));
        for (let i = 0; i < s.n; i++) {
          for (let j = i + 1; j < s.n; j++) {
            if (doomed.has(i) || doomed.has(j) || !conflicts(plan, i, j)) continue;
            const [first, second] = pos.get(i)! < pos.get(j)! ? [i, j] : [j, i];
            if (!reach[first]!.has(second)) {
              throw new Error(`c${first} and c${second} conflict but no path orders them: ${JSON.stringify(plan.edges)}`);
            }
          }
        }
      }),
      params,
    );
  });

  it('conflict edges join only live calls that truly conflict (never read–read), earlier to later', () => {
    fc.assert(
      fc.property(batchArb, (spec) => {
        const plan = build(materialize(spec));
        const s = shape(plan);
        const { onCycle, doomed } = doom(plan, s);
        const pos = stablePositions(s, onCycle);
        for (const e of plan.edges) {
          if (e.kind !== 'conflict') continue;
          const f = s.index.get(e.from)!;
          const t = s.index.get(e.to)!;
          expect(doomed.has(f) || doomed.has(t)).toBe(false);
          expect(conflicts(plan, f, t)).toBe(true);
          expect(pos.get(f)!).toBeLessThan(pos.get(t)!);
          expect(e.reason).toMatch(/^(read-after-write|write-after-read|write-after-write) on /);
        }
      }),
      params,
    );
  });

  it('no read–read pair gets a conflict edge', () => {
    fc.assert(
      fc.property(batchArb, (spec) => {
        const plan = build(materialize(spec));
        const s = shape(plan);
        for (const e of plan.edges) {
          if (e.kind !== 'conflict') continue;
          const a = plan.calls[s.index.get(e.from)!]!.access;
          const b = plan.calls[s.index.get(e.to)!]!.access;
          const writeOverlap = anyOverlap(a.writes, [...b.reads, ...b.writes]) || anyOverlap(b.writes, a.reads);
          const readOverlap = anyOverlap(a.reads, b.reads);
          expect(writeOverlap || !readOverlap).toBe(true);
          expect(writeOverlap).toBe(true);
        }
      }),
      params,
    );
  });

  it('generations are graphology-dag`s topological generations without the cycle members, in call order', () => {
    fc.assert(
      fc.property(batchArb, (spec) => {
        const plan = build(materialize(spec));
        const s = shape(plan);
        const { onCycle } = doom(plan, s);
        const rest = plan.graph.copy();
        for (const i of onCycle) rest.dropNode(plan.calls[i]!.id);
        const expected = topologicalGenerations(rest).map((g) => g.sort((a, b) => s.index.get(a)! - s.index.get(b)!));
        expect(plan.generations).toEqual(expected);
      }),
      params,
    );
  });

  it('the same batch always gives the same plan', () => {
    fc.assert(
      fc.property(batchArb, batchArb, (spec, other) => {
        const batch = materialize(spec);
        const strip = (p: Plan) => ({ calls: p.calls, edges: p.edges, generations: p.generations, diagnostics: p.diagnostics });
        const first = strip(build(batch));
        // a deep copy, a catalog listing its tools in another order, and after another batch warmed caches
        expect(strip(build(structuredClone(batch)))).toEqual(first);
        expect(strip(build(batch, catalogOf([...batch.tools].reverse())))).toEqual(first);
        build(materialize(other));
        const again = build(batch);
        expect(strip(again)).toEqual(first);
        expect(again.graph.mapEdges((_e, a, from, to) => ({ from, to, ...a }))).toEqual(first.edges);
        // the input is not modified
        expect(batch).toEqual(materialize(spec));
      }),
      params,
    );
  });
});
