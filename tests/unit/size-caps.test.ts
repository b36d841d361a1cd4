/**
 * Size caps (DESIGN §4): `jsonBytes` counts what `JSON.stringify` would write, in UTF-8 bytes, and
 * stops at its budget; resolving references stops with `args_too_large` as soon as the cap is passed,
 * counting a value put into a longer string as its JSON escaped once more; an output past its cap is
 * `output_too_large`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolveValue, type Reference } from '../../src/core/references.js';
import { escapedBytes, jsonBytes, MAX_VALUE_DEPTH, OVER, outputChecked } from '../../src/core/size.js';
import type { ToolManifest } from '../../src/core/tool.js';

const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v), 'utf8');

describe('jsonBytes', () => {
  it('is the UTF-8 length of JSON.stringify for any JSON value, unicode and escapes included', () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: 'binary' }), (v) => {
        expect(jsonBytes(v, Number.MAX_SAFE_INTEGER)).toBe(bytes(v));
      }),
      { numRuns: 500 },
    );
  });

  it('answers OVER exactly when the value passes the budget', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.nat(200), (v, budget) => {
        const n = bytes(v);
        expect(jsonBytes(v, budget)).toBe(n > budget ? OVER : n);
      }),
      { numRuns: 500 },
    );
  });

  it('counts control characters, quotes, backslashes and lone surrogates as JSON writes them', () => {
    for (const s of ['"', '\\', '\n', '\u0001', '\u001f', 'é', '€', '😀', '\ud800', '\udc00x', '\u2028']) {
      expect(escapedBytes(s)).toBe(bytes(s) - 2);
    }
  });

  it('stops walking at the budget: a value of 2 million elements is refused in well under a second', () => {
    const huge = new Array(2_000_000).fill('x');
    const t = performance.now();
    expect(jsonBytes(huge, 1024)).toBe(OVER);
    expect(performance.now() - t).toBeLessThan(50);
  });
});

/** The doubling batch of issue #20: c0 holds 64 x, each cN interpolates c(N-1)'s output twice. */
function doubling(n: number, max: number): { last: number; error?: { code: string; message: string } } {
  const outputs: unknown[] = [{ v: 'x'.repeat(64) }];
  for (let i = 1; i < n; i++) {
    const args = { v: `\${c${i - 1}.output}\${c${i - 1}.output}` };
    const r = resolveValue(args, (ref: Reference) => ({ value: outputs[Number(ref.target.slice(1))] }), max);
    if (!r.ok) return { last: i, error: r.error };
    expect(bytes(r.value)).toBeLessThanOrEqual(max);
    outputs.push(r.value); // echo: the output is the args
  }
  return { last: n };
}

