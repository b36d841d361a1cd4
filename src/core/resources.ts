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

export type Segments = readonly string[];

/** A resource key as written and as segments. */
export interface Key {
  text: string;
  segs: Segments;
}

const keyCache = new Map<string, Key>();

/** A parsed key. Cached (keys repeat across calls); the result is shared, so never mutate it. */
export function key(text: string): Key {
  let k = keyCache.get(text);
  if (!k) {
    k = { text, segs: parseKey(text) };
    if (keyCache.size > 50_000) keyCache.clear();
    keyCache.set(text, k);
  }
  return k;
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

function argAt(args: unknown, dotted: string): unknown {
  let v: unknown = args;
  for (const seg of dotted.split('.')) {
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

/** A template split once into literal text and placeholders (the arg paths), alternating. */
interface Compiled {
  literals: string[];
  args: string[];
}

const templateCache = new Map<string, Compiled>();

function compile(template: string): Compiled {
  let c = templateCache.get(template);
  if (!c) {
    c = { literals: [], args: [] };
    let last = 0;
    for (const m of template.matchAll(PLACEHOLDER)) {
      c.literals.push(template.slice(last, m.index));
      c.args.push(m[1] as string);
      last = (m.index as number) + m[0].length;
    }
    c.literals.push(template.slice(last));
    if (templateCache.size > 10_000) templateCache.clear();
    templateCache.set(template, c);
  }
  return c;
}

/** Expands one template against args; unknown placeholders give a wildcard at their segment. */
export function expandTemplate(template: string, args: unknown): string {
  const { literals, args: names } = compile(template);
  let out = '';
  for (let i = 0; i < names.length; i++) {
    out += literals[i] as string;
    const value = scalar(argAt(args, names[i] as string));
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

export const PURE: Access = { reads: [], writes: [] };

/**
 * A call's reads and writes. A tool that declares neither has unknown effects: it writes `*`. A tool
 * that declares both empty is pure.
 */
export function accessOf(decl: { reads?: readonly string[]; writes?: readonly string[] }, args: unknown): Access {
  if (decl.reads === undefined && decl.writes === undefined) return { reads: [], writes: [ANY] };
  const expand = (ts: readonly string[] | undefined) => dedupe((ts ?? []).map((t) => key(expandTemplate(t, args))));
  const writes = expand(decl.writes);
  const reads = expand(decl.reads);
  if (writes.length === 0 || reads.length === 0) return { reads, writes };
  const written = new Set(writes.map((k) => k.segs.join('\0')));
  return { reads: reads.filter((k) => !written.has(k.segs.join('\0'))), writes };
}

function dedupe(keys: Key[]): Key[] {
  if (keys.length < 2) return keys;
  const seen = new Set<string>();
  return keys.filter((k) => {
    const id = k.segs.join('\0');
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}
