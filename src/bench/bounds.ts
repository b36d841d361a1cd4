/**
 * A tighter lower bound on the makespan than the issue's `max(critical path, work ÷ capacity)`, valid
 * for every schedule of an instance, at any size. It exists to answer "can any schedule reach the
 * bound?" on the full 40-call batches, where branch and bound is out of reach: when this bound is
 * already more than 5% above the issue's, no schedule at all is within 1.05× of it.
 *
 * The bound looks at precedence and capacity separately. This one combines them, with two
 * classic arguments for capacity `c` (the per-run limit, each tool limit) over the calls that use it:
 * - *heads* `h(j)`, a lower bound on when `j` can start: every call that must end before `j` (its
 *   transitive predecessors) has ended, and those that share a limit, being released no earlier than
 *   their own heads, need `t + span{ i : h(i) ≥ t }` for every threshold `t` (span: below);
 * - *tails* `q(j)`, the same from the end backwards (time that must remain after `j` ends);
 * - *energy*: every set of calls using a limit that cannot start before `a` nor end later than `b`
 *   before the end needs `a + span + b ≤ makespan`;
 * where a set's *span* on `c` lanes is at least its work ÷ c and, since a call is never split, the
 * ⌈k ÷ c⌉ shortest of its k calls end to end. Each step only relaxes the problem (limits are taken one
 * at a time), so the result never exceeds the optimum; `tests/integration/bench.test.ts` checks that against
 * branch and bound.
 */
import { tails, topoOrder, type Instance } from './instance.js';

export interface TightBound {
  lowerBoundMs: number;
}

interface Pool {
  cap: number;
  uses: (i: number) => boolean;
}

function poolsOf(inst: Instance): Pool[] {
  return [
    { cap: inst.limits.perRun, uses: () => true },
    ...Object.entries(inst.limits.tool).map(([tool, cap]) => ({ cap, uses: (i: number) => inst.tools[i] === tool })),
  ];
}

/**
 * How long `durations` need on `cap` lanes, at least: their work spread evenly, and, since calls are
 * not split, the ⌈k ÷ cap⌉ shortest of them end to end (some lane runs that many: at most `cap` calls
 * run at once, so a schedule is `cap` lanes of calls one after another).
 */
function spanOn(durations: number[], cap: number): number {
  const sorted = [...durations].sort((a, b) => a - b);
  const work = sorted.reduce((a, d) => a + d, 0);
  const stacked = sorted.slice(0, Math.ceil(sorted.length / cap)).reduce((a, d) => a + d, 0);
  return Math.max(work / cap, stacked, sorted[sorted.length - 1] ?? 0);
}

/** `max over t of t + span{ i ∈ set : release(i) ≥ t }`: when a set released over time can end. */
function releasedFinish(set: readonly number[], release: readonly number[], dur: readonly number[], cap: number): number {
  const byRelease = [...set].sort((a, b) => (release[b] as number) - (release[a] as number));
  const released: number[] = [];
  let best = 0;
  for (const i of byRelease) {
    released.push(dur[i] as number);
    best = Math.max(best, (release[i] as number) + spanOn(released, cap));
  }
  return best;
}

/** For each call, the calls that must end before it starts (transitively), from `edges[j]` = direct ones. */
function closure(order: readonly number[], edges: readonly (readonly number[])[], n: number): number[][] {
  const sets = Array.from({ length: n }, () => new Set<number>());
  for (const j of order) {
    const s = sets[j] as Set<number>;
    for (const p of edges[j] as number[]) {
      s.add(p);
      for (const q of sets[p] as Set<number>) s.add(q);
    }
  }
  return sets.map((s) => [...s]);
}

/** Heads in the order given, each from the closure set of calls that must come first. */
function heads(order: readonly number[], before: readonly (readonly number[])[], dur: readonly number[], pools: readonly Pool[]): number[] {
  const h = new Array<number>(dur.length).fill(0);
  for (const j of order) {
    let t = 0;
    for (const p of before[j] as number[]) t = Math.max(t, (h[p] as number) + (dur[p] as number));
    for (const pool of pools) {
      const set = (before[j] as number[]).filter(pool.uses);
      if (set.length > 0) t = Math.max(t, releasedFinish(set, h, dur, pool.cap));
    }
    h[j] = t;
  }
  return h;
}

export function tightBound(inst: Instance): TightBound {
  const n = inst.ids.length;
  const dur = inst.durations;
  const pools = poolsOf(inst);
  const order = topoOrder(inst);
  const succ: number[][] = Array.from({ length: n }, () => []);
  inst.preds.forEach((ps, j) => {
    for (const i of ps) succ[i]?.push(j);
  });
  const h = heads(order, closure(order, inst.preds, n), dur, pools);
  // Tails are heads of the reversed instance.
  const reversed = [...order].reverse();
  const q = heads(reversed, closure(reversed, succ, n), dur, pools);

  let lowerBoundMs = 0;
  for (let j = 0; j < n; j++) lowerBoundMs = Math.max(lowerBoundMs, (h[j] as number) + (dur[j] as number) + (q[j] as number));
  for (const pool of pools) {
    const members = inst.ids.map((_, i) => i).filter(pool.uses);
    for (const a of new Set(members.map((i) => h[i] as number))) {
      for (const b of new Set(members.map((i) => q[i] as number))) {
        const inside = members.filter((i) => (h[i] as number) >= a && (q[i] as number) >= b).map((i) => dur[i] as number);
        if (inside.length === 0) continue; // an empty set says nothing
        const lb = a + spanOn(inside, pool.cap) + b;
        lowerBoundMs = Math.max(lowerBoundMs, lb);
      }
    }
  }
  return { lowerBoundMs };
}

