// buildPlan (DESIGN §1, §3): cycles with their paths, plan-time errors, generations and the graph.
import { describe, expect, it } from 'vitest';
import type { Edge } from '../../src/core/calls.js';
import { findCycles } from '../../src/core/cycles.js';
import { stableTopologicalOrder, topologicalGenerations } from '../../src/core/order.js';
import { buildPlan } from '../../src/core/plan.js';
import type { Policy } from '../../src/core/tool.js';
import { catalogOf, tool } from '../helpers/catalog.js';

const pure = { reads: [], writes: [] };
const catalog = catalogOf([
  tool('step', pure),
  tool('write_file', {
    reads: [],
    writes: ['file:{path}'],
    input: {
      type: 'object',
      properties: { path: { type: 'string' }, mode: { type: 'integer' }, force: { type: 'boolean' } },
      required: ['path'],
    },
  }),
  tool('read_file', {
    reads: ['file:{path}'],
    writes: [],
    input: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  }),
  tool('ping', { ...pure, after: ['pong'] }),
  tool('pong', { ...pure, after: ['ping'] }),
]);
type C = { id: string; tool: string; args?: Record<string, unknown> };
const plan = (calls: C[], policy: Policy = { rules: [] }) => buildPlan({ calls, tenant: 'acme', catalog, policy });
const data = (from: string, to: string): Edge => ({ from, to, kind: 'data', reason: `${to} uses \${${from}.output}` });
const ref = (id: string) => `\${${id}.output}`;

describe('findCycles', () => {
  it.each<[string, number, number[][], { members: number[]; path: number[] }[]]>([
    ['none', 3, [[1], [2], []], []],
    ['no edges', 3, [[], [], []], []],
    ['a self-loop', 2, [[0], []], [{ members: [0], path: [0, 0] }]],
    ['a 2-cycle', 2, [[1], [0]], [{ members: [0, 1], path: [0, 1, 0] }]],
    ['a 3-cycle found from its smallest node', 4, [[], [3], [1], [2]], [{ members: [1, 2, 3], path: [1, 3, 2, 1] }]],
    [
      'two components, sorted by smallest node',
      6,
      [[], [], [5], [4], [3], [2]],
      [
        { members: [2, 5], path: [2, 5, 2] },
        { members: [3, 4], path: [3, 4, 3] },
      ],
    ],
    ['the shortest cycle through the first node', 4, [[1, 3], [2], [0], [0]], [{ members: [0, 1, 2, 3], path: [0, 3, 0] }]],
  ])('%s', (_label, n, succ, expected) => {
    expect(findCycles(n, succ)).toEqual(expected);
  });

  it('survives a 100k-node chain closed into a cycle (no recursion)', () => {
    const n = 100_000;
    const succ = Array.from({ length: n }, (_, i) => [(i + 1) % n]);
    const [c] = findCycles(n, succ);
    expect(c?.members.length).toBe(n);
    expect(c?.path.length).toBe(n + 1);
  });
});

describe('stableTopologicalOrder', () => {
  it.each<[string, number, number[][], number[], number[]]>([
    ['index order without edges', 4, [[], [], [], []], [], [0, 1, 2, 3]],
    ['no nodes', 0, [], [], []],
    ['without edges, skipped nodes left out', 4, [[], [], [], []], [0, 2], [1, 3]],
    ['a reversed chain', 3, [[], [0], [1]], [], [2, 1, 0]],
    ['smallest ready index first', 4, [[], [], [1], []], [], [0, 2, 1, 3]],
    ['a node freed late still goes before larger ready ones', 4, [[3], [], [], []], [], [0, 1, 2, 3]],
    ['skipped nodes are left out, their out-edges ignored', 5, [[1], [0, 4], [3], [], []], [0, 1], [2, 3, 4]],
    ['a node with a skipped and a placed predecessor', 4, [[1, 3], [0], [3], []], [0, 1], [2, 3]],
  ])('%s', (_label, n, succ, skip, expected) => {
    expect(stableTopologicalOrder(n, succ, new Set(skip))).toEqual(expected);
  });
});

