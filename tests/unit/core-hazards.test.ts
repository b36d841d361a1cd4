// Hazards (DESIGN §3): read-after-write, write-after-read and write-after-write edges, exact, through
// buildPlan and through the HazardIndex itself.
import { describe, expect, it } from 'vitest';
import type { Edge } from '../../src/core/calls.js';
import { HazardIndex } from '../../src/core/hazards.js';
import { buildPlan } from '../../src/core/plan.js';
import { accessOf } from '../../src/core/resources.js';
import { catalogOf, tool } from '../helpers/catalog.js';

const catalog = catalogOf([
  tool('read_file', { reads: ['file:{path}'], writes: [] }),
  tool('write_file', { reads: [], writes: ['file:{path}'] }),
  tool('edit_file', { reads: ['file:{path}'], writes: ['file:{path}'] }),
  tool('copy_file', { reads: ['file:{from}'], writes: ['file:{to}'] }),
  tool('pure', { reads: [], writes: [] }),
]);

type C = { id: string; tool: string; args?: Record<string, unknown> };
const plan = (calls: C[]) => buildPlan({ calls, tenant: 'acme', catalog, policy: { rules: [] } });
const conflict = (from: string, to: string, reason: string): Edge => ({ from, to, kind: 'conflict', reason });
const data = (from: string, to: string, target = from): Edge => ({ from, to, kind: 'data', reason: `${to} uses \${${target}.output}` });
const r = (id: string, path: string): C => ({ id, tool: 'read_file', args: { path } });
const w = (id: string, path: string, extra: Record<string, unknown> = {}): C => ({ id, tool: 'write_file', args: { path, ...extra } });