/**
 * The other side of the optimum: a schedule that knows every call's duration. It is toolgraph's rule
 * (longest remaining path first, then model order; start whatever fits the limits whenever a call ends)
 * with the real per-call durations in place of per-tool means, so on independent calls it is longest
 * processing time first. Its makespan is an upper bound on the optimum; beside `tightBound` it brackets
 * what any scheduler could do, and beside toolgraph's schedule it shows what not knowing the durations
 * costs.
 */
export function clairvoyantMakespan(inst: Instance): number {
  const n = inst.ids.length;
  const dur = inst.durations;
  const tail = tails(inst);
  const pools = poolsOf(inst);
  const used = pools.map(() => 0);
  const waiting = inst.preds.map((p) => p.length);
  const succ: number[][] = Array.from({ length: n }, () => []);
  inst.preds.forEach((ps, j) => {
    for (const i of ps) succ[i]?.push(j);
  });
  const ready = inst.ids.map((_, i) => i).filter((i) => waiting[i] === 0);
  const running: { call: number; end: number }[] = [];
  let now = 0;
  let done = 0;
  while (done < n) {
    ready.sort((a, b) => (tail[b] as number) - (tail[a] as number) || a - b);
    for (let k = 0; k < ready.length; ) {
      const i = ready[k] as number;
      if (pools.every((p, x) => !p.uses(i) || (used[x] as number) < p.cap)) {
        pools.forEach((p, x) => {
          if (p.uses(i)) used[x] = (used[x] as number) + 1;
        });
        running.push({ call: i, end: now + (dur[i] as number) });
        ready.splice(k, 1);
      } else k++;
    }
    if (running.length === 0) throw new Error('nothing runs and nothing is ready: the instance has a cycle');
    now = Math.min(...running.map((r) => r.end));
    for (let k = running.length - 1; k >= 0; k--) {
      const r = running[k] as { call: number; end: number };
      if (r.end !== now) continue;
      running.splice(k, 1);
      done++;
      pools.forEach((p, x) => {
        if (p.uses(r.call)) used[x] = (used[x] as number) - 1;
      });
      for (const j of succ[r.call] as number[]) if (--(waiting[j] as number) === 0) ready.push(j);
    }
  }
  return now;
}

/**
 * For a batch without any edges (independent-reads): a good schedule with the durations known, found
 * by giving each tool a fixed number of lanes (every split of the per-run limit that the tool limits
 * allow) and packing each tool's calls into its lanes: longest first, then moves and swaps between
 * lanes while they shorten the longest lane. An upper bound on the optimum, usually within a few ms of
 * it; `undefined` when the batch has edges.
 */
export function laneMakespan(inst: Instance): number | undefined {
  if (inst.preds.some((p) => p.length > 0)) return undefined;
  const byTool = new Map<string, number[]>();
  inst.tools.forEach((t, i) => {
    byTool.set(t, [...(byTool.get(t) ?? []), inst.durations[i] as number]);
  });
  const tools = [...byTool.keys()];
  let best = Infinity;
  const split = (k: number, lanesLeft: number, worst: number): void => {
    if (worst >= best) return;
    if (k === tools.length) {
      best = worst;
      return;
    }
    const tool = tools[k] as string;
    const cap = Math.min(inst.limits.tool[tool] ?? Infinity, lanesLeft - (tools.length - k - 1));
    for (let lanes = 1; lanes <= cap; lanes++)
      split(k + 1, lanesLeft - lanes, Math.max(worst, packLanes(byTool.get(tool) as number[], lanes)));
  };
  split(0, inst.limits.perRun, 0);
  return Number.isFinite(best) ? best : undefined;
}

/** The longest lane after packing `durations` into `lanes` lanes (longest first, then local moves). */
function packLanes(durations: readonly number[], lanes: number): number {
  const bins: number[][] = Array.from({ length: lanes }, () => []);
  const load = () => bins.map((b) => b.reduce((a, d) => a + d, 0));
  for (const d of [...durations].sort((a, b) => b - a)) {
    const l = load();
    (bins[l.indexOf(Math.min(...l))] as number[]).push(d);
  }
  for (let improved = true; improved; ) {
    improved = false;
    const l = load();
    const top = l.indexOf(Math.max(...l));
    for (let o = 0; o < lanes && !improved; o++) {
      if (o === top) continue;
      const gap = (l[top] as number) - (l[o] as number);
      const from = bins[top] as number[];
      const to = bins[o] as number[];
      // move one call, or swap two, when that leaves both lanes shorter than the longest was
      for (let x = 0; x < from.length && !improved; x++) {
        const a = from[x] as number;
        if (a < gap) {
          to.push(...from.splice(x, 1));
          improved = true;
          break;
        }
        for (let y = 0; y < to.length; y++) {
          const b = to[y] as number;
          if (a > b && a - b < gap) {
            [from[x], to[y]] = [b, a];
            improved = true;
            break;
          }
        }
      }
    }
  }
  return Math.max(...load());
}
