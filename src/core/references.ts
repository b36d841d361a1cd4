/**
 * References: `${TARGET.output}` and `${TARGET.output.PATH}` inside a call's args (DESIGN §1).
 *
 * - TARGET is a call id or a tool name used once in the run; it may contain dots and ends at the first
 *   `.output` that is followed by the end, a `.` or a `[`.
 * - PATH is dot segments and `[n]` indexes.
 * - A string that is exactly one reference becomes the referenced value (its type kept); a reference
 *   inside a longer string is interpolated (strings as they are, other values as JSON).
 * - `$${` is a literal `${`. A `${…}` that is not a reference (`${HOME}`) stays as it is.
 *
 * Everything here is pure: parsing, finding and resolving against outputs handed in.
 */
import { callError, type CallError } from './errors.js';
import { escapedBytes, jsonBytes, OVER } from './size.js';

export type PathSegment = string | number;

export interface Reference {
  /** The text as written, `${c1.output.items[0]}`. */
  raw: string;
  target: string;
  /** `output`, or `args` (only for `self` in compensations). */
  field: 'output' | 'args';
  path: PathSegment[];
}

type Part = { literal: string } | { ref: Reference } | { malformed: string };

/**
 * Parses what is between `${` and `}`: `TARGET.output` or `TARGET.args` (only `self.args`), then a path
 * of `.name` and `[n]` segments. TARGET is the shortest prefix (at least one character, no line break)
 * after which the rest parses: `x.output.output.y` is `x` with the path `output.y`. By hand, as the
 * pattern `^(.+?)\.(output|args)((?:\.[^.[\]]+|\[\d+\])*)$` would read it, without its backtracking.
 * Text that mentions `.output` but does not parse is malformed; anything else is not a reference.
 */
