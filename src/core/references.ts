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
 * `lookup` is called once per reference, in document order (the order `findReferences` lists them),
 * until one fails: a caller may answer the k-th call from what it planned for the k-th reference.
 */
export function resolveValue(value: unknown, lookup: TargetLookup): Resolved {
  try {
    return { ok: true, value: subst(value, lookup) };
  } catch (e) {
    if (e instanceof UnresolvedError) return { ok: false, error: e.error };
    throw e;
  }
}

class UnresolvedError extends Error {
  constructor(readonly error: CallError) {
    super(error.message);
  }
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

function subst(value: unknown, lookup: TargetLookup): unknown {
  if (typeof value === 'string') {
    if (!needsWork(value)) return value;
    const parts = parseString(value);
    const only = parts[0];
    if (parts.length === 1 && only && 'ref' in only) return lookupRef(only.ref, lookup);
    let out = '';
    for (const part of parts) {
      if ('literal' in part) out += part.literal;
      else if ('malformed' in part) {
        throw new UnresolvedError(callError('unresolved_reference', `${part.malformed}: malformed reference`));
      } else {
        const v = lookupRef(part.ref, lookup);
        out += typeof v === 'string' ? v : JSON.stringify(v);
      }
    }
    return out;
  }
  if (Array.isArray(value)) return value.map((v) => subst(v, lookup));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const k in value) if (Object.hasOwn(value, k)) out[k] = subst((value as Record<string, unknown>)[k], lookup);
    return out;
  }
  return value;
}
