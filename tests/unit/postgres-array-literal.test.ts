/**
 * The append's array parameters (store/postgres-append.ts) are made by `arrayLiteral`, not by
 * node-postgres: PostgreSQL must read back exactly what node-postgres's own text form says, for any
 * string (quotes, backslashes, control characters, surrogates, JSON text) and for null. The events'
 * data, JSON text, goes instead as one text joined by line feeds, which the server splits.
 */
import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Step } from '../../src/store/batch.js';
import { appendStatement, arrayLiteral } from '../../src/store/postgres-append.js';

/** node-postgres's own conversion of a parameter (it has no type declarations). */
const pgUtils = createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue(v: unknown): string };
const pgText = (items: unknown[]): string => pgUtils.prepareValue(items);

describe('arrayLiteral', () => {
  it('is node-postgres’s text form of a text array, for any strings and nulls', () => {
    const cases = [
      [],
      [''],
      ['a', null, 'b'],
      ['"', '\\', '\\"', 'a,b', '{x}', ' lead', 'NULL'],
      ['line\nbreak', 'tab\there', '\u0001', '\u007f'],
      ['😀', '\ud800', 'x\udfffy', 'é'],
      [JSON.stringify({ a: 'q"uote', b: 'back\\slash', c: 'ctl\n', d: '😀', e: '\ud800' })],
    ];
    for (const c of cases) expect(arrayLiteral(c)).toBe(pgText(c));
    fc.assert(
      fc.property(fc.array(fc.option(fc.oneof(fc.string({ unit: 'binary' }), fc.json()), { nil: null })), (xs) => {
        expect(arrayLiteral(xs)).toBe(pgText(xs));
      }),
    );
  });

  it('writes integers as they print, as PostgreSQL reads them for int4[] and int8[]', () => {
    expect(arrayLiteral([1, -2, null, 1733400000000])).toBe('{1,-2,NULL,1733400000000}');
  });
});

describe('appendStatement: the events’ data', () => {
  const event = (seq: number, data: string): Step => ({
    kind: 'event',
    event: { run_id: 'run_a', seq, type: 'call.ready', call_id: 'c1', at: 1, data },
  });

  it('goes as one text joined by line feeds, split by the server, when no data has a line feed', () => {
    const data = [JSON.stringify({ s: 'a\nb "q" \\' }), '{}'];
    const stmt = appendStatement([event(2, data[0] as string), event(3, data[1] as string)], new Map([['run_a', 2]]));
    expect(stmt.text).toContain("string_to_array($6::text, E'\\n')");
    expect(stmt.values[5]).toBe(data.join('\n'));
    expect(stmt.name).toBe('toolgraph_append_eu');
  });

  it('goes as an array, under a statement of its own, when a data has a line feed (JSON.stringify never writes one)', () => {
    const stmt = appendStatement([event(2, '{"s":"raw\nfeed"}'), event(3, '{}')], new Map([['run_a', 2]]));
    expect(stmt.text).not.toContain('string_to_array');
    expect(stmt.values[5]).toBe(arrayLiteral(['{"s":"raw\nfeed"}', '{}']));
    expect(stmt.name).toBe('toolgraph_append_Eu');
  });
});
