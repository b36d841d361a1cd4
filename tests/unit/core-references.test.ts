// References (DESIGN §1): parsing, finding, resolving, and how buildPlan turns them into data edges or
// plan-time errors.
import { describe, expect, it } from 'vitest';
import { buildPlan } from '../../src/core/plan.js';
import { findReferences, parseString, resolveValue, type TargetLookup } from '../../src/core/references.js';
import { catalogOf, tool } from '../helpers/catalog.js';

/** A lookup over a table of outputs by target name. */
function outputs(table: Record<string, unknown>): TargetLookup {
  return (ref) => (Object.hasOwn(table, ref.target) ? { value: table[ref.target] } : undefined);
}

describe('parseString', () => {
  it.each([
    ['plain', [{ literal: 'plain' }]],
    ['', [{ literal: '' }]],
    ['${HOME}', [{ literal: '${HOME}' }]],
    ['$${c1.output}', [{ literal: '${c1.output}' }]],
    ['a $${b} c', [{ literal: 'a ${b} c' }]],
    ['${c1.output', [{ literal: '${c1.output' }]],
    ['${c1.output}', [{ ref: { raw: '${c1.output}', target: 'c1', field: 'output', path: [] } }]],
    [
      'x=${c1.output.a}!',
      [{ literal: 'x=' }, { ref: { raw: '${c1.output.a}', target: 'c1', field: 'output', path: ['a'] } }, { literal: '!' }],
    ],
    ['${c1.output.}', [{ malformed: '${c1.output.}' }]],
    ['${c1.output[x]}', [{ malformed: '${c1.output[x]}' }]],
    // not references at all: stay literal
    ['${c1.outputs}', [{ literal: '${c1.outputs}' }]],
    ['${c1.args.x}', [{ literal: '${c1.args.x}' }]],
  ])('%j', (input, parts) => {
    expect(parseString(input)).toEqual(parts);
  });
});

describe('findReferences', () => {
  it.each([
    ['${c1.output.items[0].name}', 'c1', ['items', 0, 'name']],
    ['${c1.output[2]}', 'c1', [2]],
    ['${c1.output[0][1].x}', 'c1', [0, 1, 'x']],
    ['${OpenWeatherMap.get_current_weather.output.temp}', 'OpenWeatherMap.get_current_weather', ['temp']],
    ['${a.b.c.output}', 'a.b.c', []],
    // TARGET ends at the first `.output`
    ['${x.output.output.y}', 'x', ['output', 'y']],
    ['${call-1:x.output.a-b c}', 'call-1:x', ['a-b c']],
  ])('%s → target %s, path %j', (text, target, path) => {
    const found = findReferences({ deep: { list: [1, { s: text }] } });
    expect(found.malformed).toEqual([]);
    expect(found.refs).toEqual([{ raw: text, target, field: 'output', path }]);
  });

  it('finds every reference at any depth, in document order', () => {
    const args = {
      a: '${c1.output}',
      b: ['${c2.output.x}', { c: 'pre ${c3.output[1]} mid ${c4.output} post' }],
      n: 3,
      z: null,
      t: true,
      h: '${HOME}',
      e: '$${c9.output}',
    };
    const found = findReferences(args);
    expect(found.refs.map((r) => r.target)).toEqual(['c1', 'c2', 'c3', 'c4']);
    expect(found.malformed).toEqual([]);
  });

  it('reports malformed references separately', () => {
    const found = findReferences({ a: '${c1.output.}', b: '${c2.output}' });
    expect(found.refs.map((r) => r.target)).toEqual(['c2']);
    expect(found.malformed).toEqual(['${c1.output.}']);
  });

  it('finds nothing in plain values', () => {
    expect(findReferences({ a: 'x', b: [1, 2, { c: null }] })).toEqual({ refs: [], malformed: [] });
    expect(findReferences('${HOME} and $${c1.output}')).toEqual({ refs: [], malformed: [] });
  });
});

