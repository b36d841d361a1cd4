/**
 * A stable topological order: Kahn's algorithm taking, among the nodes whose predecessors are all
 * placed, the one with the smallest original index (a binary heap). Same graph → same order. Nodes in
 * `skip` (those on a cycle) are left out and their out-edges ignored, so what they lead to is still
 * placed, as if those edges were not there. Reference: A. B. Kahn, "Topological sorting of
 * large networks", CACM 5(11), 1962.
 */
import { adjacency, type Adjacency, type Successors } from './adjacency.js';
import { IndexHeap } from './heap.js';

export function stableTopologicalOrder(n: number, succ: Successors, skip?: ReadonlySet<number>): number[] {
  const { start, list } = adjacency(n, succ);
  if (list.length === 0) return unskipped(n, skip);
  const skipped = mask(n, skip);
  const indeg = inDegrees({ n, start, list }, skipped);
  const heap = new IndexHeap(n);
  for (let v = 0; v < n; v++) if (indeg[v] === 0 && !skipped[v]) heap.push(v);
  const order: number[] = [];
  while (heap.size > 0) {
    const v = heap.pop();
    order.push(v);
    for (let k = start[v] as number; k < (start[v + 1] as number); k++) {
      const w = list[k] as number;
      indeg[w] = (indeg[w] as number) - 1;
      if (indeg[w] === 0 && !skipped[w]) heap.push(w);
    }
  }
  return order;
}

const byValue = (a: number, b: number) => a - b;

/** The nodes not in `skip`, in index order: the order, and the one generation, of a graph without edges
 *  (a small batch of independent calls, most often; no arrays per node are needed to find it). */
function unskipped(n: number, skip: ReadonlySet<number> | undefined): number[] {
  const out: number[] = [];
  for (let v = 0; v < n; v++) if (!skip?.has(v)) out.push(v);
  return out;
}

/** `skip` as a flag per node (a Set lookup per edge cost more than the rest of the sort). */
function mask(n: number, skip: ReadonlySet<number> | undefined): Uint8Array {
  const out = new Uint8Array(n);
  if (skip) for (const v of skip) out[v] = 1;
  return out;
}

/** In-degrees, ignoring the out-edges of skipped nodes. */
function inDegrees({ n, start, list }: Adjacency, skipped: Uint8Array): Int32Array {
  const indeg = new Int32Array(n);
  for (let v = 0; v < n; v++) {
    if (skipped[v]) continue;
    for (let k = start[v] as number; k < (start[v + 1] as number); k++) indeg[list[k] as number] = (indeg[list[k] as number] as number) + 1;
  }
  return indeg;
}

/**
 * Topological generations (Kahn's algorithm by layers): generation 0 holds the nodes without
 * predecessors, generation k those whose last predecessor is in generation k − 1; each in index order.
 * Nodes in `skip` are left out and their edges ignored, as above. The same as graphology-dag's
 * `topologicalGenerations` on the graph without the skipped nodes, without building or copying one.
 */
export function topologicalGenerations(n: number, succ: Successors, skip?: ReadonlySet<number>): number[][] {
  const { start, list } = adjacency(n, succ);
  if (list.length === 0) {
    const all = unskipped(n, skip);
    return all.length > 0 ? [all] : [];
  }
  const skipped = mask(n, skip);
  const indeg = inDegrees({ n, start, list }, skipped);
  const generations: number[][] = [];
  let current: number[] = [];
  for (let v = 0; v < n; v++) if (indeg[v] === 0 && !skipped[v]) current.push(v);
  while (current.length > 0) {
    generations.push(current);
    const next: number[] = [];
    for (let j = 0; j < current.length; j++) {
      const v = current[j] as number;
      for (let k = start[v] as number; k < (start[v + 1] as number); k++) {
        const w = list[k] as number;
        indeg[w] = (indeg[w] as number) - 1;
        if (indeg[w] === 0 && !skipped[w]) next.push(w);
      }
    }
    current = next.sort(byValue);
  }
  return generations;
}
