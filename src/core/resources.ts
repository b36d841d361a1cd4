/**
 * Resource keys (DESIGN §3).
 *
 * A key is hierarchical: it splits into segments on `/` and `:` (empty and `.` segments dropped, `..`
 * resolved: see `parseKey`). Two keys
 * overlap when, over the length of the shorter one, every segment is equal or one of them is `*`:
 * equal keys, a segment-prefix (`file:/repo/src` and `file:/repo/src/a.ts`, not `file:/repo/srcx`),
 * or a wildcard segment.
 *
 * A template (`file:{path}`, `service:{namespace}:{name}`) expands against a call's args. A placeholder
 * whose arg is missing, not a scalar, or still a reference expands conservatively: the key is cut at the
 * segment where the placeholder stands and ends in `*` (`file:{path}` → `file:*`).
 */

import { Memo } from './memo.js';
export type Segments = readonly string[];

/** A resource key as written and as segments. */
export interface Key {
  text: string;
  segs: Segments;
}

/** Parsed keys (a pure function of the text, so shared process-wide: see memo.ts). */
export const KEYS = new Memo<Key>(50_000);

/** A parsed key. Memoized (keys repeat across calls); the result is shared, so never mutate it. */
export function key(text: string): Key {
  return KEYS.get(text, parsed);
}

function parsed(text: string): Key {
  return { text, segs: parseKey(text) };
}

export const ANY: Key = { text: '*', segs: ['*'] };

/**
 * A key's segments, with path steps resolved so that two spellings of one file are one key:
 * `file:/repo/./a.ts` and `file:/repo/src/../a.ts` are both `file:/repo/a.ts`. A `..` never climbs out
 * of the key's namespace (the segment before the first `:`) or above its first segment; one that would
 * can name anything there, so the key ends in `*` at that point (`file:../x` → `file:*`), which is
 * conservative: it overlaps whatever the path could have meant.
 */
export function parseKey(key: string): Segments {
  const raw = key.split(/[/:]/);
  if (!raw.includes('.') && !raw.includes('..')) return raw.filter((s) => s.length > 0);
  const floor = /^[^/:]+:/.test(key) ? 1 : 0;
  const segs: string[] = [];
  for (const s of raw) {
    if (s.length === 0 || s === '.') continue;
    if (s !== '..') segs.push(s);
    else if (segs.length > floor) segs.pop();
    else return [...segs, '*'];
  }
  return segs;
}

export function overlaps(a: Segments, b: Segments): boolean {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i];
    const y = b[i];
    if (x !== y && x !== '*' && y !== '*') return false;
  }
  return true;
}

export function anyOverlap(as: readonly Key[], bs: readonly Key[]): boolean {
  for (const a of as) for (const b of bs) if (overlaps(a.segs, b.segs)) return true;
  return false;
}

const PLACEHOLDER = /\{([^{}]+)\}/g;

function argAt(args: unknown, path: readonly string[]): unknown {
  let v: unknown = args;
  for (const seg of path) {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || !Object.hasOwn(v, seg)) return undefined;
    v = (v as Record<string, unknown>)[seg];
  }
  return v;
}

function scalar(v: unknown): string | undefined {
  if (typeof v === 'string') return v.includes('${') ? undefined : v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return undefined;
}

/** A template split once into literal text and placeholders (the arg paths, split on `.`), alternating. */
interface Compiled {
  literals: string[];
  args: string[][];
}

/** Compiled templates (pure, shared process-wide: see memo.ts). */
const TEMPLATES = new Memo<Compiled>(10_000);

function compile(template: string): Compiled {
  return TEMPLATES.get(template, compileNow);
}

function compileNow(template: string): Compiled {
  const c: Compiled = { literals: [], args: [] };
  let last = 0;
  for (const m of template.matchAll(PLACEHOLDER)) {
    c.literals.push(template.slice(last, m.index));
    c.args.push((m[1] as string).split('.'));
    last = (m.index as number) + m[0].length;
  }
  c.literals.push(template.slice(last));
  return c;
}

/** Expands one template against args; unknown placeholders give a wildcard at their segment. */
export function expandTemplate(template: string, args: unknown): string {
  const { literals, args: names } = compile(template);
  let out = '';
  for (let i = 0; i < names.length; i++) {
    out += literals[i] as string;
    const value = scalar(argAt(args, names[i] as string[]));
    if (value === undefined) {
      const cut = Math.max(out.lastIndexOf('/'), out.lastIndexOf(':'));
      return `${out.slice(0, cut + 1)}*`;
    }
    out += value;
  }
  return out + (literals[names.length] as string);
}

/** What a call touches, as parsed keys. */
export interface Access {
  reads: Key[];
  writes: Key[];
}

// Accesses are never changed once made, and most calls touch nothing or one key: the empty list and
// the common accesses are shared (frozen, so a change would throw instead of leaking between calls).
const NONE = Object.freeze([]) as unknown as Key[];

export const PURE: Access = Object.freeze({ reads: NONE, writes: NONE });

/** A tool that declares no effects at all writes `*`. */
const UNKNOWN: Access = Object.freeze({ reads: NONE, writes: Object.freeze([ANY]) as unknown as Key[] });

/**
 * A call's reads and writes. A tool that declares neither has unknown effects: it writes `*`. A tool
 * that declares both empty is pure. Keys are deduplicated by segments (`file:/a` and `file/a` are one),
 * and a key both read and written counts as written.
 */