describe('resolveValue', () => {
  const lookup = outputs({
    c1: {
      n: 42,
      f: 1.5,
      obj: { k: [1, 'two'] },
      nil: null,
      yes: true,
      no: false,
      s: 'text',
      items: [{ name: 'first' }, { name: 'second' }],
    },
    'OpenWeatherMap.get_current_weather': { temp: 21.5 },
    c2: [10, 20, 30],
    c3: 'just a string',
    c4: null,
  });

  it.each<[string, unknown, unknown]>([
    ['a number keeps its type', '${c1.output.n}', 42],
    ['a float', '${c1.output.f}', 1.5],
    ['an object', '${c1.output.obj}', { k: [1, 'two'] }],
    ['null', '${c1.output.nil}', null],
    ['true', '${c1.output.yes}', true],
    ['false', '${c1.output.no}', false],
    ['a string', '${c1.output.s}', 'text'],
    ['a nested path with an index', '${c1.output.items[1].name}', 'second'],
    ['an index into the output itself', '${c2.output[2]}', 30],
    ['the whole output', '${c2.output}', [10, 20, 30]],
    ['a whole null output', '${c4.output}', null],
    ['a dotted target', '${OpenWeatherMap.get_current_weather.output.temp}', 21.5],
    ['a number interpolated', 'n=${c1.output.n}', 'n=42'],
    ['an object interpolated as JSON', 'obj=${c1.output.obj}', 'obj={"k":[1,"two"]}'],
    ['null interpolated as JSON', '${c1.output.nil}!', 'null!'],
    ['a boolean interpolated', '[${c1.output.yes}]', '[true]'],
    ['a string interpolated as is', '"${c1.output.s}"', '"text"'],
    ['a string output interpolated as is', '${c3.output} ok', 'just a string ok'],
    ['two references', '${c1.output.n}/${c2.output[0]}', '42/10'],
    ['an escape', '$${c1.output.n}', '${c1.output.n}'],
    ['an escape beside a reference', '$${c1.output.n}=${c1.output.n}', '${c1.output.n}=42'],
    ['${HOME} is left as is', '${HOME}', '${HOME}'],
    ['${HOME} beside a reference', '${HOME}/${c1.output.s}', '${HOME}/text'],
    ['plain text', 'nothing to do', 'nothing to do'],
  ])('%s', (_label, input, expected) => {
    expect(resolveValue(input, lookup)).toEqual({ ok: true, value: expected });
  });

  it('substitutes inside nested objects and arrays, leaving other values alone', () => {
    const args = { a: { b: ['${c1.output.n}', 'x${c1.output.n}', 7, null, false] }, c: '${c1.output.obj}' };
    expect(resolveValue(args, lookup)).toEqual({
      ok: true,
      value: { a: { b: [42, 'x42', 7, null, false] }, c: { k: [1, 'two'] } },
    });
  });

  it('does not mutate its input', () => {
    const args = { a: ['${c1.output.n}'] };
    resolveValue(args, lookup);
    expect(args).toEqual({ a: ['${c1.output.n}'] });
  });

  it.each([
    ['${c1.output.missing}', 'c1', 'output.missing'],
    ['${c1.output.items[5].name}', 'c1', 'output.items[5].name'],
    ['${c1.output.items[0].nope}', 'c1', 'output.items[0].nope'],
    ['${c1.output.n.deeper}', 'c1', 'output.n.deeper'],
    ['${c2.output.length}', 'c2', 'output.length'],
    ['${c1.output[0]}', 'c1', 'output[0]'],
    ['${c1.output.toString}', 'c1', 'output.toString'],
    ['${c3.output.x}', 'c3', 'output.x'],
    ['${c4.output.x}', 'c4', 'output.x'],
    ['${OpenWeatherMap.get_current_weather.output.humidity}', 'OpenWeatherMap.get_current_weather', 'output.humidity'],
  ])('%s is unresolved: %s has no %s', (text, target, path) => {
    const result = resolveValue({ x: ['before', `in ${text} a string`] }, lookup);
    expect(result).toEqual({
      ok: false,
      error: {
        code: 'unresolved_reference',
        message: `${text}: ${target} has no ${path}`,
        details: { reference: text, target, path },
      },
    });
  });

  it('fails when the target has no output at all', () => {
    const result = resolveValue('${c9.output.x}', lookup);
    expect(result).toEqual({
      ok: false,
      error: { code: 'unresolved_reference', message: '${c9.output.x}: c9 has no output', details: { reference: '${c9.output.x}' } },
    });
  });

  it('fails on a malformed reference inside a longer string', () => {
    const result = resolveValue('x ${c1.output.} y', lookup);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.code).toBe('unresolved_reference');
  });
});

