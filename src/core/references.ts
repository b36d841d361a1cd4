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

const REF_BODY = /^(.+?)\.(output|args)((?:\.[^.[\]]+|\[\d+\])*)$/;
const PATH_PART = /\.([^.[\]]+)|\[(\d+)\]/g;

function parseBody(body: string): Reference | 'malformed' | null {
  const m = REF_BODY.exec(body);
  if (!m) return /\.output(\.|\[|$)/.test(body) ? 'malformed' : null;
  const [, target, field, rest] = m as unknown as [string, string, 'output' | 'args', string];
  if (field === 'args' && target !== 'self') return null;
  const path: PathSegment[] = [];
  for (const p of rest.matchAll(PATH_PART)) path.push(p[1] !== undefined ? p[1] : Number(p[2]));
  return { raw: `\${${body}}`, target, field, path };
}

const partsCache = new Map<string, Part[]>();

/** Splits a string into literal text and references. Cached: args strings repeat a lot. */
export function parseString(s: string): Part[] {
  const cached = partsCache.get(s);
  if (cached) return cached;
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
        const ref = parseBody(body);
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
  if (partsCache.size > 50_000) partsCache.clear();
  partsCache.set(s, parts);
  return parts;
}

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
    for (const v of Object.values(value)) walk(v, found);
  }
}

/** Whether args hold any reference or escape at all (fast check; no allocation for plain args). */
export function hasTemplates(value: unknown): boolean {
  if (typeof value === 'string') return needsWork(value);
  if (Array.isArray(value)) return value.some(hasTemplates);
  if (value !== null && typeof value === 'object') return Object.values(value).some(hasTemplates);
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
    for (const [k, v] of Object.entries(value)) out[k] = subst(v, lookup);
    return out;
  }
  return value;
}
