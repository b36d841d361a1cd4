/**
 * What an ask for cluster-wide permits takes, and whether it may (DESIGN §4, §12): the coordination
 * logic of permits.ts, pure, over the rows the ask locked, so it is tested without a database.
 *
 * A call counts against *counters*, one per limit key: `tenant:<t>`, `tool:<t>`, `resource:<key>` (a
 * new kind of limit is new keys), each with its capacity; and, when its tool's scope puts its resources
 * in a lock domain (`global`, `tenant:<t>`), it takes reader–writer *locks* by multi-granularity
 * locking: a read (write) of a key counts `r` (`w`) on the key's node and `ir` (`iw`) on each ancestor
 * (segments of the key, root ''), so two overlapping keys always meet on one row. A key with a `*`
 * locks at the wildcard's parent (conservative: it covers the whole subtree). A read conflicts with a
 * write on its node or an ancestor, or with one below it (`iw`); a write with anything on its node or
 * below it, or a read or write on an ancestor. Calls of the same run never conflict (their order is the
 * run's conflict edges), so what the asking run holds itself is taken off first.
 *
 * `decide` grants calls in the order asked, all or nothing per call, checking in the order one
 * replica's limiter does (tenant, tool, resource, rate, lock); a lock waiter of the ask, or an older
 * one of any replica (`queue`, permit-waits.ts), is served before the later calls of other runs that
 * conflict with it (first come, first served). A counter's most urgent waiter of any replica
 * (`counterQueue`, permit-priority.ts) have places kept for them: a less urgent call is granted only if
 * the counter has room for it and for them.
 */
import { clash, eachPatterns, keyGroupsOf, own, type EachPattern, type Holder, type KeyGroup, type Pause } from '../core/limits.js';
import { overlaps, key as parsedKey, type Key } from '../core/resources.js';
import type { PermitRequest } from '../core/scheduler.js';
import type { Catalog, Limits, Rate } from '../core/tool.js';
import type { WaitReason } from '../core/waiting.js';
import type { CounterMark, CounterQueue } from './permit-priority.js';
import type { Mark, WaitQueue } from './permit-waits.js';

export type LockMode = 'r' | 'w' | 'ir' | 'iw';

/** Separates the parts of a lock entry (`<domain> <node> <mode>`): no key or tenant holds it. */
export const SEP = '\u001f';

export interface Counter {
  /** `tenant:<t>`, `tool:<t>`, `resource:<key>`, or a keyed group's id (`key:…`, `each:…`). */
  key: string;
  kind: 'tenant' | 'tool' | 'resource' | 'key';
  /** The tenant, the tool, the resource limit's key, or a keyed group's K, as `waitingFor` names it. */
  name: string;
  cap: number;
  /** A keyed limit (DESIGN §4): its group (pattern, tool, K). */
  group?: KeyGroup;
}

export interface LockTarget {
  /** `<domain> <node>`: the row. */
  row: string;
  mode: 'r' | 'w';
  /** The rows of its ancestors, root first. */
  ancestors: string[];
}

/** What one call asks for. */
export interface Claim {
  request: PermitRequest;
  holder: Holder;
  counters: Counter[];
  locks: LockTarget[];
  /** Every lock entry it takes: `<row> <mode>` (what it gives back). */
  lockEntries: string[];
  rated: boolean;
}

export interface NodeCounts {
  r: number;
  w: number;
  ir: number;
  iw: number;
}

export type Decision =
  | { granted: true }
  | {
      granted: false;
      reason: 'tenant' | 'tool' | 'resource' | 'key';
      counter: Counter;
      inUse: number;
      /** The counter had room, but it is kept for more urgent waiters (of any replica): the first of them. */
      behind?: CounterMark;
    }
  | { granted: false; reason: 'rate'; wakeAt?: number; why?: WaitReason }
  | { granted: false; reason: 'lock'; behindWaiter: boolean; behind?: Mark }
  | { granted: false; reason: 'backoff'; pause: Pause };

/** Rate limits, kept by the caller (a core `Limiter` seeded with the buckets the ask locked). */
export interface Rates {
  check(h: Holder): { ok: true } | { ok: false; wakeAt?: number; why?: WaitReason };
  take(h: Holder): void;
}

/** The rows an ask locked: counters' use and lock nodes' counts. */
export interface AskRows {
  counters: Map<string, number>;
  nodes: Map<string, NodeCounts>;
}

export interface Decided {
  decisions: Decision[];
  /** Increments of the granted calls, by counter key and by lock row. */
  counterDelta: Map<string, number>;
  nodeDelta: Map<string, NodeCounts>;
  /**
   * Runs whose own held locks must be read to decide (a lock looked taken, but maybe by the run
   * itself): ask again with them in `mine`.
   */
  needMine: Set<string>;
}

const ZERO: NodeCounts = Object.freeze({ r: 0, w: 0, ir: 0, iw: 0 });

