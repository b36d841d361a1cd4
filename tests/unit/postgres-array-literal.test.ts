/**
 * The append's array parameters (store/postgres-append.ts) are made by `arrayLiteral`, not by
 * node-postgres: PostgreSQL must read back exactly what node-postgres's own text form says, for any
 * string (quotes, backslashes, control characters, surrogates, JSON text) and for null.
 */
import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { arrayLiteral } from '../../src/store/postgres-append.js';

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
