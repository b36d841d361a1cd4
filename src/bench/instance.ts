/**
 * A workload seen as a scheduling problem: durations, data predecessors, every conflicting pair
 * (found pairwise from the plan's resource accesses, not from toolgraph's reduced edges, so the check
 * is independent of the code it checks), and the capacities in force. From it: the lower bound
 * `max(critical path, work ÷ capacity)` and the violation count of an observed schedule.
 *
 * Conflicting pairs are oriented by the model's order (DESIGN §3): any correct executor must run them
 * in that order, so they count in the critical path like data edges.
 */
import { buildPlan } from '../core/plan.js';
import { anyOverlap } from '../core/resources.js';
import type { Config } from '../config/types.js';
import { durationOf, type BenchLimits, type Workload } from './workloads.js';

export interface Instance {
  ids: string[];
  tools: string[];
  durations: number[];
  /** Data predecessors (references). */
  dataPreds: number[][];
  /** Data predecessors and earlier conflicting calls: every call that must end first. */
  preds: number[][];
  /** Conflicting pairs [earlier, later]. */
  conflicts: [number, number][];
  /** Concurrency-safe: the call writes nothing (reads and pure calls). */
  safe: boolean[];
  limits: BenchLimits;
}

export function instanceOf(w: Workload, config: Config, limits: BenchLimits): Instance {
  const plan = buildPlan({ calls: w.calls, tenant: 'bench', catalog: config.catalog, policy: config.policy });
  if (plan.diagnostics.length > 0) throw new Error(`${w.family}#${w.seed}: ${plan.diagnostics[0]?.message}`);
  const n = w.calls.length;
  const index = new Map(w.calls.map((c, i) => [c.id, i]));
  const pos = new Array<number>(n);
  plan.order.forEach((i, k) => {
    pos[i] = k;
  });
  const dataPreds: number[][] = Array.from({ length: n }, () => []);
  for (const e of plan.edges) if (e.kind !== 'conflict') dataPreds[index.get(e.to) as number]?.push(index.get(e.from) as number);
  const conflicts: [number, number][] = [];
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const a = (plan.calls[i] as (typeof plan.calls)[number]).access;
      const b = (plan.calls[j] as (typeof plan.calls)[number]).access;
      const clash = anyOverlap(a.writes, [...b.reads, ...b.writes]) || anyOverlap(b.writes, a.reads);
      if (clash) conflicts.push((pos[i] as number) < (pos[j] as number) ? [i, j] : [j, i]);
    }
  }
  const preds = dataPreds.map((p) => [...p]);
  for (const [a, b] of conflicts) if (!preds[b]?.includes(a)) preds[b]?.push(a);
  return {
    ids: w.calls.map((c) => c.id),
    tools: w.calls.map((c) => c.tool),
    durations: w.calls.map(durationOf),
    dataPreds,
    preds,
    conflicts,
    safe: plan.calls.map((c) => c.access.writes.length === 0),
    limits,
  };
}

/** A topological order of `preds` (calls in model order have earlier predecessors; this also copes if not). */
export function topoOrder(inst: Instance): number[] {
  const n = inst.ids.length;
  const indeg = inst.preds.map((p) => p.length);
  const succ: number[][] = Array.from({ length: n }, () => []);
  inst.preds.forEach((ps, j) => {
    for (const i of ps) succ[i]?.push(j);
  });
  const out: number[] = [];
  const queue = indeg.flatMap((d, i) => (d === 0 ? [i] : []));
  while (queue.length > 0) {
    const i = queue.shift() as number;
    out.push(i);
    for (const j of succ[i] as number[]) if (--(indeg[j] as number) === 0) queue.push(j);
  }
  if (out.length !== n) throw new Error('the instance has a cycle');
  return out;
}

/** Longest path from each call to the end, its own duration included. */
export function tails(inst: Instance): number[] {
  const order = topoOrder(inst);
  const succ: number[][] = inst.ids.map(() => []);
  inst.preds.forEach((ps, j) => {
    for (const i of ps) succ[i]?.push(j);
  });
  const tail = new Array<number>(inst.ids.length).fill(0);
  for (let k = order.length - 1; k >= 0; k--) {
    const i = order[k] as number;
    let best = 0;
    for (const j of succ[i] as number[]) best = Math.max(best, tail[j] as number);
    tail[i] = (inst.durations[i] as number) + best;
  }
  return tail;
}

export interface Bound {
  criticalPathMs: number;
  /** The largest `work ÷ capacity` over the limits in force, and which limit it is. */
  workMs: number;
  workLimit: string;
  lowerBoundMs: number;
}

export function lowerBound(inst: Instance): Bound {
  const criticalPathMs = Math.max(0, ...tails(inst));
  const total = inst.durations.reduce((a, b) => a + b, 0);
  let workMs = total / inst.limits.perRun;
  let workLimit = `perRun ${inst.limits.perRun}`;
  for (const [tool, cap] of Object.entries(inst.limits.tool)) {
    const w = inst.durations.reduce((a, d, i) => (inst.tools[i] === tool ? a + d : a), 0) / cap;
    if (w > workMs) [workMs, workLimit] = [w, `tool ${tool} ${cap}`];
  }
  return { criticalPathMs, workMs, workLimit, lowerBoundMs: Math.max(criticalPathMs, workMs) };
}

/** When a call ran, in ms (any common origin). */
export interface Interval {
  start: number;
  end: number;
}

export interface Violations {
  /** Conflicting pairs whose run times overlapped. */
  hazards: number;
  /** Calls that started before a call whose output they reference had ended. */
  data: number;
  /** Highest number of calls running at once, overall and per limited tool. */
  peak: number;
  peakByTool: Record<string, number>;
}

export function violations(inst: Instance, runs: readonly Interval[]): Violations {
  const at = (i: number) => runs[i] as Interval;
  const overlap = (a: Interval, b: Interval) => a.start < b.end && b.start < a.end;
  let hazards = 0;
  for (const [a, b] of inst.conflicts) if (overlap(at(a), at(b))) hazards++;
  let data = 0;
  inst.dataPreds.forEach((ps, j) => {
    for (const i of ps) if (at(j).start < at(i).end) data++;
  });
  const peakOf = (member: (i: number) => boolean) => {
    const points: [number, number][] = [];
    runs.forEach((r, i) => {
      if (member(i)) points.push([r.start, 1], [r.end, -1]);
    });
    points.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    let cur = 0;
    let peak = 0;
    for (const [, d] of points) peak = Math.max(peak, (cur += d));
    return peak;
  };
  const peakByTool: Record<string, number> = {};
  for (const tool of Object.keys(inst.limits.tool)) peakByTool[tool] = peakOf((i) => inst.tools[i] === tool);
  return { hazards, data, peak: peakOf(() => true), peakByTool };
}

/** Whether a schedule kept every limit in force. */
export function withinLimits(inst: Instance, v: Violations): boolean {
  return v.peak <= inst.limits.perRun && Object.entries(inst.limits.tool).every(([t, cap]) => (v.peakByTool[t] ?? 0) <= cap);
}