function parseBody(body: string): Reference | 'malformed' | null {
  for (let t = 1; t < body.length; t++) {
    if (isLineBreak(body.charCodeAt(t - 1))) break;
    if (body.charCodeAt(t) !== DOT) continue;
    const field = body.startsWith('output', t + 1) ? 'output' : body.startsWith('args', t + 1) ? 'args' : undefined;
    if (field === undefined) continue;
    const path = parsePath(body, t + 1 + field.length);
    if (!path) continue;
    const target = body.slice(0, t);
    if (field === 'args' && target !== 'self') return null;
    return { raw: `\${${body}}`, target, field, path };
  }
  return /\.output(\.|\[|$)/.test(body) ? 'malformed' : null;
}

const DOT = 46;
const OPEN = 91; // [
const CLOSE = 93; // ]

function isLineBreak(ch: number): boolean {
  return ch === 10 || ch === 13 || ch === 0x2028 || ch === 0x2029;
}

function isDigit(ch: number): boolean {
  return ch >= 48 && ch <= 57;
}

/** `.name` and `[n]` segments from `from` to the end of `s`, or null when the rest is not such a path. */
function parsePath(s: string, from: number): PathSegment[] | null {
  const path: PathSegment[] = [];
  let i = from;
  while (i < s.length) {
    const open = s.charCodeAt(i);
    let j = i + 1;
    if (open === DOT) {
      while (j < s.length && !isPathDelimiter(s.charCodeAt(j))) j++;
      if (j === i + 1) return null;
      path.push(s.slice(i + 1, j));
    } else if (open === OPEN) {
      while (j < s.length && isDigit(s.charCodeAt(j))) j++;
      if (j === i + 1 || s.charCodeAt(j) !== CLOSE) return null;
      path.push(Number(s.slice(i + 1, j)));
      j++;
    } else return null;
    i = j;
  }
  return path;
}

function isPathDelimiter(ch: number): boolean {
  return ch === DOT || ch === OPEN || ch === CLOSE;
}

/**
 * Splits a string into literal text and references, scanning left to right: `$${` is a literal `${`,
 * and a `${…}` up to the next `}` is a reference when its body parses as one (else its `$` is literal
 * text and the scan goes on from the next character).
 *
 * Not cached: a batch's reference strings are mostly distinct (each names its own targets), so a cache
 * bounded for a long-running process churned at 50k strings, and parsing is cheaper than that churn.
 */
export function parseString(s: string): Part[] {
  const parts: Part[] = [];
  let lit = '';
  let i = 0;
  for (let j = s.indexOf('${'); j >= 0; j = s.indexOf('${', i)) {
    // A `$` just before, not consumed yet, makes it the escape `$${`.
    if (j > i && s.charCodeAt(j - 1) === DOLLAR) {
      lit += `${s.slice(i, j - 1)}\${`;
      i = j + 2;
      continue;
    }
    const end = s.indexOf('}', j + 2);
    const ref = end < 0 ? null : parseBody(s.slice(j + 2, end));
    if (!ref) {
      lit += s.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    lit += s.slice(i, j);
    if (lit) parts.push({ literal: lit });
    lit = '';
    parts.push(ref === 'malformed' ? { malformed: s.slice(j, end + 1) } : { ref });
    i = end + 1;
  }
  lit += s.slice(i);
  if (lit || parts.length === 0) parts.push({ literal: lit });
  return parts;
}

const DOLLAR = 36;

/** Whether a string holds anything that needs resolving (a reference or a `$${` escape). */
function needsWork(s: string): boolean {
  return s.includes('${');
}

export interface FoundReferences {
  refs: Reference[];
  /** Reference-looking text that cannot be parsed (`${c1.output.}`). */
  malformed: string[];
}

/** Every reference in a value, at any depth, in document order. */
export function findReferences(value: unknown): FoundReferences {
  const found: FoundReferences = { refs: [], malformed: [] };
  walk(value, found);
  return found;
}

function walk(value: unknown, found: FoundReferences): void {
  if (typeof value === 'string') {
    if (!needsWork(value)) return;
    for (const part of parseString(value)) {
      if ('ref' in part) found.refs.push(part.ref);
      else if ('malformed' in part) found.malformed.push(part.malformed);
    }
  } else if (Array.isArray(value)) {
    for (const v of value) walk(v, found);
  } else if (value !== null && typeof value === 'object') {
    for (const k in value) if (Object.hasOwn(value, k)) walk((value as Record<string, unknown>)[k], found);
  }
}

/** Whether args hold any reference or escape at all (fast check; no allocation for plain args). */
export function hasTemplates(value: unknown): boolean {
  if (typeof value === 'string') return needsWork(value);
  if (Array.isArray(value)) {
    for (const v of value) if (hasTemplates(v)) return true;
  } else if (value !== null && typeof value === 'object') {
    for (const k in value) if (Object.hasOwn(value, k) && hasTemplates((value as Record<string, unknown>)[k])) return true;
  }
  return false;
}

export function formatPath(path: readonly PathSegment[]): string {
  return path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('');
}

const MISSING = Symbol('missing');

/** The value at `path` inside `root`, or MISSING. Only own properties count. */
function valueAt(root: unknown, path: readonly PathSegment[]): unknown {
  let v: unknown = root;
  for (const seg of path) {
    if (typeof seg === 'number') {
      if (!Array.isArray(v) || seg >= v.length) return MISSING;
      v = v[seg];
    } else {
      if (v === null || typeof v !== 'object' || Array.isArray(v) || !Object.hasOwn(v, seg)) return MISSING;
      v = (v as Record<string, unknown>)[seg];
    }
  }
  return v === undefined ? MISSING : v;
}

/**
 * Looks a reference's target up: the call's output (or args, for `self`), or `undefined` when the
 * target has no value (yet).
 */
export type TargetLookup = (ref: Reference) => { value: unknown } | undefined;

export type Resolved = { ok: true; value: unknown } | { ok: false; error: CallError };

/**
 * Substitutes every reference in `value` (DESIGN §1). Fails with `unresolved_reference`, naming the
 * reference and the missing path, when a target has no value or the path does not exist in it.
 *
 * With `maxBytes` (DESIGN §4, `limits.maxArgsBytes`), fails with `args_too_large` as soon as the result
 * would pass that many bytes of compact JSON: the bytes are counted as the result is built (a value
 * put into a longer string counts as its JSON text escaped once more), and resolving stops there, so
 * references that grow (each call doubling the one before) never build the big text.
 *
 * `lookup` is called once per reference, in document order (the order `findReferences` lists them),
 * until one fails: a caller may answer the k-th call from what it planned for the k-th reference.
 */
export function resolveValue(value: unknown, lookup: TargetLookup, maxBytes?: number): Resolved {
  const meter = maxBytes === undefined ? undefined : { budget: maxBytes, spent: 0 };
  try {
    return { ok: true, value: subst(value, lookup, meter) };
  } catch (e) {
    if (e instanceof UnresolvedError) return { ok: false, error: e.error };
    if (e instanceof TooLargeError) return { ok: false, error: tooLarge(maxBytes as number, e.reference) };
    throw e;
  }
}

/** `args_too_large` when `args` (resolved, or holding no reference) pass `maxBytes` as compact JSON. */
export function checkArgsSize(args: unknown, maxBytes: number): CallError | undefined {
  return jsonBytes(args, maxBytes) === OVER ? tooLarge(maxBytes) : undefined;
}

function tooLarge(maxBytes: number, reference?: string): CallError {
  const where = reference === undefined ? '' : ` (resolving stopped at ${reference})`;
  return callError('args_too_large', `the args pass ${maxBytes} bytes of JSON (limits.maxArgsBytes)${where}`, {
    details: reference === undefined ? { maxBytes } : { maxBytes, reference },
  });
}

class UnresolvedError extends Error {
  constructor(readonly error: CallError) {
    super(error.message);
  }
}

class TooLargeError extends Error {
  constructor(readonly reference?: string) {
    super('too large');
  }
}

/** Bytes of compact JSON spent so far on the result, against the budget. */
interface Meter {
  budget: number;
  spent: number;
}

function spend(meter: Meter, bytes: number, reference?: string): void {
  meter.spent += bytes;
  if (meter.spent > meter.budget) throw new TooLargeError(reference);
}

function lookupRef(ref: Reference, lookup: TargetLookup): unknown {
  const target = lookup(ref);
  if (!target) {
    throw new UnresolvedError(
      callError('unresolved_reference', `${ref.raw}: ${ref.target} has no ${ref.field}`, { details: { reference: ref.raw } }),
    );
  }
  const v = valueAt(target.value, ref.path);
  if (v === MISSING) {
    const path = `${ref.field}${formatPath(ref.path)}`;
    throw new UnresolvedError(
      callError('unresolved_reference', `${ref.raw}: ${ref.target} has no ${path}`, {
        details: { reference: ref.raw, target: ref.target, path },
      }),
    );
  }
  return v;
}

function subst(value: unknown, lookup: TargetLookup, meter: Meter | undefined): unknown {
  if (typeof value === 'string') {
    if (!needsWork(value)) {
      if (meter) spend(meter, 2 + escapedBytes(value, meter.budget - meter.spent));
      return value;
    }
    const parts = parseString(value);
    const only = parts[0];
    if (parts.length === 1 && only && 'ref' in only) {
      const v = lookupRef(only.ref, lookup);
      if (meter) spend(meter, jsonBytes(v, meter.budget - meter.spent), only.ref.raw);
      return v;
    }
    if (meter) spend(meter, 2);
    let out = '';
    for (const part of parts) {
      if ('literal' in part) {
        if (meter) spend(meter, escapedBytes(part.literal, meter.budget - meter.spent));
        out += part.literal;
      } else if ('malformed' in part) {
        throw new UnresolvedError(callError('unresolved_reference', `${part.malformed}: malformed reference`));
      } else {
        const v = lookupRef(part.ref, lookup);
        let text: string;
        if (typeof v === 'string') text = v;
        else {
          // Measured before it is written out: the text is at most what is left of the budget.
          if (meter) spend({ budget: meter.budget, spent: meter.spent }, jsonBytes(v, meter.budget - meter.spent), part.ref.raw);
          text = JSON.stringify(v);
        }
        if (meter) spend(meter, escapedBytes(text, meter.budget - meter.spent), part.ref.raw);
        out += text;
      }
    }
    return out;
  }
  if (Array.isArray(value)) {
    if (meter) spend(meter, 2 + Math.max(0, value.length - 1));
    return value.map((v) => subst(v, lookup, meter));
  }
  if (value !== null && typeof value === 'object') {
    if (meter) spend(meter, 2);
    const out: Record<string, unknown> = {};
    let first = true;
    for (const k in value) {
      if (!Object.hasOwn(value, k)) continue;
      if (meter) spend(meter, (first ? 0 : 1) + 3 + escapedBytes(k, meter.budget - meter.spent));
      first = false;
      const v = subst((value as Record<string, unknown>)[k], lookup, meter);
      // A key named `__proto__` (JSON.parse makes it an own property) stays one: `out[k] = v` would set
      // the object's prototype instead, and the key would be lost.
      if (k === '__proto__') Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
      else out[k] = v;
    }
    return out;
  }
  if (meter) spend(meter, jsonBytes(value, meter.budget - meter.spent));
  return value;
}