describe('topologicalGenerations', () => {
  it.each<[string, number, number[][], number[], number[][]]>([
    ['no nodes', 0, [], [], []],
    ['one generation without edges', 3, [[], [], []], [], [[0, 1, 2]]],
    ['without edges, skipped nodes left out', 3, [[], [], []], [1], [[0, 2]]],
    ['every node skipped', 2, [[], []], [0, 1], []],
    ['layers by last predecessor', 4, [[2], [], [3], []], [], [[0, 1], [2], [3]]],
    ['skipped nodes and their out-edges left out', 3, [[1], [2], []], [0], [[1], [2]]],
  ])('%s', (_label, n, succ, skip, expected) => {
    expect(topologicalGenerations(n, succ, new Set(skip))).toEqual(expected);
  });
});

describe('cycles in buildPlan', () => {
  it('a 2-cycle of data references: reported with its path, both calls blocked', () => {
    const p = plan([
      { id: 'a', tool: 'step', args: { x: ref('b') } },
      { id: 'b', tool: 'step', args: { x: ref('a') } },
    ]);
    expect(p.diagnostics).toEqual([{ code: 'cycle', message: 'cycle among data and policy edges: a → b → a', callIds: ['a', 'b', 'a'] }]);
    expect(p.calls.map((c) => c.blockedBy)).toEqual([
      { code: 'cycle', message: 'a is on the cycle a → b → a', details: { cycle: ['a', 'b', 'a'] } },
      { code: 'cycle', message: 'b is on the cycle a → b → a', details: { cycle: ['a', 'b', 'a'] } },
    ]);
    expect(p.edges).toEqual([data('b', 'a'), data('a', 'b')]);
    expect(p.generations).toEqual([]);
  });

  it('a 3-cycle beside independent calls: only the cycle is blocked', () => {
    const p = plan([
      { id: 'free1', tool: 'step' },
      { id: 'x', tool: 'step', args: { v: ref('z') } },
      { id: 'y', tool: 'step', args: { v: ref('x') } },
      { id: 'free2', tool: 'step', args: { v: ref('free1') } },
      { id: 'z', tool: 'step', args: { v: ref('y') } },
      { id: 'free3', tool: 'write_file', args: { path: '/a' } },
    ]);
    expect(p.diagnostics).toEqual([
      { code: 'cycle', message: 'cycle among data and policy edges: x → y → z → x', callIds: ['x', 'y', 'z', 'x'] },
    ]);
    const blocked = Object.fromEntries(p.calls.map((c) => [c.id, c.blockedBy?.code ?? null]));
    expect(blocked).toEqual({ free1: null, x: 'cycle', y: 'cycle', free2: null, z: 'cycle', free3: null });
    expect(p.calls.every((c) => c.error === undefined)).toBe(true);
    expect(p.generations).toEqual([['free1', 'free3'], ['free2']]);
  });

  it('calls downstream of a cycle are left out of the generations and get no conflict edges', () => {
    const p = plan([
      { id: 'a', tool: 'step', args: { v: ref('b') } },
      { id: 'b', tool: 'step', args: { v: ref('a') } },
      { id: 'down', tool: 'write_file', args: { path: '/f', c: ref('b') } },
      { id: 'w', tool: 'write_file', args: { path: '/f' } },
    ]);
    expect(p.edges).toEqual([data('b', 'a'), data('a', 'b'), data('b', 'down')]);
    // down never runs (the scheduler blocks it), yet it stays in the generations: only cycle members go
    expect(p.generations).toEqual([['down', 'w']]);
    expect(p.calls[2]?.blockedBy).toBeUndefined();
  });

  it('a self-reference is a cycle of one', () => {
    const p = plan([
      { id: 'me', tool: 'step', args: { v: `${ref('me')}!` } },
      { id: 'other', tool: 'step' },
    ]);
    expect(p.diagnostics).toEqual([{ code: 'cycle', message: 'cycle among data and policy edges: me → me', callIds: ['me', 'me'] }]);
    expect(p.calls[0]?.blockedBy?.code).toBe('cycle');
    expect(p.calls[1]?.blockedBy).toBeUndefined();
    expect(p.edges).toEqual([data('me', 'me')]);
    expect(p.generations).toEqual([['other']]);
  });

  it('a self-reference by tool name is a cycle of one too', () => {
    const p = plan([{ id: 'me', tool: 'step', args: { v: '${step.output}' } }]);
    expect(p.diagnostics.map((d) => d.callIds)).toEqual([['me', 'me']]);
  });

  it('a cycle of policy edges', () => {
    const p = plan([
      { id: 'p1', tool: 'ping' },
      { id: 'p2', tool: 'pong' },
    ]);
    expect(p.edges).toEqual([
      { from: 'p2', to: 'p1', kind: 'policy', reason: 'tool ping: ping after pong' },
      { from: 'p1', to: 'p2', kind: 'policy', reason: 'tool pong: pong after ping' },
    ]);
    expect(p.diagnostics.map((d) => [d.code, d.callIds])).toEqual([['cycle', ['p1', 'p2', 'p1']]]);
  });

  it('a cycle mixing data and policy edges, and two separate cycles', () => {
    const p = plan([
      { id: 'p1', tool: 'ping', args: { v: ref('s1') } },
      { id: 's1', tool: 'step', args: { v: ref('p2') } },
      { id: 'p2', tool: 'pong' },
      { id: 'c1', tool: 'step', args: { v: ref('c2') } },
      { id: 'c2', tool: 'step', args: { v: ref('c1') } },
    ]);
    expect(p.diagnostics.map((d) => d.callIds)).toEqual([
      ['p1', 'p2', 'p1'],
      ['c1', 'c2', 'c1'],
    ]);
    expect(p.calls.map((c) => c.blockedBy?.code)).toEqual(['cycle', 'cycle', 'cycle', 'cycle', 'cycle']);
  });
});