describe('hazard edges through buildPlan', () => {
  it('orders readers and writers of one file: RAW, WAR, WAW', () => {
    const p = plan([
      r('r1', '/a'),
      r('r2', '/a'),
      w('w1', '/a'),
      r('r3', '/a'),
      r('r4', '/a'),
      w('w2', '/a'),
      w('w3', '/a'),
      r('r5', '/a'),
    ]);
    expect(p.edges).toEqual([
      conflict('r1', 'w1', 'write-after-read on file:/a'),
      conflict('r2', 'w1', 'write-after-read on file:/a'),
      conflict('w1', 'r3', 'read-after-write on file:/a'),
      conflict('w1', 'r4', 'read-after-write on file:/a'),
      // w1 > w2 is implied by w1 > r3 > w2
      conflict('r3', 'w2', 'write-after-read on file:/a'),
      conflict('r4', 'w2', 'write-after-read on file:/a'),
      conflict('w2', 'w3', 'write-after-write on file:/a'),
      conflict('w3', 'r5', 'read-after-write on file:/a'),
    ]);
    expect(p.generations).toEqual([['r1', 'r2'], ['w1'], ['r3', 'r4'], ['w2'], ['w3'], ['r5']]);
    expect(p.diagnostics).toEqual([]);
  });

  it('read–read pairs never get an edge', () => {
    const p = plan([r('a', '/x'), r('b', '/x'), r('c', '/x/y'), r('d', '/'), { id: 'e', tool: 'read_file', args: {} }]);
    expect(p.edges).toEqual([]);
    expect(p.generations).toEqual([['a', 'b', 'c', 'd', 'e']]);
  });

  it('independent files stay independent', () => {
    const p = plan([w('a', '/a'), w('b', '/b'), r('c', '/c'), w('a2', '/a'), r('b2', '/b')]);
    expect(p.edges).toEqual([conflict('a', 'a2', 'write-after-write on file:/a'), conflict('b', 'b2', 'read-after-write on file:/b')]);
  });

  it('orders across prefixes and wildcards, naming the earlier key', () => {
    const p = plan([
      r('readSrc', '/repo/src'),
      w('writeA', '/repo/src/a.ts'),
      r('readX', '/repo/srcx'),
      w('writeRepo', '/repo'),
      r('readA', '/repo/src/a.ts'),
      { id: 'writeAny', tool: 'write_file', args: {} },
      r('readB', '/other'),
    ]);
    // Not a transitive reduction: a writer waits for every entry it overlaps at other trie nodes, so
    // readSrc>writeRepo (implied by readSrc>writeA>writeRepo) and writeRepo>writeAny (implied by
    // writeRepo>readA>writeAny) are there too. Only same-key "readers since the last writer" are reduced.
    expect(p.edges).toEqual([
      conflict('readSrc', 'writeA', 'write-after-read on file:/repo/src'),
      conflict('readSrc', 'writeRepo', 'write-after-read on file:/repo/src'),
      conflict('writeA', 'writeRepo', 'write-after-write on file:/repo/src/a.ts'),
      conflict('readX', 'writeRepo', 'write-after-read on file:/repo/srcx'),
      conflict('writeRepo', 'readA', 'read-after-write on file:/repo'),
      conflict('writeRepo', 'writeAny', 'write-after-write on file:/repo'),
      conflict('readA', 'writeAny', 'write-after-read on file:/repo/src/a.ts'),
      conflict('writeAny', 'readB', 'read-after-write on file:*'),
    ]);
  });

  it('readers of a directory do not pile up under writes of its files', () => {
    // L3 waits for W1, which waited for L1 and L2: L3 stands in for them, so W2 and W3 wait for L3
    // only (without this every write below d would wait for every reader of d: quadratic).
    const p = plan([r('L1', '/d'), r('L2', '/d'), w('W1', '/d/a'), r('L3', '/d'), w('W2', '/d/b'), w('W3', '/d/c'), r('L4', '/d')]);
    expect(p.edges).toEqual([
      conflict('L1', 'W1', 'write-after-read on file:/d'),
      conflict('L2', 'W1', 'write-after-read on file:/d'),
      conflict('W1', 'L3', 'read-after-write on file:/d/a'),
      conflict('L3', 'W2', 'write-after-read on file:/d'),
      conflict('L3', 'W3', 'write-after-read on file:/d'),
      conflict('W1', 'L4', 'read-after-write on file:/d/a'),
      conflict('W2', 'L4', 'read-after-write on file:/d/b'),
      conflict('W3', 'L4', 'read-after-write on file:/d/c'),
    ]);
  });

  it('a call that reads and writes (edit) waits like a writer', () => {
    const p = plan([
      r('r1', '/a'),
      { id: 'e1', tool: 'edit_file', args: { path: '/a' } },
      { id: 'e2', tool: 'edit_file', args: { path: '/a' } },
      r('r2', '/a'),
    ]);
    expect(p.edges).toEqual([
      conflict('r1', 'e1', 'write-after-read on file:/a'),
      conflict('e1', 'e2', 'write-after-write on file:/a'),
      conflict('e2', 'r2', 'read-after-write on file:/a'),
    ]);
  });

  it('a call with several keys gets one edge per earlier call, the first key found naming it', () => {
    const p = plan([
      w('w1', '/a'),
      w('w2', '/b'),
      { id: 'cp', tool: 'copy_file', args: { from: '/a', to: '/b' } },
      { id: 'cp2', tool: 'copy_file', args: { from: '/b', to: '/a' } },
    ]);
    expect(p.edges).toEqual([
      conflict('w1', 'cp', 'read-after-write on file:/a'),
      conflict('w2', 'cp', 'write-after-write on file:/b'),
      conflict('cp', 'cp2', 'read-after-write on file:/b'),
    ]);
  });

  it('pure calls and their neighbours', () => {
    const p = plan([w('w', '/a'), { id: 'p', tool: 'pure' }, r('r', '/a')]);
    expect(p.edges).toEqual([conflict('w', 'r', 'read-after-write on file:/a')]);
    expect(p.generations).toEqual([['w', 'p'], ['r']]);
  });

  it('a data edge from a later call to an earlier one reverses their conflict order', () => {
    // By index w1 would come before r2; r2's output feeds w1, so r2 reads first and w1 writes after.
    const p = plan([w('w1', '/a', { content: '${r2.output.text}' }), r('r2', '/a'), r('r3', '/a')]);
    expect(p.edges).toEqual([data('r2', 'w1'), conflict('w1', 'r3', 'read-after-write on file:/a')]);
    expect(p.diagnostics).toEqual([]);
    expect(p.generations).toEqual([['r2'], ['w1'], ['r3']]);
  });

  it('a data edge through a third call reverses the conflict order too', () => {
    const p = plan([
      w('w1', '/a', { content: '${mid.output}' }),
      r('r2', '/a'),
      { id: 'mid', tool: 'pure', args: { x: '${r2.output}' } },
      w('w4', '/a'),
    ]);
    expect(p.edges).toEqual([
      data('mid', 'w1'),
      data('r2', 'mid'),
      conflict('r2', 'w1', 'write-after-read on file:/a'),
      conflict('w1', 'w4', 'write-after-write on file:/a'),
    ]);
    expect(p.diagnostics).toEqual([]);
    expect(p.generations).toEqual([['r2'], ['mid'], ['w1'], ['w4']]);
  });

  it('ties in the data order are broken by original index, not by generation', () => {
    // w1 is in generation 2 and r2 in generation 1, but once src is placed w1 is ready and has the
    // smaller index, so w1 comes first: r2 reads after w1 writes.
    const p = plan([{ id: 'src', tool: 'pure' }, w('w1', '/a', { c: '${src.output}' }), r('r2', '/a')]);
    expect(p.edges).toEqual([data('src', 'w1'), conflict('w1', 'r2', 'read-after-write on file:/a')]);
    expect(p.generations).toEqual([['src'], ['w1'], ['r2']]);
  });

  it('calls that fail at plan time and their dependents hold no resources', () => {
    const p = plan([
      w('w1', '/a'),
      { id: 'bad', tool: 'nope', args: { path: '/a' } },
      w('dep', '/a', { c: '${bad.output}' }),
      r('r', '/a'),
    ]);
    expect(p.edges).toEqual([data('bad', 'dep'), conflict('w1', 'r', 'read-after-write on file:/a')]);
    expect(p.calls[1]?.error?.code).toBe('unknown_tool');
  });

  it('builds an exact chain over many calls', () => {
    const calls: C[] = [];
    for (let i = 0; i < 30; i++) calls.push(i % 3 === 2 ? w(`c${i}`, '/k') : r(`c${i}`, '/k'));
    const p = plan(calls);
    const expected: Edge[] = [];
    for (let i = 0; i < 30; i++) {
      if (i % 3 === 2) {
        expected.push(
          conflict(`c${i - 2}`, `c${i}`, 'write-after-read on file:/k'),
          conflict(`c${i - 1}`, `c${i}`, 'write-after-read on file:/k'),
        );
      } else if (i >= 3) {
        expected.push(conflict(`c${i - (i % 3) - 1}`, `c${i}`, 'read-after-write on file:/k'));
      }
    }
    expect(p.edges).toEqual(expected);
    expect(p.generations.length).toBe(20);
  });
});