/** The shared limits: `global` protects each replica's host, and `perRun` is counted where the run is. */
export function sharedLimits(limits: Limits): Limits {
  const { global: _g, perRun: _p, ...shared } = limits;
  return shared;
}

/** The counters, locks and rates that a request takes under `limits` (already `sharedLimits`). */
export function claimOf(r: PermitRequest, limits: Limits, catalog: Catalog): Claim {
  const manifest = catalog.get(r.tool);
  const rate: Rate | undefined = manifest?.rate;
  const keyed = manifest?.keyedConcurrency;
  const holder: Holder = {
    runId: r.runId,
    tenant: r.tenant,
    tool: r.tool,
    domain: r.domain,
    reads: r.reads.map(parsedKey),
    writes: r.writes.map(parsedKey),
    ...(rate ? { toolRate: rate } : {}),
    ...(keyed !== undefined && r.perKey !== undefined ? { keyed, perKey: r.perKey } : {}),
  };
  const counters: Counter[] = [];
  const tenantCap = own(limits.tenant, r.tenant) ?? own(limits.tenant, 'default');
  if (tenantCap !== undefined) counters.push({ key: `tenant:${r.tenant}`, kind: 'tenant', name: r.tenant, cap: tenantCap });
  const toolCap = own(limits.tool, r.tool);
  if (toolCap !== undefined) counters.push({ key: `tool:${r.tool}`, kind: 'tool', name: r.tool, cap: toolCap });
  for (const [text, cap] of Object.entries(limits.resource)) {
    const segs = parsedKey(text).segs;
    const hits = (k: Key) => overlaps(k.segs, segs);
    if (holder.reads.some(hits) || holder.writes.some(hits)) counters.push({ key: `resource:${text}`, kind: 'resource', name: text, cap });
  }
  for (const g of keyGroupsOf(holder, patternsOf(limits))) counters.push({ key: g.id, kind: 'key', name: g.key, cap: g.limit, group: g });
  const locks: LockTarget[] = [];
  const lockEntries: string[] = [];
  if (r.domain !== null) {
    const add = (k: Key, mode: 'r' | 'w') => {
      const path = lockPath(k);
      const rows = path.map((node) => `${r.domain}${SEP}${node}`);
      const row = rows[rows.length - 1] as string;
      const ancestors = rows.slice(0, -1);
      locks.push({ row, mode, ancestors });
      lockEntries.push(`${row}${SEP}${mode}`);
      for (const a of ancestors) lockEntries.push(`${a}${SEP}i${mode}`);
    };
    for (const k of holder.writes) add(k, 'w');
    for (const k of holder.reads) add(k, 'r');
  }
  const rated = rate !== undefined || own(limits.rate.tenant, r.tenant) !== undefined || own(limits.rate.tenant, 'default') !== undefined;
  return { request: r, holder, counters, locks, lockEntries, rated };
}

/** `limits.each`, parsed once per limits object. */
const PATTERNS = new WeakMap<Limits, EachPattern[]>();

function patternsOf(limits: Limits): EachPattern[] {
  let p = PATTERNS.get(limits);
  if (!p) PATTERNS.set(limits, (p = eachPatterns(limits)));
  return p;
}

/**
 * The nodes from the root ('') to a key's own: its segments joined by `/`, cut before the first `*`
 * (a wildcard locks at its parent).
 */
export function lockPath(k: Key): string[] {
  const out = [''];
  let node = '';
  for (const s of k.segs) {
    if (s === '*') break;
    node = node === '' ? s : `${node}/${s}`;
    out.push(node);
  }
  return out;
}

/** Splits a lock entry into its row and mode. */
export function entryParts(entry: string): { row: string; mode: LockMode } {
  const i = entry.lastIndexOf(SEP);
  return { row: entry.slice(0, i), mode: entry.slice(i + 1) as LockMode };
}

/** Counts entries by row: what a set of permits holds on each lock row. */
export function countEntries(entries: Iterable<string>, into = new Map<string, NodeCounts>(), sign = 1): Map<string, NodeCounts> {
  for (const e of entries) {
    const { row, mode } = entryParts(e);
    const c = into.get(row) ?? { ...ZERO };
    c[mode] += sign;
    into.set(row, c);
  }
  return into;
}

/**
 * Decides an ask: `rows` as locked (changed in place as calls are granted), `mine` the lock entries
 * held by each run whose own holds were read (see `needMine`).
 */
