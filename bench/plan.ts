/**
 * Plan-building benchmark: buildPlan over 1k, 10k and 100k calls touching 1k resources.
 *
 * The mix: 70% of calls read, 30% write; each touches one or two of 1000 files (50 directories × 20
 * files), and one call in twenty reads a whole directory (a prefix key). One call in ten refers to the
 * output of one of the 50 calls before it (a data edge). Batches are generated from a fixed seed.
 * The hazard index should make the work near-linear: 100k calls should take about 10× what 10k take.
 *
 * Run: `npx tsx bench/plan.ts` (or `npm run bench:plan`).
 */
import { buildPlan } from '../src/core/plan.js';
import type { CallInput } from '../src/core/calls.js';
import type { Catalog, ToolManifest } from '../src/core/tool.js';
import { rng } from '../src/core/random.js';

const DIRS = 50;
const FILES_PER_DIR = 20;

function manifest(name: string, reads: string[], writes: string[]): ToolManifest {
  return { name, reads, writes, scope: 'tenant', risk: 'write', idempotent: false, timeoutMs: 60_000, after: [], requires: [], executor: { kind: 'builtin', name: 'echo' } };
}

const tools = [
  manifest('read_file', ['file:/repo/{dir}/{file}'], []),
  manifest('read_two', ['file:/repo/{dir}/{file}', 'file:/repo/{dir2}/{file2}'], []),
  manifest('list_dir', ['file:/repo/{dir}'], []),
  manifest('write_file', [], ['file:/repo/{dir}/{file}']),
  manifest('copy_file', ['file:/repo/{dir}/{file}'], ['file:/repo/{dir2}/{file2}']),
];
const byName = new Map(tools.map((t) => [t.name, t]));
const catalog: Catalog = { get: (n) => byName.get(n), checkArgs: () => null, list: () => tools };


function batch(n: number, seed: number): CallInput[] {
  const rand = rng(seed);
  const pick = (k: number) => Math.floor(rand() * k);
  const file = () => ({ dir: `d${pick(DIRS)}`, file: `f${pick(FILES_PER_DIR)}.ts` });
  const calls: CallInput[] = [];
  for (let i = 0; i < n; i++) {
    const a = file();
    const b = file();
    const r = rand();
    let tool: string;
    let args: Record<string, unknown>;
    if (r < 0.45) [tool, args] = ['read_file', { ...a }];
    else if (r < 0.65) [tool, args] = ['read_two', { ...a, dir2: b.dir, file2: b.file }];
    else if (r < 0.7) [tool, args] = ['list_dir', { dir: a.dir }];
    else if (r < 0.9) [tool, args] = ['write_file', { ...a, content: 'x' }];
    else [tool, args] = ['copy_file', { ...a, dir2: b.dir, file2: b.file }];
    if (i > 0 && rand() < 0.1) args.note = `\${c${i - 1 - pick(Math.min(i, 50))}.output.summary}`;
    calls.push({ id: `c${i}`, tool, args });
  }
  return calls;
}

interface Timing {
  ms: number;
  cpuMs: number;
  /** Materializing `plan.graph` (graphology), which buildPlan leaves until first use. */
  graphMs: number;
  edges: number;
}

/** Wall time, and this process's CPU time (steadier on a busy machine; it includes GC threads). */
function time(calls: CallInput[], withGraph: boolean): Timing {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const plan = buildPlan({ calls, tenant: 'bench', catalog, policy: { rules: [] } });
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  if (plan.diagnostics.length > 0) throw new Error(`unexpected diagnostics: ${plan.diagnostics[0]?.message}`);
  let graphMs = Number.NaN;
  if (withGraph) {
    const g0 = performance.now();
    if (plan.graph.size !== plan.edges.length) throw new Error('graph and edges differ');
    graphMs = performance.now() - g0;
  }
  return { ms, cpuMs: (c.user + c.system) / 1000, graphMs, edges: plan.edges.length };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

const sizes: [n: number, runs: number][] = [
  [1_000, 7],
  [10_000, 5],
  [100_000, 3],
];
// warm up the JIT on a small batch first
for (let i = 0; i < 5; i++) time(batch(1_000, 99 + i), true);

const medians = new Map<number, { ms: number; cpuMs: number; edges: number }>();
for (const [n, runs] of sizes) {
  const calls = batch(n, n);
  const results = Array.from({ length: runs }, (_, i) => time(calls, i === 0));
  const ms = median(results.map((r) => r.ms));
  const cpuMs = median(results.map((r) => r.cpuMs));
  const edges = results[0]?.edges ?? 0;
  medians.set(n, { ms, cpuMs, edges });
  console.log(
    `${String(n).padStart(7)} calls: ${ms.toFixed(1).padStart(8)} ms wall, ${cpuMs.toFixed(1).padStart(8)} ms cpu (median of ${runs}), ` +
      `${edges} edges, ${((ms * 1000) / n).toFixed(1)} µs/call; plan.graph on first use: ${(results[0]?.graphMs ?? 0).toFixed(0)} ms`,
  );
}
const big = medians.get(100_000) as { ms: number; cpuMs: number; edges: number };
const mid = medians.get(10_000) as { ms: number; cpuMs: number; edges: number };
console.log(
  `ratio 100k/10k: ${(big.ms / mid.ms).toFixed(1)}× wall, ${(big.cpuMs / mid.cpuMs).toFixed(1)}× cpu (linear: 10×, quadratic: 100×); ` +
    `edges ${(big.edges / mid.edges).toFixed(1)}× (conflicts get denser over the same 1k resources)`,
);