export function accessOf(decl: Effects, args: unknown): Access {
  if (decl.reads === undefined && decl.writes === undefined) return UNKNOWN;
  // A tool with one template of one placeholder (`file:{path}`, the usual case) has one access per
  // value of that arg: made once and shared by every call with that value (frozen, as every shared
  // access is), found by the value as it is, without making the key's text per call to look it up.
  if ((decl.reads?.length ?? 0) + (decl.writes?.length ?? 0) === 1) {
    const write = decl.writes?.length === 1;
    const c = compile((write ? decl.writes : decl.reads)?.[0] as string);
    const value = c.args.length === 1 ? scalar(argAt(args, c.args[0] as string[])) : undefined;
    if (value !== undefined) {
      let byValue = singleAccesses.get(decl);
      if (!byValue) singleAccesses.set(decl, (byValue = new Map()));
      let a = byValue.get(value);
      if (!a) {
        if (byValue.size >= 10_000) byValue.clear();
        const keys = Object.freeze([key((c.literals[0] as string) + value + (c.literals[1] as string))]) as unknown as Key[];
        byValue.set(value, (a = Object.freeze(write ? { reads: NONE, writes: keys } : { reads: keys, writes: NONE })));
      }
      return a;
    }
  }
  const writes = expandAll(decl.writes, args, NONE);
  const reads = expandAll(decl.reads, args, writes);
  return reads === NONE && writes === NONE ? PURE : { reads, writes };
}

type Effects = { reads?: readonly string[]; writes?: readonly string[] };

/**
 * Per tool with a single read or write template of one placeholder: its accesses by the arg's value. A
 * memo of a pure function (see memo.ts), keyed by the manifest, so it goes with the config that holds
 * it; each tool's table is bounded (cleared past 10,000 values).
 */
const singleAccesses = new WeakMap<Effects, Map<string, Access>>();

/**
 * The keys of `templates` against `args`, first of each kind only, and none of those in `except`.
 * (Linear scans: a tool declares a handful of templates, and this runs once per call.)
 */
function expandAll(templates: readonly string[] | undefined, args: unknown, except: readonly Key[]): Key[] {
  let keys = NONE;
  if (templates === undefined) return keys;
  // Indexed: a tool's templates come from the deep-frozen config, and for…of over a frozen array goes
  // through the generic (allocating) iterator path.
  for (let i = 0; i < templates.length; i++) {
    const k = key(expandTemplate(templates[i] as string, args));
    if (includesKey(keys, k) || includesKey(except, k)) continue;
    if (keys === NONE) keys = [];
    keys.push(k);
  }
  return keys;
}

function includesKey(keys: readonly Key[], k: Key): boolean {
  // Indexed: `keys` is often the shared frozen empty list (as above).
  for (let i = 0; i < keys.length; i++) {
    const x = keys[i] as Key;
    if (x === k || sameSegments(x.segs, k.segs)) return true;
  }
  return false;
}

function sameSegments(a: Segments, b: Segments): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Expands a keyed limit's `per` template (DESIGN §4, a tool's `concurrency.per`) against a call's args:
 * like a resource template, except that a placeholder whose arg is missing or not a scalar expands to
 * the empty string (`{owner}/{repo}` with no `repo` → `acme/`), so such calls share one key.
 */
export function expandLabel(template: string, args: unknown): string {
  const { literals, args: names } = compile(template);
  if (names.length === 0) return template;
  let out = literals[0] as string;
  for (let i = 0; i < names.length; i++) {
    const v = argAt(args, names[i] as string[]);
    out += (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : '') + (literals[i + 1] as string);
  }
  return out;
}

/** The arg names a template's placeholders read (their first path segment): `{owner}/{repo.name}` → owner, repo. */
export function templateArgs(template: string): string[] {
  return compile(template).args.map((a) => a[0] as string);
}

/**
 * The key K under a `limits.each` pattern (DESIGN §4) that key `k` counts against: `k` cut to the
 * pattern's length (`repo:acme/web/a.ts` under `repo:*` → `repo:acme`); undefined when `k` is not under
 * the pattern (a literal segment differs, or `k` is shorter). A `*` of `k` where the pattern has one
 * stays: such a key counts in a group of its own (`repo:*`).
 */
export function keyUnder(k: Key, pattern: Segments): string | undefined {
  const segs = k.segs;
  if (segs.length < pattern.length) return undefined;
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] as string;
    if (p !== '*' && segs[i] !== p) return undefined;
  }
  if (segs.length === pattern.length) return k.text;
  return cutText(k.text, pattern.length) ?? segs.slice(0, pattern.length).join('/');
}

/** `text` up to the end of its `n`-th segment (as `parseKey` splits it), when that is plain (no `.` or `..` step). */
function cutText(text: string, n: number): string | undefined {
  let seen = 0;
  let i = 0;
  while (i < text.length) {
    while (i < text.length && (text[i] === '/' || text[i] === ':')) i++;
    if (i >= text.length) break;
    let j = i;
    while (j < text.length && text[j] !== '/' && text[j] !== ':') j++;
    const seg = text.slice(i, j);
    if (seg === '.' || seg === '..') return undefined;
    if (++seen === n) return text.slice(0, j);
    i = j;
  }
  return undefined;
}