export function decide(
  claims: readonly Claim[],
  rows: AskRows,
  rates: Rates,
  mine: ReadonlyMap<string, readonly string[]> = new Map(),
  queue?: WaitQueue,
  paused?: (c: Claim) => Pause | undefined,
  counterQueue?: CounterQueue,
): Decided {
  const decisions: Decision[] = [];
  const counterDelta = new Map<string, number>();
  const nodeDelta = new Map<string, NodeCounts>();
  const needMine = new Set<string>();
  /** What each run holds on each row: read from the database (`mine`), plus what this ask granted it. */
  const ownHeld = new Map<string, Map<string, NodeCounts>>();
  const ownOf = (runId: string) => {
    const m = ownHeld.get(runId) ?? countEntries(mine.get(runId) ?? []);
    ownHeld.set(runId, m);
    return m;
  };
  /** The ask's lock waiters, with their places in line (all 0 without a queue: first asked, first served). */
  const waiters: { holder: Holder; since: number }[] = [];
  for (const c of claims) {
    const d = decideOne(c);
    decisions.push(d);
    if (counterQueue)
      for (const k of c.counters) {
        if (!d.granted && 'counter' in d && d.counter === k) counterQueue.waiting(c.request, k.key);
        else counterQueue.passed(c.request, k.key);
      }
    if (!d.granted) {
      if (d.reason === 'lock') {
        queue?.waiting(c);
        waiters.push({ holder: c.holder, since: queue?.sinceOf(c) ?? 0 });
      }
      continue;
    }
    queue?.granted(c);
    for (const k of c.counters) {
      rows.counters.set(k.key, (rows.counters.get(k.key) ?? 0) + 1);
      counterDelta.set(k.key, (counterDelta.get(k.key) ?? 0) + 1);
    }
    if (c.lockEntries.length > 0) {
      countEntries(c.lockEntries, rows.nodes);
      countEntries(c.lockEntries, nodeDelta);
      countEntries(c.lockEntries, ownOf(c.request.runId));
    }
    if (c.rated) rates.take(c.holder);
  }
  return { decisions, counterDelta, nodeDelta, needMine };

  function decideOne(c: Claim): Decision {
    // Backpressure (DESIGN §4): a paused tool, or keyed group, gets no permit until the pause ends.
    const pause = paused?.(c);
    if (pause) return { granted: false, reason: 'backoff', pause };
    for (const k of c.counters) {
      const inUse = rows.counters.get(k.key) ?? 0;
      if (inUse + 1 > k.cap) return { granted: false, reason: k.kind, counter: k, inUse };
      // The places left are kept for the more urgent waiters (of any replica): a refusal for that names
      // the first of them (one for a full counter names its holders, as always).
      const ahead = counterQueue?.ahead(c.request, k.key);
      if (ahead && ahead.length > 0 && inUse + 1 + ahead.length > k.cap)
        return { granted: false, reason: k.kind, counter: k, inUse, behind: ahead[0] as CounterMark };
    }
    if (c.rated) {
      const r = rates.check(c.holder);
      if (!r.ok)
        return {
          granted: false,
          reason: 'rate',
          ...(r.wakeAt === undefined ? {} : { wakeAt: r.wakeAt }),
          ...(r.why ? { why: r.why } : {}),
        };
    }
    if (c.locks.length === 0) return { granted: true };
    if (lockTaken(c)) {
      if (!mine.has(c.request.runId)) needMine.add(c.request.runId);
      return { granted: false, reason: 'lock', behindWaiter: false };
    }
    const place = queue?.sinceOf(c) ?? 0;
    for (const w of waiters)
      if (w.since <= place && clash(c.holder, w.holder)) return { granted: false, reason: 'lock', behindWaiter: true };
    const behind = queue?.ahead(c);
    if (behind) return { granted: false, reason: 'lock', behindWaiter: true, behind };
    return { granted: true };
  }

  /** Whether a running call of another run holds a lock that conflicts with one of `c`'s. */
  function lockTaken(c: Claim): boolean {
    const own = ownOf(c.request.runId);
    const others = (row: string): NodeCounts => {
      const t = rows.nodes.get(row) ?? ZERO;
      const m = own.get(row) ?? ZERO;
      return { r: t.r - m.r, w: t.w - m.w, ir: t.ir - m.ir, iw: t.iw - m.iw };
    };
    for (const l of c.locks) {
      const at = others(l.row);
      if (l.mode === 'r' ? at.w + at.iw > 0 : at.r + at.w + at.ir + at.iw > 0) return true;
      for (const a of l.ancestors) {
        const up = others(a);
        if (l.mode === 'r' ? up.w > 0 : up.r + up.w > 0) return true;
      }
    }
    return false;
  }
}

/** The rows an ask must lock, sorted (every transaction takes them in this order: no deadlock). */
export function rowsToLock(claims: readonly Claim[]): { counters: { key: string; cap: number }[]; nodes: string[] } {
  const counters = new Map<string, number>();
  const nodes = new Set<string>();
  for (const c of claims) {
    for (const k of c.counters) counters.set(k.key, k.cap);
    for (const l of c.locks) {
      nodes.add(l.row);
      for (const a of l.ancestors) nodes.add(a);
    }
  }
  return {
    counters: [...counters].sort(([a], [b]) => compare(a, b)).map(([key, cap]) => ({ key, cap })),
    nodes: [...nodes].sort(compare),
  };
}

/** Byte order, the same as PostgreSQL's `COLLATE "C"` (the SQL sorts with it too). */
export function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
