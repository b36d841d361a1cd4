/**
 * The SQLite store hands the writer thread each batch as JSON text that `writesJson` writes out
 * directly. It must be exactly the text of the writes that `writesOf` makes, for every kind of step and
 * every string (quotes, control characters, lone surrogates), number and null in them.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Step } from '../src/store/batch.js';
import { writesJson, writesOf } from '../src/store/sqlite.js';

const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('', '"', '\\', '\u2028', '\ud800', 'a"b\\c\n\td'));
const int = fc.oneof(fc.integer(), fc.constantFrom(0, -0, Number.MAX_SAFE_INTEGER, 1_780_000_000_000));
const num = fc.oneof(int, fc.double({ noNaN: true, noDefaultInfinity: true }));
const json = fc.json();

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ run_id: text, seq: int, type: text, call_id: fc.option(text, { nil: null }), at: num, data: json }).map((event): Step => ({ kind: 'event', event })) },
  {
    weight: 1,
    arbitrary: fc
      .record({ id: text, tenant: text, failure: text, tags: json, created_at: num, call_count: int, idempotency_key: fc.option(text, { nil: null }), pairs: fc.array(fc.tuple(text, text), { maxLength: 3 }) })
      .map(({ pairs, ...r }): Step => ({ kind: 'createRun', run: { ...r, status: 'running', ended_at: null }, tags: pairs })),
  },
  { weight: 1, arbitrary: fc.record({ runId: text, endedAt: fc.option(num, { nil: null }), addCalls: int }).map((r): Step => ({ kind: 'setStatus', status: 'succeeded', ...r })) },
  {
    weight: 1,
    arbitrary: fc
      .record({ id: text, run_id: text, call_id: text, tenant: text, tool: text, args: json, reason: text, created_at: num })
      .map((r): Step => ({ kind: 'openReview', review: { ...r, status: 'pending', decision: null, decided_at: null } })),
  },
  { weight: 1, arbitrary: fc.record({ runId: text, callId: text, decision: text, at: num }).map((r): Step => ({ kind: 'closeReview', ...r })) },
);

describe('writesJson', () => {
  it('is the JSON text of the writes, for any steps', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 12 }), (steps) => {
        expect(writesJson(steps)).toBe(JSON.stringify(steps.flatMap(writesOf)));
      }),
      { numRuns: 500 },
    );
  });

  it('is [] for no steps, and parses back to the writes', () => {
    expect(writesJson([])).toBe('[]');
    const steps: Step[] = [{ kind: 'event', event: { run_id: 'r"1', seq: 2, type: 'call.started', call_id: null, at: 5, data: '{"a":"\\"x\\""}' } }];
    expect(JSON.parse(writesJson(steps))).toEqual([['insertEvent', ['r"1', 2, 'call.started', null, 5, '{"a":"\\"x\\""}']]]);
  });
});