describe('plan-time errors', () => {
  it('an unknown tool fails its call', () => {
    const p = plan([
      { id: 'a', tool: 'nope', args: { x: 1 } },
      { id: 'b', tool: 'step' },
    ]);
    expect(p.calls[0]?.error).toEqual({ code: 'unknown_tool', message: 'a: no tool named nope in the catalog', details: { tool: 'nope' } });
    expect(p.calls[0]?.manifest).toBeUndefined();
    expect(p.calls[1]?.error).toBeUndefined();
    expect(p.diagnostics).toEqual([{ code: 'unknown_tool', message: 'a: no tool named nope in the catalog', callId: 'a' }]);
    expect(p.generations).toEqual([['a', 'b']]);
  });

  it.each<[string, Record<string, unknown> | undefined, string | null]>([
    ['valid', { path: '/a', mode: 420, force: true }, null],
    ['args default to {}', undefined, 'missing required property path'],
    ['a missing required arg', { mode: 1 }, 'missing required property path'],
    ['a wrong type', { path: 7 }, 'property path: expected string, got integer'],
    ['a float for an integer', { path: '/a', mode: 1.5 }, 'property mode: expected integer, got number'],
    ['a string for a boolean', { path: '/a', force: 'yes' }, 'property force: expected boolean, got string'],
    ['an escape is undone before the check', { path: '$${HOME}' }, null],
    ['${HOME} is a plain string', { path: '${HOME}' }, null],
  ])('invalid_args: %s', (_label, args, problem) => {
    const p = plan([{ id: 'w', tool: 'write_file', ...(args ? { args } : {}) }]);
    if (problem === null) expect(p.calls[0]?.error).toBeUndefined();
    else {
      expect(p.calls[0]?.error).toEqual({ code: 'invalid_args', message: `w: ${problem}`, details: { tool: 'write_file' } });
      expect(p.diagnostics).toEqual([{ code: 'invalid_args', message: `w: ${problem}`, callId: 'w' }]);
    }
  });

  it('args with references are not schema-checked at plan time', () => {
    const p = plan([
      { id: 'src', tool: 'step' },
      { id: 'w', tool: 'write_file', args: { mode: `${ref('src')}`, force: 'not a boolean' } },
    ]);
    expect(p.calls[1]?.error).toBeUndefined();
    expect(p.calls[1]?.hasRefs).toBe(true);
    expect(p.diagnostics).toEqual([]);
  });

  it('a call that failed at plan time still anchors data edges, and its dependents get no conflicts', () => {
    const p = plan([
      { id: 'bad', tool: 'write_file', args: { path: 1 } },
      { id: 'dep', tool: 'read_file', args: { path: '/a', v: ref('bad') } },
      { id: 'w', tool: 'write_file', args: { path: '/a' } },
    ]);
    expect(p.calls[0]?.error?.code).toBe('invalid_args');
    expect(p.calls[1]?.error).toBeUndefined();
    expect(p.edges).toEqual([data('bad', 'dep')]);
  });

  it('every diagnostic is listed: cycles first, then failed calls in call order', () => {
    const p = plan(
      [
        { id: 'u', tool: 'nope' },
        { id: 'a', tool: 'step', args: { v: ref('b') } },
        { id: 'b', tool: 'step', args: { v: ref('a') } },
        { id: 'i', tool: 'write_file', args: {} },
        { id: 'd', tool: 'step' },
      ],
      { rules: [{ match: { tool: 'step' }, deny: 'no steps' }] },
    );
    expect(p.diagnostics.map((d) => [d.code, d.callId ?? d.callIds])).toEqual([
      ['cycle', ['a', 'b', 'a']],
      ['unknown_tool', 'u'],
      ['policy_denied', 'a'],
      ['policy_denied', 'b'],
      ['invalid_args', 'i'],
      ['policy_denied', 'd'],
    ]);
    // a failed call on a cycle keeps its error and is not also blocked
    expect(p.calls[1]?.blockedBy).toBeUndefined();
  });
});

