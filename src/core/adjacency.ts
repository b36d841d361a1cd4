/**
 * Successor lists in two flat arrays (compressed sparse rows): the successors of node `v` are
 * `list[start[v]]` … `list[start[v + 1] - 1]`, in the order their edges were added.
 *
 * The graph passes of a plan (cycles, topological order, generations) walk these rather than one JS
 * array per node: at 100k calls the scattered arrays cost a cache miss per node and pass, and there
 * are several passes.
 */
export interface Adjacency {
  n: number;
  start: Int32Array;
  list: Int32Array;
}

/** A graph as successor lists per node, or already flat. */
export type Successors = readonly (readonly number[])[] | Adjacency;

/** The flat form of `succ` (itself when it is flat already). */
export function adjacency(n: number, succ: Successors): Adjacency {
  if (!Array.isArray(succ)) return succ as Adjacency;
  const lists = succ as readonly (readonly number[])[];
  const start = new Int32Array(n + 1);
  for (let v = 0; v < n; v++) start[v + 1] = (start[v] as number) + (lists[v] as readonly number[]).length;
  const list = new Int32Array(start[n] as number);
  for (let v = 0; v < n; v++) list.set(lists[v] as readonly number[], start[v] as number);
  return { n, start, list };
}

/** The graph of the edges `pairs[2k]` → `pairs[2k + 1]` (each node's successors in that order). */
export function fromPairs(n: number, pairs: readonly number[]): Adjacency {
  const start = offsets(n, (count) => {
    for (let k = 0; k < pairs.length; k += 2) count(pairs[k] as number);
  });
  const next = start.slice(0, n);
  const list = new Int32Array(start[n] as number);
  for (let k = 0; k < pairs.length; k += 2) list[(next[pairs[k] as number] as number)++] = pairs[k + 1] as number;
  return { n, start, list };
}

/** The same edges turned around: each node's predecessors, in the order of their edges. */
export function reversed(g: Adjacency): Adjacency {
  const { n, start: s, list: l } = g;
  const start = offsets(n, (count) => {
    for (let k = 0; k < l.length; k++) count(l[k] as number);
  });
  const next = start.slice(0, n);
  const list = new Int32Array(l.length);
  for (let v = 0; v < n; v++) for (let k = s[v] as number; k < (s[v + 1] as number); k++) list[(next[l[k] as number] as number)++] = v;
  return { n, start, list };
}

/** Row offsets from the number of entries per node (`each` calls `count(v)` once per entry of `v`). */
function offsets(n: number, each: (count: (v: number) => void) => void): Int32Array {
  const start = new Int32Array(n + 1);
  each((v) => {
    start[v + 1] = (start[v + 1] as number) + 1;
  });
  for (let v = 0; v < n; v++) start[v + 1] = (start[v + 1] as number) + (start[v] as number);
  return start;
}

/** `g` as one array of successors per node (for callers that want lists). */
export function successorLists(g: Adjacency): number[][] {
  const out: number[][] = [];
  for (let v = 0; v < g.n; v++) out.push(Array.from(g.list.subarray(g.start[v], g.start[v + 1])));
  return out;
}