describe('resolving under limits.maxArgsBytes', () => {
  it('the doubling batch stops with args_too_large at the first call past the cap, quickly', () => {
    const t = performance.now();
    const r = doubling(30, 1024 * 1024);
    expect(performance.now() - t).toBeLessThan(2_000);
    expect(r.error?.code).toBe('args_too_large');
    expect(r.error?.message).toContain('limits.maxArgsBytes');
    // Each level escapes the quotes of the one before, so the JSON grows faster than twice per call;
    // the cap is reached well before call 30 (without a cap call 29 would need 2^29 × 64 characters).
    expect(r.last).toBeGreaterThan(5);
    expect(r.last).toBeLessThan(20);
    // The call before it resolved under the cap, the failing one would have passed it.
    const under = doubling(r.last, 1024 * 1024);
    expect(under.error).toBeUndefined();
  });

  it('a value interpolated into a string counts escaped: {"a":"b"} inside a string is 2 bytes more per quote', () => {
    const v = { a: 'b' }; // {"a":"b"}: 9 characters, 4 quotes
    const args = { s: 'x${c.output}' };
    const exact = bytes({ s: `x${JSON.stringify(v)}` });
    expect(exact).toBe(8 + 1 + 9 + 4);
    const ok = resolveValue(args, () => ({ value: v }), exact);
    expect(ok.ok).toBe(true);
    const over = resolveValue(args, () => ({ value: v }), exact - 1);
    expect(over.ok).toBe(false);
    expect(!over.ok && over.error.code).toBe('args_too_large');
  });

  it('a key named __proto__ stays a key of the resolved args (found by the property below)', () => {
    const args = JSON.parse('{"":{"__proto__":[1]},"a":"${a.output}"}') as Record<string, unknown>;
    const free = resolveValue(args, () => ({ value: 'z' }));
    expect(JSON.stringify(free)).toBe('{"ok":true,"value":{"":{"__proto__":[1]},"a":"z"}}');
    expect(resolveValue(args, () => ({ value: 'z' }), bytes(free.ok ? free.value : null))).toEqual(free);
  });

  it('any args resolve to exactly the same value with a cap they fit, and fail with one byte less', () => {
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.string({ maxLength: 4 }),
          fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom('${a.output}', 'p${a.output}q${a.output}', '$${x}')),
        ),
        fc.jsonValue({ maxDepth: 2 }),
        (args, out) => {
          const lookup = () => ({ value: out });
          const free = resolveValue(args, lookup);
          expect(free.ok).toBe(true);
          if (!free.ok) return;
          const size = bytes(free.value);
          expect(resolveValue(args, lookup, size)).toEqual(free);
          const less = resolveValue(args, lookup, size - 1);
          expect(!less.ok && less.error.code).toBe('args_too_large');
        },
      ),
      { numRuns: 400 },
    );
  });

  it('a 100 kB string referenced 2,000 times stops after about ten, without building the text', () => {
    const big = 'y'.repeat(100_000);
    const args = { v: Array.from({ length: 2000 }, () => '${c.output}').join('') };
    let lookups = 0;
    const t = performance.now();
    const r = resolveValue(
      args,
      () => {
        lookups++;
        return { value: big };
      },
      1024 * 1024,
    );
    expect(performance.now() - t).toBeLessThan(500);
    expect(!r.ok && r.error.code).toBe('args_too_large');
    expect(lookups).toBe(11);
  });

  it('whole-value references count the referenced value (shared, never copied)', () => {
    const big = { s: 'z'.repeat(600_000) };
    const r = resolveValue({ a: '${c.output}', b: '${c.output}' }, () => ({ value: big }), 1024 * 1024);
    expect(!r.ok && r.error.code).toBe('args_too_large');
    expect(!r.ok && (r.error.details as { reference: string }).reference).toBe('${c.output}');
  });
});

describe('outputChecked', () => {
  const manifest = (max?: number) => ({ name: 't', ...(max === undefined ? {} : { maxOutputBytes: max }) }) as unknown as ToolManifest;
  it('an output past the cap fails output_too_large, not retryable; at the cap it passes', () => {
    const out = { s: 'a'.repeat(100) }; // 108 bytes
    expect(outputChecked({ ok: true, output: out }, { id: 'c', manifest: manifest() }, 108)).toEqual({ ok: true, output: out });
    const r = outputChecked({ ok: true, output: out }, { id: 'c', manifest: manifest() }, 107);
    expect(r).toMatchObject({ ok: false, retryable: false, error: { code: 'output_too_large', details: { maxBytes: 107 } } });
  });
  it("a tool's own maxOutputBytes overrides limits.maxOutputBytes", () => {
    const r = outputChecked({ ok: true, output: 'abcdef' }, { id: 'c', manifest: manifest(5) }, 1000);
    expect(r).toMatchObject({ ok: false, error: { code: 'output_too_large', message: expect.stringContaining("tool's maxOutputBytes") } });
  });
  it('an output nested deeper than MAX_VALUE_DEPTH fails output_too_large (a tool server once crashed the process this way)', () => {
    const nest = (levels: number, inner: unknown = 1) => {
      let v = inner;
      for (let i = 0; i < levels; i++) v = i % 2 === 0 ? [v] : { k: v };
      return v;
    };
    const atCap = nest(MAX_VALUE_DEPTH);
    expect(outputChecked({ ok: true, output: atCap }, { id: 'c' })).toEqual({ ok: true, output: atCap });
    for (const levels of [MAX_VALUE_DEPTH + 1, 100_000]) {
      const r = outputChecked({ ok: true, output: nest(levels) }, { id: 'c' });
      expect(r).toMatchObject({ ok: false, retryable: false, error: { code: 'output_too_large', details: { maxDepth: MAX_VALUE_DEPTH } } });
    }
    // jsonBytes walks deeper (args nest an output inside themselves) but stops before the stack's end.
    expect(jsonBytes(nest(MAX_VALUE_DEPTH + 64), 1e9)).toBe(bytes(nest(MAX_VALUE_DEPTH + 64)));
    expect(jsonBytes(nest(100_000), 1e9)).toBe(OVER);
  });
});