describe('the plan`s graph and generations', () => {
  it('mirrors the edges with kind and reason, and lists generations in call order', () => {
    const p = plan([
      { id: 'w', tool: 'write_file', args: { path: '/a' } },
      { id: 's', tool: 'step' },
      { id: 'r', tool: 'read_file', args: { path: '/a', v: ref('s') } },
      { id: 'last', tool: 'step', args: { v: ref('r') } },
    ]);
    expect(p.edges).toEqual([
      data('s', 'r'),
      data('r', 'last'),
      { from: 'w', to: 'r', kind: 'conflict', reason: 'read-after-write on file:/a' },
    ]);
    expect(p.graph.order).toBe(4);
    expect(p.graph.nodes()).toEqual(['w', 's', 'r', 'last']);
    expect(p.graph.getNodeAttributes('r')).toEqual({ tool: 'read_file', index: 2 });
    expect(p.graph.mapEdges((_e, attrs, from, to) => ({ from, to, ...attrs }))).toEqual(p.edges);
    expect(p.generations).toEqual([['w', 's'], ['r'], ['last']]);
  });

  it('plans call ids named like Object.prototype properties (without touching plan.graph)', () => {
    // graphology keeps neighbours in plain objects, so plan.graph throws for such ids: buildPlan must
    // not build it eagerly.
    const p = plan([
      { id: 'constructor', tool: 'write_file', args: { path: '/a' } },
      { id: '__proto__', tool: 'step', args: { v: ref('constructor') } },
      { id: 'toString', tool: 'read_file', args: { path: '/a', v: ref('__proto__') } },
      { id: 'hasOwnProperty', tool: 'write_file', args: { path: '/a' } },
    ]);
    expect(p.edges).toEqual([
      data('constructor', '__proto__'),
      data('__proto__', 'toString'),
      { from: 'constructor', to: 'toString', kind: 'conflict', reason: 'read-after-write on file:/a' },
      { from: 'toString', to: 'hasOwnProperty', kind: 'conflict', reason: 'write-after-read on file:/a' },
    ]);
    expect(p.generations).toEqual([['constructor'], ['__proto__'], ['toString'], ['hasOwnProperty']]);
    expect(p.diagnostics).toEqual([]);
  });

  it('handles an empty batch', () => {
    const p = plan([]);
    expect(p).toMatchObject({ calls: [], edges: [], generations: [], diagnostics: [] });
    expect(p.graph.order).toBe(0);
  });
});
