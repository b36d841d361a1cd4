/**
 * Every limit and lock in use now (DESIGN §7, `GET /v1/limits`): how full it is, who holds it, how
 * many calls wait behind it and for how long. Read on demand (an operator's request), never on the
 * hot path; the waiters come from the scheduler's wait book (waits.ts), so it needs `explainWaits`.
 *
 * `limitItems` makes the items of any limiter, so that several replicas (DESIGN §12) can make the
 * cluster's from the permits of every replica and the waiters each publishes (`waitCounts`).
 */
import { own, type Bucket, type Holder, type KeyGroup, type Limiter, type Pause } from '../limits.js';
import { MAX_HOLDERS, type WaitHolder, type WaitKind } from '../waiting.js';
import type { ScheduledCall, SchedulerState } from './records.js';
import { unitsAt } from './waits.js';

export interface LimitInUse {
  kind: WaitKind;
  /** As in `WaitReason.key`; none for `global`. */
  key?: string;
  /** A lock's domain: `global` or `tenant:<t>`. */
  domain?: string;
  /** A keyed limit (`key`): the `limits.each` pattern or the tool's `concurrency.per` template. */
  pattern?: string;
  /** A tool's keyed limit, or a paused tool (`backoff`). */
  tool?: string;
  /** A pause (`backoff`): when it ends. */
  until?: number;
  /** A pause: the HTTP status that asked for it. */
  status?: number;
  /** Running calls (a rate: tokens per `perMs`); none for a lock. */
  limit?: number;
  perMs?: number;
  /** Running calls counted against it (a rate: tokens taken and not earned back yet). */
  inUse: number;
  /** Ready calls that wait for it now. */
  waiting: number;
  /** How long the longest of them has waited (0 when none waits). */
  longestWaitMs: number;
  /** A rate: when its bucket has a token again, if it has none now. */
  retryAt?: number;
  /** The oldest `MAX_HOLDERS` holders (none for a rate). */
  holders: WaitHolder[];
}

/** Waiters of one limit: how many, and since when the longest of them waits. */
export interface WaitCount {
  n: number;
  since: number;
}

/**
 * Waiters by what they wait for: the key is `waitId(kind, key)`, or for a lock
 * `waitId('lock', key, domain)`.
 */
export type WaitCounts = Map<string, WaitCount>;

/** The key of `WaitCounts` for a limit (`key` undefined: `global`) or, with `domain`, a lock. */
export function waitId(kind: WaitKind, key: string | undefined, domain?: string): string {
  if (kind === 'lock') return `lock\u0000${domain ?? ''}\u0000${key ?? ''}`;
  return key === undefined ? kind : `${kind}\u0000${key}`;
}

/** What `limitItems` reads. */
export interface LimitSource {
  limiter: Limiter;
  now: number;
  waiting: WaitCounts;
  /** A running call as a holder. */
  holderOf: (h: Holder) => WaitHolder;
  /** The rate buckets, by name (default: the limiter's own). */
  buckets?: ReadonlyMap<string, Readonly<Bucket>>;
}

/** The limits and locks in use (held, or waited for), in the order of `WAIT_KINDS`, then by key. */
export function limitsInUse(s: SchedulerState, now: number): LimitInUse[] {
  return limitItems({ limiter: s.limiter, now, waiting: waitCounts(s), holderOf: (h) => holderOf(h as ScheduledCall) });
}

