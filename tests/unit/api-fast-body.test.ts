/**
 * The fast path for `POST /v1/runs` bodies (src/api/fast-body.ts) may only accept what zod's
 * `SubmitSchema` accepts, and must then give the value zod gives; everything else it leaves to zod.
 * Bodies are generated near the edges of every rule (ids, tools, args depth, waitMs, failure, tenant,
 * duplicate ids, extra keys, wrong types), and as JSON text, the way they reach the route.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fastSubmitBody } from '../../src/api/fast-body.js';
import { SubmitBodySchema as SubmitSchema } from '../../src/contract/requests.js';

const nested = (depth: number): unknown => (depth === 0 ? 1 : { a: nested(depth - 1) });

/** Mostly values that pass, sometimes one at or past an edge. */
const mostly = <T>(ok: fc.Arbitrary<T>, edge: fc.Arbitrary<unknown>) =>
  fc.oneof({ arbitrary: ok, weight: 6 }, { arbitrary: edge, weight: 1 });
const absentOr = (v: fc.Arbitrary<unknown>) => fc.oneof({ arbitrary: fc.constant(undefined), weight: 3 }, { arbitrary: v, weight: 1 });

const idArb = mostly(
  fc.constantFrom('c1', 'c2', 'c3', 'a.b:c-d_e', 'x'.repeat(128)),
  fc.oneof(fc.constantFrom('x'.repeat(129), '', 'bad id', 'é', 'c1\n', 1, null), fc.string({ maxLength: 4 })),
);
const toolArb = mostly(
  fc.constantFrom('echo', 'x', 'y'.repeat(200)),
  fc.oneof(fc.constantFrom('y'.repeat(201), '', 5, null), fc.string({ maxLength: 3 })),
);
const argsArb = fc.oneof(
  fc.constant(undefined),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 }),
  fc.constantFrom<unknown>(null, [], [1], 'x', 3, { deep: nested(63) }, { deep: nested(64) }, { deep: nested(70) }),
);
const callArb = fc
  .record({
    id: fc.oneof({ arbitrary: idArb, weight: 8 }, { arbitrary: fc.constant(undefined), weight: 1 }),
    tool: toolArb,
    args: argsArb,
    extra: absentOr(absentOr(fc.jsonValue({ maxDepth: 1 }))),
  })
  .map((c) => Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined)));
const callsArb = mostly(fc.array(callArb, { maxLength: 6 }), fc.constantFrom<unknown>(undefined, null, {}, 'calls', [null], [[]]));
const bodyArb = fc
  .record({
    calls: callsArb,
    waitMs: absentOr(fc.constantFrom<unknown>(0, 1, 5000, 60_000, 60_001, -1, 1.5, '10', null)),
    failure: absentOr(fc.constantFrom<unknown>('fail_fast', 'partial', 'replan', 'nope', 1, null)),
    tenant: absentOr(fc.constantFrom<unknown>('acme', 'a:b.c-d_e', 'x'.repeat(64), 'x'.repeat(65), '', 'bad tenant', 7)),
    tags: absentOr(absentOr(fc.constantFrom<unknown>({}, { k: 'v' }))),
    open: absentOr(absentOr(fc.constantFrom<unknown>(true, false))),
    other: absentOr(absentOr(fc.constant(1))),
  })
  .map((b) => Object.fromEntries(Object.entries(b).filter(([, v]) => v !== undefined)));

describe('fast path for submit bodies', () => {
  it('accepts only what zod accepts, and gives what zod gives', () => {
    let taken = 0;
    fc.assert(
      fc.property(bodyArb, (raw) => {
        const body: unknown = JSON.parse(JSON.stringify(raw));
        const fast = fastSubmitBody(body);
        if (fast === undefined) return;
        taken++;
        const slow = SubmitSchema.safeParse(body);
        expect(slow.success).toBe(true);
        expect(fast).toStrictEqual(slow.data);
      }),
      { numRuns: 3000 },
    );
    // The generator reaches the fast path often enough for this to mean something.
    expect(taken).toBeGreaterThan(150);
  });

  it('takes the bench body, and a batch with every optional field it knows', () => {
    const calls = Array.from({ length: 5 }, (_, i) => ({ id: `c${i + 1}`, tool: 'echo', args: { n: i + 1 } }));
    for (const body of [
      { calls, waitMs: 5000 },
      { calls: [{ id: 'a', tool: 't' }], failure: 'partial', tenant: 'acme', waitMs: 0 },
      { calls: [] },
    ]) {
      const parsed = JSON.parse(JSON.stringify(body)) as unknown;
      expect(fastSubmitBody(parsed)).toStrictEqual(SubmitSchema.parse(parsed));
    }
  });

  it('leaves to zod what it does not know or what fails', () => {
    for (const body of [
      { calls: [], tags: { a: 'b' } },
      { open: true },
      {
        calls: [
          { id: 'a', tool: 't' },
          { id: 'a', tool: 't' },
        ],
      },
      { calls: [{ id: 'a', tool: 't', args: [] }] },
      { calls: [{ id: 'a', tool: 't', args: { deep: nested(64) } }] },
      { calls: [{ id: 'a', tool: 't' }], waitMs: 60_001 },
      { openai: { tool_calls: [] } },
      [],
      null,
    ]) {
      expect(fastSubmitBody(JSON.parse(JSON.stringify(body)) as unknown)).toBeUndefined();
    }
  });
});
