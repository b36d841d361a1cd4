// The plan's internal index structures, which the scheduler relies on and nothing else checks directly:
// the flat adjacency of every edge, the successor lists made from it, and the edges' call indexes.
import { describe, expect, it } from 'vitest';
import { bigBatch } from '../../src/bench/core.js';
import { adjacency, successorLists } from '../../src/core/adjacency.js';
import { buildPlan, type Plan } from '../../src/core/plan.js';
import { catalogOf, tool } from '../helpers/catalog.js';

const catalog = catalogOf([
  tool('read', { reads: ['file:{path}'], writes: [] }),
  tool('write', { reads: [], writes: ['file:{path}'] }),
  tool('search', { reads: [], writes: [] }),
  tool('after_write', { reads: [], writes: [], after: ['write'] }),
]);

function plans(): Plan[] {
  const { calls } = bigBatch(600, 11);
  const withPolicy = [...calls.slice(0, 80), { id: 'aw', tool: 'after_write', args: {} }, { id: 'x', tool: 'nope', args: {} }];
  return [calls, withPolicy].map((cs) => buildPlan({ calls: cs, tenant: 't', catalog, policy: { rules: [] } }));
}

describe('plan internals', () => {
  it('edgeCalls names the calls of each edge, in the order of edges', () => {
    for (const p of plans()) {
      expect(p.edgeCalls.length).toBe(2 * p.edges.length);
      p.edges.forEach((e, k) => {
        expect(p.calls[p.edgeCalls[2 * k] as number]?.id).toBe(e.from);
        expect(p.calls[p.edgeCalls[2 * k + 1] as number]?.id).toBe(e.to);
      });
    }
  });

  it('adjacency holds every edge, each call’s successors in the order of edges; succ lists the same', () => {
    for (const p of plans()) {
      const n = p.calls.length;
      const expected: number[][] = Array.from({ length: n }, () => []);
      for (let k = 0; k < p.edges.length; k++) expected[p.edgeCalls[2 * k] as number]?.push(p.edgeCalls[2 * k + 1] as number);
      expect(p.adjacency.n).toBe(n);
      expect(successorLists(p.adjacency)).toEqual(expected);
      expect(p.succ).toEqual(expected);
      expect(p.succ).toBe(p.succ); // made once
      expect(adjacency(n, p.succ)).toEqual(p.adjacency);
    }
  });
});