/** The items of any limiter: those held, or waited for as `waiting` says. */
export function limitItems(src: LimitSource): LimitInUse[] {
  const { limiter: l, now, waiting } = src;
  const v = l.inspect();
  const waitOf = (id: string) => waiting.get(id) ?? { n: 0, since: now };
  const out: LimitInUse[] = [];
  const add = (kind: WaitKind, key: string | undefined, item: Omit<LimitInUse, 'kind' | 'key' | 'waiting' | 'longestWaitMs'>) => {
    const w = waitOf(waitId(kind, key));
    if (item.inUse === 0 && w.n === 0) return;
    out.push({ kind, ...(key !== undefined ? { key } : {}), ...item, waiting: w.n, longestWaitMs: Math.max(0, now - w.since) });
  };
  const running = [...v.running];
  const holdersOf = (pred: (h: Holder) => boolean) => running.filter(pred).slice(0, MAX_HOLDERS).map(src.holderOf);

  if (v.limits.global !== undefined)
    add('global', undefined, { limit: v.limits.global, inUse: l.runningCount, holders: holdersOf(() => true) });
  for (const t of sorted(new Set([...v.byTenant.keys(), ...keysOf(waiting, 'tenant')]))) {
    const limit = l.tenantLimit(t);
    if (limit !== undefined) add('tenant', t, { limit, inUse: v.byTenant.get(t) ?? 0, holders: holdersOf((h) => h.tenant === t) });
  }
  if (v.limits.perRun !== undefined) {
    const perRun = v.limits.perRun;
    const runs = new Set([...running.map((h) => h.runId), ...keysOf(waiting, 'perRun')]);
    for (const r of sorted(runs))
      add('perRun', r, { limit: perRun, inUse: running.filter((h) => h.runId === r).length, holders: holdersOf((h) => h.runId === r) });
  }
  for (const tool of sorted(Object.keys(v.limits.tool))) {
    add('tool', tool, {
      limit: own(v.limits.tool, tool) as number,
      inUse: v.byTool.get(tool) ?? 0,
      holders: holdersOf((h) => h.tool === tool),
    });
  }
  for (const id of sorted(v.keyUse.keys())) {
    const u = v.keyUse.get(id) as { group: KeyGroup; used: number };
    const g = u.group;
    const w = waitOf(waitId('key', id));
    out.push({
      kind: 'key',
      key: g.key,
      pattern: g.pattern,
      ...(g.tool !== undefined ? { tool: g.tool } : {}),
      limit: g.limit,
      inUse: u.used,
      waiting: w.n,
      longestWaitMs: Math.max(0, now - w.since),
      holders: holdersOf((h) => h.groups?.some((x) => x.id === id) === true),
    });
  }
  for (const id of sorted(v.pauses.keys())) {
    const p = v.pauses.get(id) as Pause;
    if (p.until <= now) continue;
    const w = waitOf(waitId('backoff', id));
    out.push({
      kind: 'backoff',
      key: p.key === undefined ? p.tool : `${p.tool} ${p.key}`,
      tool: p.tool,
      until: p.until,
      ...(p.status !== undefined ? { status: p.status } : {}),
      inUse: 0,
      waiting: w.n,
      longestWaitMs: Math.max(0, now - w.since),
      holders: [],
    });
  }
  v.resourceKeys.forEach((r, i) => {
    add('resource', r.text, { limit: r.limit, inUse: r.used, holders: holdersOf((h) => h.resourceLimits?.includes(i) === true) });
  });
  for (const [name, b] of [...(src.buckets ?? v.buckets)].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const units = unitsAt(b, now);
    const taken = Math.ceil((b.cap * b.perMs - units) / b.perMs);
    const retryAt = units >= b.perMs ? undefined : Math.max(b.last, now) + Math.ceil((b.perMs - units) / b.cap);
    add('rate', name, { limit: b.cap, perMs: b.perMs, inUse: taken, ...(retryAt !== undefined ? { retryAt } : {}), holders: [] });
  }
  out.push(...locksInUse(src, running));
  return out;
}

/** Held locks, by domain and key: every resource key of a running call of a shared scope. */
function locksInUse(src: LimitSource, running: Holder[]): LimitInUse[] {
  const { now, waiting } = src;
  const held = new Map<string, { domain: string; key: string; holders: Holder[] }>();
  for (const h of running) {
    if (h.domain === null) continue;
    for (const k of [...h.writes, ...h.reads]) {
      const id = waitId('lock', k.text, h.domain);
      let e = held.get(id);
      if (!e) held.set(id, (e = { domain: h.domain, key: k.text, holders: [] }));
      if (!e.holders.includes(h)) e.holders.push(h);
    }
  }
  for (const id of waiting.keys()) {
    if (!id.startsWith('lock\u0000') || held.has(id)) continue;
    const [, domain, key] = id.split('\u0000') as [string, string, string];
    held.set(id, { domain, key, holders: [] });
  }
  const out: LimitInUse[] = [];
  for (const id of sorted(held.keys())) {
    const e = held.get(id) as { domain: string; key: string; holders: Holder[] };
    const w = waiting.get(id) ?? { n: 0, since: now };
    out.push({
      kind: 'lock',
      key: e.key,
      domain: e.domain,
      inUse: e.holders.length,
      waiting: w.n,
      longestWaitMs: Math.max(0, now - w.since),
      holders: e.holders.slice(0, MAX_HOLDERS).map(src.holderOf),
    });
  }
  return out;
}

/** The ready calls that wait, counted by what they wait for, with the earliest `since` of each. */
export function waitCounts(s: SchedulerState): WaitCounts {
  const out: WaitCounts = new Map();
  const book = s.waits;
  if (!book) return out;
  const count = (id: string, c: ScheduledCall) => {
    const since = c.waitSince as number;
    const w = out.get(id);
    if (w) {
      w.n++;
      w.since = Math.min(w.since, since);
    } else out.set(id, { n: 1, since });
  };
  for (const byKey of book.groups.values()) {
    for (const g of byKey.values()) {
      const id = waitId(g.kind, g.key);
      for (let k = 0; k < g.size; k++) {
        const c = g.members[k] as ScheduledCall;
        if (c.waitGroup === g && c.waitSeq === g.seqs[k] && c.status === 'ready') count(id, c);
      }
    }
  }
  // Lock waiters, and calls the cluster refused (several replicas): by the reason they were given.
  for (const list of [book.locks, book.refused]) {
    for (const m of list) {
      const r = m.c.waitReasons?.[0];
      if (m.c.waitSeq === m.seq && m.c.status === 'ready' && r) count(waitId(r.kind, r.key, r.domain), m.c);
    }
  }
  return out;
}

function keysOf(waiting: WaitCounts, kind: WaitKind): string[] {
  const prefix = `${kind}\u0000`;
  return [...waiting.keys()].filter((id) => id.startsWith(prefix)).map((id) => id.slice(prefix.length));
}

function sorted(xs: Iterable<string>): string[] {
  return [...xs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

function holderOf(c: ScheduledCall): WaitHolder {
  return { runId: c.runId, callId: c.id, tenant: c.tenant, since: c.status === 'running' ? (c.attemptStartedAt ?? 0) : (c.waitSince ?? 0) };
}
