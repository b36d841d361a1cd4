// The reference scanner (references.ts parses by hand, for speed) against a reference implementation:
// the straightforward one it replaced, a character loop and the pattern of DESIGN §1 as a RegExp.
// Random strings are built from the pieces that matter (`$`, `${`, `$${`, `}`, `.output`, `.args`,
// `[n]`, dots, brackets, line breaks), so the corner cases come up often.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { findReferences, parseString, resolveValue, type PathSegment, type Reference } from '../../src/core/references.js';

type Part = { literal: string } | { ref: Reference } | { malformed: string };

const REF_BODY = /^(.+?)\.(output|args)((?:\.[^.[\]]+|\[\d+\])*)$/;
const PATH_PART = /\.([^.[\]]+)|\[(\d+)\]/g;

function oracleBody(body: string): Reference | 'malformed' | null {
  const m = REF_BODY.exec(body);
  if (!m) return /\.output(\.|\[|$)/.test(body) ? 'malformed' : null;
  const [, target, field, rest] = m as unknown as [string, string, 'output' | 'args', string];
  if (field === 'args' && target !== 'self') return null;
  const path: PathSegment[] = [];
  for (const p of rest.matchAll(PATH_PART)) path.push(p[1] !== undefined ? p[1] : Number(p[2]));
  return { raw: `\${${body}}`, target, field, path };
}

function oracle(s: string): Part[] {
  const parts: Part[] = [];
  let lit = '';
  let i = 0;
  while (i < s.length) {
    if (s.startsWith('$${', i)) {
      lit += '${';
      i += 3;
      continue;
    }
    if (s.startsWith('${', i)) {
      const end = s.indexOf('}', i + 2);
      if (end > 0) {
        const body = s.slice(i + 2, end);
        const ref = oracleBody(body);
        if (ref) {
          if (lit) parts.push({ literal: lit });
          lit = '';
          parts.push(ref === 'malformed' ? { malformed: `\${${body}}` } : { ref });
          i = end + 1;
          continue;
        }
      }
    }
    lit += s[i];
    i += 1;
  }
  if (lit || parts.length === 0) parts.push({ literal: lit });
  return parts;
}

const PIECES = [
  '$',
  '$$',
  '${',
  '$${',
  '}',
  '{',
  '.output',
  '.args',
  '.',
  '..',
  '[',
  ']',
  '[0]',
  '[12]',
  '0',
  'a',
  'b-c',
  'c1',
  'self',
  'output',
  ' ',
  '\n',
  '\u2028',
  'x y',
];
const arbText = fc.array(fc.constantFrom(...PIECES), { maxLength: 14 }).map((xs) => xs.join(''));

describe('the reference scanner', () => {
  it('splits strings exactly as the reference implementation does', () => {
    fc.assert(
      fc.property(arbText, (s) => {
        expect(parseString(s)).toEqual(oracle(s));
      }),
      { numRuns: 5000 },
    );
  });

  it('reads every `${…}` body as the reference implementation does', () => {
    const BODY = PIECES.filter((x) => !x.includes('}') && !x.includes('$'));
    const arbBody = fc.array(fc.constantFrom(...BODY), { minLength: 1, maxLength: 8 }).map((xs) => xs.join(''));
    fc.assert(
      fc.property(arbBody, (body) => {
        const s = `\${${body}}`;
        expect(parseString(s)).toEqual(oracle(s));
      }),
      { numRuns: 5000 },
    );
  });

  it('agrees on well-formed references with paths', () => {
    const arbPath = fc
      .array(
        fc.oneof(
          fc.constantFrom('.a', '.output', '.x y', '.0'),
          fc.nat(20).map((n) => `[${n}]`),
        ),
        { maxLength: 4 },
      )
      .map((xs) => xs.join(''));
    const arbTarget = fc.constantFrom('c1', 'a.b', 'OpenWeatherMap.get_current_weather', 'self', 'x.output', 'call-1:x');
    fc.assert(
      fc.property(arbTarget, fc.constantFrom('output', 'args'), arbPath, fc.constantFrom('', 'pre ', '$${'), (t, f, p, pre) => {
        const s = `${pre}\${${t}.${f}${p}}`;
        expect(parseString(s)).toEqual(oracle(s));
      }),
      { numRuns: 2000 },
    );
  });

  it('looks references up once each, in the order findReferences lists them', () => {
    const args = {
      a: '${c1.output}',
      b: ['x ${c2.output.v} y ${c1.output.w}', { c: '${c3.output.w}' }],
      d: '$${c9.output}',
      e: '${c4.output}',
    };
    const seen: string[] = [];
    const r = resolveValue(args, (ref) => {
      seen.push(ref.raw);
      return { value: { v: 1, w: 2 } };
    });
    expect(r.ok).toBe(true);
    expect(seen).toEqual(findReferences(args).refs.map((ref) => ref.raw));
  });
});
