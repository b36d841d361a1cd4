// KeyedHeap (the scheduler's ready sets) against MinHeap with the comparator it stands for.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KeyedHeap, MinHeap } from '../../src/core/heap.js';

interface Item {
  p: number;
  i: number;
}

const byPriority = (a: Item, b: Item) => b.p - a.p || a.i - b.i;
const priority = fc.oneof(
  fc.integer({ min: -3, max: 3 }),
  fc.double({ noNaN: false }),
  fc.constantFrom(Infinity, -Infinity, NaN, 0.1 + 0.2, 0.3),
);
type Op = { push: number } | { pop: true } | { drop: number };
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: priority.map((p) => ({ push: p })) },
  { weight: 3, arbitrary: fc.constant({ pop: true as const }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 4 }).map((m) => ({ drop: m })) },
);

describe('KeyedHeap', () => {
  it('pops in the order of a MinHeap with the comparator `first - first || second - second`', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const keyed = new KeyedHeap<Item>(
          (x) => -x.p,
          (x) => x.i,
        );
        const plain = new MinHeap<Item>(byPriority);
        let next = 0;
        for (const o of ops) {
          if ('push' in o) {
            const item = { p: o.push, i: next++ };
            keyed.push(item);
            plain.push(item);
          } else if ('pop' in o) expect(keyed.pop()).toBe(plain.pop());
          else {
            keyed.removeWhere((x) => x.i % 5 === o.drop);
            plain.removeWhere((x) => x.i % 5 === o.drop);
          }
          expect(keyed.size).toBe(plain.size);
          expect(keyed.peek()).toBe(plain.peek());
        }
        while (plain.size > 0) expect(keyed.pop()).toBe(plain.pop());
        expect(keyed.pop()).toBeUndefined();
      }),
      { numRuns: 300 },
    );
  });
});
