/**
 * The SQLite store hands the writer thread each batch as text (src/store/writes-codec.mjs), which
 * `encodeSteps` writes out directly for a batch's steps. The writer thread must read back exactly the
 * writes that `writesOf` makes, for every kind of step and every string (quotes, colons, digits,
 * control characters, lone surrogates), number and null in them; and it must refuse text of another form
 * rather than store something else.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Step } from '../../src/store/batch.js';
import { encodeSteps, writesOf } from '../../src/store/sqlite.js';
import { decodeWrites, encodeValue, encodeWrites } from '../../src/store/writes-codec.mjs';

const text = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.constantFrom('', '"', '\\', ':', ';', 's3:abc', 'w1;', '12:', '\u2028', '\ud800', 'a"b\\c\n\td'),
);
const int = fc.oneof(fc.integer(), fc.constantFrom(0, -0, Number.MAX_SAFE_INTEGER, 1_780_000_000_000));
const num = fc.oneof(int, fc.double({ noNaN: true, noDefaultInfinity: true }));
const json = fc.json();

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record({ run_id: text, seq: int, type: text, call_id: fc.option(text, { nil: null }), at: num, data: json })
      .map((event): Step => ({ kind: 'event', event })),
  },
  {
    weight: 1,
    arbitrary: fc
      .record({
        id: text,
        tenant: text,
        failure: text,
        tags: json,
        created_at: num,
        call_count: int,
        idempotency_key: fc.option(text, { nil: null }),
        pairs: fc.array(fc.tuple(text, text), { maxLength: 3 }),
      })
      .map(({ pairs, ...r }): Step => ({ kind: 'createRun', run: { ...r, status: 'running', ended_at: null }, tags: pairs })),
  },
  {
    weight: 1,
    arbitrary: fc
      .record({ runId: text, endedAt: fc.option(num, { nil: null }), addCalls: int })
      .map((r): Step => ({ kind: 'setStatus', status: 'succeeded', ...r })),
  },
  {
    weight: 1,
    arbitrary: fc
      .record({ id: text, run_id: text, call_id: text, tenant: text, tool: text, args: json, reason: text, created_at: num })
      .map((r): Step => ({ kind: 'openReview', review: { ...r, status: 'pending', decision: null, decided_at: null } })),
  },
  {
    weight: 1,
    arbitrary: fc.record({ runId: text, callId: text, decision: text, at: num }).map((r): Step => ({ kind: 'closeReview', ...r })),
  },
);

/** What the thread must bind: the writes as JSON would carry them (-0 is 0). */
const asJson = (x: unknown) => JSON.parse(JSON.stringify(x)) as unknown;

describe('the writes codec', () => {
  it('reads back the writes of any steps, as encodeSteps writes them and as encodeWrites does', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 12 }), (steps) => {
        const writes = steps.flatMap(writesOf);
        const text = encodeSteps(steps);
        expect(text).toBe(encodeWrites(writes));
        expect(decodeWrites(text)).toEqual(asJson(writes));
      }),
      { numRuns: 500 },
    );
  });

  it('has no text for no writes; null, undefined and numbers that are not finite are null, as in JSON', () => {
    expect(encodeSteps([])).toBe('');
    expect(decodeWrites('')).toEqual([]);
    expect(decodeWrites(encodeWrites([['x', [null, undefined, Number.NaN, Infinity, -0, 1.5e300, 's3:']]]))).toEqual([
      ['x', [null, null, null, null, 0, 1.5e300, 's3:']],
    ]);
  });

  it('refuses a param it cannot carry, and text of another form', () => {
    expect(() => encodeValue(true)).toThrow(/string, a number or null/);
    expect(() => encodeValue({})).toThrow(/string, a number or null/);
    const good = encodeWrites([['insertEvent', ['r1', 1, 'run.created', null, 5, '{}']]]);
    expect(decodeWrites(good)).toEqual([['insertEvent', ['r1', 1, 'run.created', null, 5, '{}']]]);
    for (const bad of [
      good.slice(0, -1),
      `${good}w`,
      `x${good}`,
      'w1;s1:xq',
      'w1;s1:xdabc;',
      'w1;s1:xd;',
      'w1;s1:xd 1;',
      'w1;s9:x',
      'w-1;s1:x',
      'w1;d1;',
    ]) {
      expect(() => decodeWrites(bad), bad).toThrow(/bad writes text/);
    }
  });
});