describe('references in buildPlan', () => {
  const catalog = catalogOf([
    tool('search', { reads: [], writes: [] }),
    tool('summarize', { reads: [], writes: [] }),
    tool('OpenWeatherMap.get_current_weather', { reads: [], writes: [] }),
  ]);
  const plan = (calls: { id: string; tool: string; args?: Record<string, unknown> }[]) =>
    buildPlan({ calls, tenant: 'acme', catalog, policy: { rules: [] } });

  it('a reference by call id is a data edge', () => {
    const p = plan([
      { id: 'c1', tool: 'search', args: { q: 'x' } },
      { id: 'c2', tool: 'summarize', args: { text: '${c1.output.items[0]}', again: 'and ${c1.output.more}' } },
    ]);
    expect(p.edges).toEqual([{ from: 'c1', to: 'c2', kind: 'data', reason: 'c2 uses ${c1.output}' }]);
    expect(p.diagnostics).toEqual([]);
    expect(p.calls[1]?.targets).toEqual(new Map([['c1', 'c1']]));
    expect(p.calls[1]?.hasRefs).toBe(true);
    expect(p.calls[0]?.hasRefs).toBe(false);
    expect(p.generations).toEqual([['c1'], ['c2']]);
  });

  it('a reference by a tool name used once names that call', () => {
    const p = plan([
      { id: 'w', tool: 'OpenWeatherMap.get_current_weather', args: { city: 'Oslo' } },
      { id: 's', tool: 'summarize', args: { t: '${OpenWeatherMap.get_current_weather.output.temp}' } },
    ]);
    expect(p.edges).toEqual([{ from: 'w', to: 's', kind: 'data', reason: 's uses ${OpenWeatherMap.get_current_weather.output}' }]);
    expect(p.calls[1]?.targets).toEqual(new Map([['OpenWeatherMap.get_current_weather', 'w']]));
    expect(p.calls[1]?.error).toBeUndefined();
  });

  it('a call id wins over a tool name', () => {
    const p = plan([
      { id: 'search', tool: 'summarize' },
      { id: 'c2', tool: 'search' },
      { id: 'c3', tool: 'summarize', args: { x: '${search.output}' } },
    ]);
    expect(p.edges).toEqual([{ from: 'search', to: 'c3', kind: 'data', reason: 'c3 uses ${search.output}' }]);
  });

  it('a tool name used by two calls is ambiguous_reference', () => {
    const p = plan([
      { id: 'a', tool: 'search', args: { q: '1' } },
      { id: 'b', tool: 'search', args: { q: '2' } },
      { id: 'c', tool: 'summarize', args: { t: '${search.output.x}' } },
    ]);
    expect(p.edges).toEqual([]);
    expect(p.calls[2]?.error).toEqual({
      code: 'ambiguous_reference',
      message: 'c: ${search.output.x} — 2 calls use the tool search; refer to one by its call id',
      details: { reference: '${search.output.x}', calls: ['a', 'b'] },
    });
    expect(p.diagnostics).toEqual([{ code: 'ambiguous_reference', message: p.calls[2]?.error?.message, callId: 'c' }]);
    expect(p.calls[0]?.error).toBeUndefined();
    expect(p.calls[1]?.error).toBeUndefined();
  });

  it('a target that names no call is unresolved_reference at plan time', () => {
    const p = plan([
      { id: 'a', tool: 'search' },
      { id: 'b', tool: 'summarize', args: { t: 'x ${nope.output.y}' } },
    ]);
    expect(p.edges).toEqual([]);
    expect(p.calls[1]?.error).toEqual({
      code: 'unresolved_reference',
      message: 'b: ${nope.output.y} names no call of the run',
      details: { reference: '${nope.output.y}' },
    });
    expect(p.diagnostics.map((d) => [d.code, d.callId])).toEqual([['unresolved_reference', 'b']]);
  });

  it('a malformed reference is unresolved_reference at plan time', () => {
    const p = plan([
      { id: 'a', tool: 'search' },
      { id: 'b', tool: 'summarize', args: { t: '${a.output.}' } },
    ]);
    expect(p.calls[1]?.error?.code).toBe('unresolved_reference');
    expect(p.edges).toEqual([]);
  });

  it('${self...} outside a compensation is unresolved_reference', () => {
    const p = plan([{ id: 'a', tool: 'search', args: { t: '${self.args.q}' } }]);
    expect(p.calls[0]?.error?.code).toBe('unresolved_reference');
  });

  it('${HOME} and escapes are not references', () => {
    const p = plan([
      { id: 'a', tool: 'search' },
      { id: 'b', tool: 'summarize', args: { t: '${HOME}', u: '$${a.output}' } },
    ]);
    expect(p.edges).toEqual([]);
    expect(p.calls[1]?.hasRefs).toBe(false);
    expect(p.calls[1]?.error).toBeUndefined();
    expect(p.generations).toEqual([['a', 'b']]);
  });
});