describe('HazardIndex', () => {
  const acc = (reads: string[], writes: string[]) => accessOf({ reads, writes }, {});

  it('reports hazards by earlier call, sorted, one per call', () => {
    const h = new HazardIndex();
    expect(h.add(0, acc(['a:x'], []))).toEqual([]);
    expect(h.add(1, acc([], ['b']))).toEqual([]);
    expect(h.add(2, acc([], ['a', 'b:y']))).toEqual([
      { from: 0, kind: 'write-after-read', key: 'a:x' },
      { from: 1, kind: 'write-after-write', key: 'b' },
    ]);
    // 1 wrote b, 2 wrote b:y after it: a reader of b:y meets both (b stays for b's other children)
    expect(h.add(3, acc(['a:x:z', 'b:y'], []))).toEqual([
      { from: 1, kind: 'read-after-write', key: 'b' },
      { from: 2, kind: 'read-after-write', key: 'a' },
    ]);
    expect(h.add(4, acc(['*'], []))).toEqual([
      { from: 1, kind: 'read-after-write', key: 'b' },
      { from: 2, kind: 'read-after-write', key: 'b:y' },
    ]);
    // Per trie node: a and b have writers and no readers of their own, so * waits for those writers
    // too, though 3 and 4 already wait for them.
    expect(h.add(5, acc([], ['*']))).toEqual([
      { from: 1, kind: 'write-after-write', key: 'b' },
      { from: 2, kind: 'write-after-write', key: 'a' },
      { from: 3, kind: 'write-after-read', key: 'b:y' },
      { from: 4, kind: 'write-after-read', key: '*' },
    ]);
    expect(h.add(6, acc(['q'], []))).toEqual([{ from: 5, kind: 'read-after-write', key: '*' }]);
  });

  it('a write under a wildcard keeps the wildcard for its other keys', () => {
    const h = new HazardIndex();
    h.add(0, acc([], ['svc:*:web']));
    expect(h.add(1, acc([], ['svc:prod:web']))).toEqual([{ from: 0, kind: 'write-after-write', key: 'svc:*:web' }]);
    expect(h.add(2, acc(['svc:dev:web'], []))).toEqual([{ from: 0, kind: 'read-after-write', key: 'svc:*:web' }]);
    expect(h.add(3, acc(['svc:dev:db'], []))).toEqual([]);
    expect(h.add(4, acc(['svc:prod'], []))).toEqual([
      { from: 0, kind: 'read-after-write', key: 'svc:*:web' },
      { from: 1, kind: 'read-after-write', key: 'svc:prod:web' },
    ]);
  });
});
