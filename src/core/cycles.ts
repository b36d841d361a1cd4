/**
 * Cycles among data and policy edges, each reported with a path (`[a, b, a]`).
 *
 * graphology-dag can say *whether* a graph has a cycle but not which calls form it, so this finds the
 * strongly connected components (Tarjan's algorithm, iterative so a 100k-call chain cannot overflow
 * the stack) and walks one cycle inside each. Reference: R. Tarjan, "Depth-first search and linear
 * graph algorithms", SIAM J. Computing 1(2), 1972.
 *
 * Nodes are indexes 0..n-1; `succ[i]` lists i's successors (or the flat form, see adjacency.ts).
 */
import { adjacency, type Adjacency, type Successors } from './adjacency.js';

export interface CycleReport {
  /** Every node that lies on some cycle of this component, ascending. */
  members: number[];
  /** One cycle through the component's smallest node: first and last are the same node. */
  path: number[];
}

export function findCycles(n: number, succ: Successors): CycleReport[] {
  const g = adjacency(n, succ);
  const { start: first, list: out } = g;
  // No edge, no cycle (and no arrays per node to find that out).
  if (out.length === 0) return [];
  const index = new Int32Array(n).fill(-1);
  const low = new Int32Array(n);
  const onStack = new Uint8Array(n);
  const stack: number[] = [];
  const comps: number[][] = [];
  let counter = 0;
  // The depth-first path: node `workNode[k]`, and how many of its successors are done (`workNext[k]`).
  const workNode = new Int32Array(n);
  const workNext = new Int32Array(n);
  let depth = 0;

  for (let start = 0; start < n; start++) {
    if (index[start] !== -1) continue;
    workNode[0] = start;
    workNext[0] = 0;
    depth = 1;
    while (depth > 0) {
      const top = depth - 1;
      const v = workNode[top] as number;
      if (workNext[top] === 0 && index[v] === -1) {
        index[v] = low[v] = counter++;
        stack.push(v);
        onStack[v] = 1;
      }
      const next = workNext[top] as number;
      if (next < (first[v + 1] as number) - (first[v] as number)) {
        workNext[top] = next + 1;
        const w = out[(first[v] as number) + next] as number;
        if (index[w] === -1) {
          workNode[depth] = w;
          workNext[depth] = 0;
          depth++;
        } else if (onStack[w]) low[v] = Math.min(low[v] as number, index[w] as number);
        continue;
      }
      depth--;
      if (depth > 0) {
        const parent = workNode[depth - 1] as number;
        low[parent] = Math.min(low[parent] as number, low[v] as number);
      }
      if (low[v] === index[v]) {
        // Nearly every component is one node on no cycle: no list is made for it.
        if (stack[stack.length - 1] === v) {
          stack.pop();
          onStack[v] = 0;
          if (hasEdge(g, v, v)) comps.push([v]);
          continue;
        }
        const comp: number[] = [];
        let w: number;
        do {
          w = stack.pop() as number;
          onStack[w] = 0;
          comp.push(w);
        } while (w !== v);
        comps.push(comp.sort((a, b) => a - b));
      }
    }
  }
  return comps.sort((a, b) => (a[0] as number) - (b[0] as number)).map((members) => ({ members, path: cyclePath(members, g) }));
}

/** A shortest cycle through the component's first node (breadth-first inside the component). */
function cyclePath(members: readonly number[], g: Adjacency): number[] {
  const inComp = new Set(members);
  const start = members[0] as number;
  const prev = new Map<number, number>();
  const queue = [start];
  for (let q = 0; q < queue.length; q++) {
    const v = queue[q] as number;
    for (const w of successors(g, v).sort((a, b) => a - b)) {
      if (!inComp.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let u = v; u !== start; u = prev.get(u) as number) path.push(u);
        path.push(start);
        return [path[0] as number, ...path.slice(1, -1).reverse(), start];
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

function hasEdge(g: Adjacency, v: number, w: number): boolean {
  for (let k = g.start[v] as number; k < (g.start[v + 1] as number); k++) if (g.list[k] === w) return true;
  return false;
}

function successors(g: Adjacency, v: number): number[] {
  return Array.from(g.list.subarray(g.start[v], g.start[v + 1]));
}
