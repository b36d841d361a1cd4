/**
 * A stable topological order: Kahn's algorithm taking, among the nodes whose predecessors are all
 * placed, the one with the smallest original index (a binary heap). Same graph → same order. Nodes in
 * `skip` (those on a cycle) are left out and their out-edges ignored, so what they lead to is still
 * placed, as if those edges were not there. Reference: A. B. Kahn, "Topological sorting of
 * large networks", CACM 5(11), 1962.
 */
import { MinHeap } from './heap.js';

export function stableTopologicalOrder(n: number, succ: readonly (readonly number[])[], skip?: ReadonlySet<number>): number[] {
  const indeg = new Int32Array(n);
  for (let v = 0; v < n; v++) {
    if (skip?.has(v)) continue;
    for (const w of succ[v] as readonly number[]) indeg[w] = (indeg[w] as number) + 1;
  }
  const heap = new MinHeap<number>((a, b) => a - b);
  for (let v = 0; v < n; v++) if (indeg[v] === 0 && !skip?.has(v)) heap.push(v);
  const order: number[] = [];
  while (heap.size > 0) {
    const v = heap.pop() as number;
    order.push(v);
    for (const w of succ[v] as readonly number[]) {
      indeg[w] = (indeg[w] as number) - 1;
      if (indeg[w] === 0 && !skip?.has(w)) heap.push(w);
    }
  }
  return order;
}

/**
 * Topological generations (Kahn's algorithm by layers): generation 0 holds the nodes without
 * predecessors, generation k those whose last predecessor is in generation k − 1; each in index order.
 * Nodes in `skip` are left out and their edges ignored, as above. The same as graphology-dag's
 * `topologicalGenerations` on the graph without the skipped nodes, without building or copying one.
 */
export function topologicalGenerations(n: number, succ: readonly (readonly number[])[], skip?: ReadonlySet<number>): number[][] {
  const indeg = new Int32Array(n);
  for (let v = 0; v < n; v++) {
    if (skip?.has(v)) continue;
    for (const w of succ[v] as readonly number[]) indeg[w] = (indeg[w] as number) + 1;
  }
  const generations: number[][] = [];
  let current: number[] = [];
  for (let v = 0; v < n; v++) if (indeg[v] === 0 && !skip?.has(v)) current.push(v);
  while (current.length > 0) {
    generations.push(current);
    const next: number[] = [];
    for (const v of current) {
      for (const w of succ[v] as readonly number[]) {
        indeg[w] = (indeg[w] as number) - 1;
        if (indeg[w] === 0 && !skip?.has(w)) next.push(w);
      }
    }
    current = next.sort((a, b) => a - b);
  }
  return generations;
}
