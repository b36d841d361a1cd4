/**
 * Why ready calls wait (DESIGN §7: `waitingFor`, the `call.waiting` event), with `explainWaits` on.
 *
 * Off the hot path: dispatch only notes the calls that became ready (`WaitBook.fresh`), and takes a
 * call it starts out of its queue (`WaitGroup.live`). After each step, `noteWaits` explains those
 * that did not start, and explains again only the waiters whose limit changed under them:
 * - a lock whose holders, or the waiters ahead, are not the same any more: always;
 * - a short queue (`SHORT_QUEUE`) behind a count limit (global, tenant, perRun, tool, resource) or a
 *   rate bucket: as soon as its limit has room after a step (its waiters wait for something else),
 *   and when a holder it names ends;
 * - a longer queue: once its limit has had room for `LONG_QUEUE_MS`. In a big run, which of its own
 *   limits binds (per run, or a tool's) flips at nearly every step, and following every flip would
 *   cost an event per waiter per flip.
 * While a limit stays full its waiters are not looked at again, so a step costs nothing per waiter,
 * and a waiting call costs one explanation, and one event, per change of what it waits for. So in a
 * long queue the holders of a count limit, and a bucket's `retryAt`, are those of when the call began
 * waiting for it; the live ones are in `limitsInUse` (limits-in-use.ts, GET /v1/limits).
 *
 * What the scheduler decides never depends on any of this: it reads the limiter, and changes nothing
 * (a lock waiter is queued by `Limiter.check` alone, as without it).
 */
import { clash, own, pauseId, type Bucket, type Holder, type KeyGroup, type LimiterState } from '../limits.js';
import { overlaps, type Key } from '../resources.js';
import { MAX_HOLDERS, sameWait, type WaitHolder, type WaitKind, type WaitReason } from '../waiting.js';
import type { LockWait, ScheduledCall, SchedulerState, WaitBook, WaitGroup } from './records.js';

/**
 * A short queue (at most this many waiters behind one count limit or bucket) is explained again as
 * soon as its limit has room, and when a holder of it ends (so it names who holds it now).
 */
const SHORT_QUEUE = 16;

/**
 * A longer queue is explained again only once its limit has had room for this long (ms, at every
 * step): in a big run the limit that binds flips between its own per-run and tool limits at nearly
 * every step, and following each flip would cost an event per waiter per flip.
 */
const LONG_QUEUE_MS = 1000;

/**
 * What refuses a call now: a count limit or bucket (`kind`, `key`, with its holders in `HOLDERS`), or
 * a lock (`reason`, `watch`). One object, filled by each explanation (they never overlap).
 */
interface Found {
  kind: WaitKind;
  key: string;
  limit: number;
  inUse: number;
  index: number;
  bucket: Readonly<Bucket> | undefined;
  /** A keyed limit: its group. */
  group: KeyGroup | undefined;
  /** A rate or a lock: the reason, made whole. */
  reason: WaitReason | undefined;
  /** A lock: the calls it waits for. */
  watch: ScheduledCall[] | undefined;
}

/*
 * FOUND, HOLDERS and staleGroups are process-wide scratch, shared by every Scheduler in the process on
 * purpose (no allocation per explanation on the hot path). That is safe because the core is
 * synchronous: each is filled and read within one call of `explain` or one step, never across a
 * yield, so two schedulers cannot interleave in them; and each is bounded (one Found, at most
 * MAX_HOLDERS holders, stale groups emptied before the step returns). tests/unit/core-process-state
 * steps two schedulers in lockstep, waits included, and checks each gives the events it gives alone.
 */
const FOUND: Found = {
  kind: 'global',
  key: '',
  limit: 0,
  inUse: 0,
  index: -1,
  bucket: undefined,
  group: undefined,
  reason: undefined,
  watch: undefined,
};

/**
 * The holders `explain` found for a count limit: the first `holderCount` (reused, likewise; never
 * truncated, which would drop its storage).
 */
const HOLDERS: ScheduledCall[] = [];
let holderCount = 0;

/** Stale groups of a step (reused: most steps have none). */
const staleGroups: WaitGroup[] = [];

const NO_REASONS: WaitReason[] = Object.freeze([]) as unknown as WaitReason[];

/** After a step: explains the calls that became ready and did not start, and the waiters whose limit changed. */
export function noteWaits(s: SchedulerState): void {
  const book = s.waits as WaitBook;
  // The fresh first: a call that waited before (and ran, and is ready again) gets its new place, so
  // its old one below is stale.
  const fresh = book.fresh;
  for (let i = 0; i < book.freshCount; i++) {
    const c = fresh[i] as ScheduledCall;
    // A call asking for a cluster-wide permit (several replicas) holds its local limits already.
    if (c.status !== 'ready' || c.permitPending === true) continue;
    c.waitSince = s.now;
    const found = explain(s, c);
    if (found) emitWaiting(s, c, enter(book, c, found));
    else leave(c);
  }
  book.freshCount = 0;
  const released = book.released;
  const list = book.list;
  if (list.length > 0) {
    for (let i = 0; i < list.length; i++) {
      const g = list[i] as WaitGroup;
      if (!isStale(s, g)) {
        g.staleSince = undefined;
        // A short queue names who holds its limit now: a holder of it ended in this step (the
        // per-run limit names none).
        if (g.live <= SHORT_QUEUE && book.releasedCount > 0 && g.kind !== 'perRun' && anyCounts(g, released, book.releasedCount))
          staleGroups.push(g);
        continue;
      }
      g.staleSince ??= s.now;
      if (g.live <= SHORT_QUEUE || s.now - g.staleSince >= LONG_QUEUE_MS) staleGroups.push(g);
    }
    if (staleGroups.length > 0) {
      for (const g of staleGroups) (book.groups.get(g.kind) as Map<string, WaitGroup>).delete(g.key ?? '');
      book.list = list.filter((g) => !staleGroups.includes(g));
      for (let i = 0; i < staleGroups.length; i++) {
        const g = staleGroups[i] as WaitGroup;
        for (let k = 0; k < g.size; k++) {
          const c = g.members[k] as ScheduledCall;
          if (c.waitGroup === g && c.waitSeq === g.seqs[k] && c.status === 'ready') explainAgain(s, book, c);
        }
      }
      staleGroups.length = 0;
    }
  }
  book.releasedCount = 0;
  if (book.locks.length > 0) {
    const locks = book.locks;
    book.locks = [];
    for (const m of locks) {
      if (m.c.waitSeq !== m.seq || m.c.status !== 'ready') continue;
      if (watchChanged(m)) explainAgain(s, book, m.c);
      else book.locks.push(m);
    }
  }
}

function explainAgain(s: SchedulerState, book: WaitBook, c: ScheduledCall): void {
  const old = c.waitReasons ?? NO_REASONS;
  const found = explain(s, c);
  if (found) enter(book, c, found);
  else leave(c);
  const now = c.waitReasons ?? NO_REASONS;
  if (!sameWait(old, now)) emitWaiting(s, c, now);
}

function emitWaiting(s: SchedulerState, c: ScheduledCall, reasons: WaitReason[]): void {
  // As `emit` makes it (records.ts), without looking the run up: it takes only the run's id. The
  // payload is shared by the calls of a queue told the same reasons (events are never changed).
  const g = c.waitGroup;
  const data = g !== undefined && g.last === reasons ? (g.lastData ??= { waitingFor: reasons }) : { waitingFor: reasons };
  s.out.events.push({ type: 'call.waiting', runId: c.runId, callId: c.id, at: s.now, data });
}

/** Nothing names the call's wait: it leaves its queue. */
function leave(c: ScheduledCall): void {
  if (c.waitGroup) c.waitGroup.live--;
  c.waitGroup = undefined;
  c.waitSeq = (c.waitSeq ?? 0) + 1;
  c.waitReasons = undefined;
}

/** Gives the call its new place, in a queue or among the lock waiters; returns its reasons. */
function enter(book: WaitBook, c: ScheduledCall, found: Found): WaitReason[] {
  leave(c);
  const seq = c.waitSeq as number;
  if (found.watch) {
    c.waitReasons = [found.reason as WaitReason];
    book.locks.push({ c, seq, watch: found.watch, attempts: found.watch.map((w) => w.attempts) });
    return c.waitReasons;
  }
  let byKey = book.groups.get(found.kind);
  if (!byKey) book.groups.set(found.kind, (byKey = new Map()));
  let g = byKey.get(found.key);
  if (!g) {
    g = {
      kind: found.kind,
      key: found.kind === 'global' ? undefined : found.key,
      index: found.index,
      members: [],
      seqs: [],
      size: 0,
      live: 0,
      compactAt: 64,
      bucket: found.bucket,
      group: found.group,
      staleSince: undefined,
      last: undefined,
      lastData: undefined,
    };
    byKey.set(found.key, g);
    book.list.push(g);
  }
  c.waitReasons = reasonsIn(g, found);
  c.waitGroup = g;
  if (g.size >= g.compactAt) compact(g);
  g.members[g.size] = c;
  g.seqs[g.size++] = seq;
  g.live++;
  return c.waitReasons;
}

/** Drops the members that left (amortized: the queue has grown to twice what it was). */
function compact(g: WaitGroup): void {
  let n = 0;
  const size = g.size;
  for (let k = 0; k < size; k++) {
    const c = g.members[k] as ScheduledCall;
    const seq = g.seqs[k] as number;
    if (c.waitGroup !== g || c.waitSeq !== seq || c.status !== 'ready') continue;
    g.members[n] = c;
    g.seqs[n++] = seq;
  }
  // The rest is kept as room, its calls let go (a queue outlives the runs of its calls).
  for (let k = n; k < size; k++) g.members[k] = undefined;
  g.size = n;
  g.live = n;
  g.compactAt = Math.max(64, 2 * n);
}

/** The reasons of a count limit or bucket: the group's last ones when they say the same (shared). */
function reasonsIn(g: WaitGroup, f: Found): WaitReason[] {
  if (f.reason) return newLast(g, [f.reason]);
  const last = g.last?.[0];
  if (last && last.limit === f.limit && last.inUse === f.inUse && last.holders.length === holderCount) {
    let same = true;
    for (let i = 0; i < holderCount && same; i++) same = last.holders[i] === holderOf(HOLDERS[i] as ScheduledCall);
    if (same) return g.last as WaitReason[];
  }
  // A copy of the right length (`new Array(n)` went to the runtime), then each call as its holder.
  const holders = HOLDERS.slice(0, holderCount) as unknown as WaitHolder[];
  for (let i = 0; i < holderCount; i++) holders[i] = holderOf(HOLDERS[i] as ScheduledCall);
  const kg = g.group;
  const reason: WaitReason =
    kg !== undefined
      ? kg.tool !== undefined
        ? { kind: 'key', key: kg.key, pattern: kg.pattern, tool: kg.tool, limit: f.limit, inUse: f.inUse, holders }
        : { kind: 'key', key: kg.key, pattern: kg.pattern, limit: f.limit, inUse: f.inUse, holders }
      : g.key === undefined
        ? { kind: g.kind, limit: f.limit, inUse: f.inUse, holders }
        : { kind: g.kind, key: g.key, limit: f.limit, inUse: f.inUse, holders };
  return newLast(g, [reason]);
}

function newLast(g: WaitGroup, reasons: WaitReason[]): WaitReason[] {
  g.last = reasons;
  g.lastData = undefined;
  return reasons;
}

/** Whether a group's limit has room after the step: its waiters wait for something else now. */
function isStale(s: SchedulerState, g: WaitGroup): boolean {
  const l = s.limiter;
  switch (g.kind) {
    case 'global':
      return !l.globalFull();
    case 'tenant':
      return !l.tenantFull(g.key as string);
    case 'perRun':
      return !l.runFull(g.key as string);
    case 'tool':
      return !l.toolFull(g.key as string);
    case 'resource': {
      const r = l.inspect().resourceKeys[g.index];
      return !r || r.used < r.limit;
    }
    case 'rate':
      return g.bucket === undefined || unitsAt(g.bucket, s.now) >= g.bucket.perMs;
    case 'key': {
      const u = l.inspect().keyUse.get(g.key as string);
      return u === undefined || u.used < u.group.limit;
    }
    case 'backoff': {
      const p = l.inspect().pauses.get(g.key as string);
      return p === undefined || p.until <= s.now;
    }
    default:
      return true;
  }
}

/** Whether any of the first `n` of `hs` counted against a group's limit. */
function anyCounts(g: WaitGroup, hs: readonly Holder[], n: number): boolean {
  for (let i = 0; i < n; i++) if (counts(g, hs[i] as Holder)) return true;
  return false;
}

/** Whether a running call counts against a group's limit. */
function counts(g: WaitGroup, h: Holder): boolean {
  return holds(g.kind, g.key ?? '', g.index, h);
}

/** Whether a lock waiter's holders ended (or the waiters ahead moved on). */
function watchChanged(m: LockWait): boolean {
  const { watch, attempts } = m;
  const queued = m.c.waitReasons?.[0]?.holders.length === 0;
  for (let i = 0; i < watch.length; i++) {
    const w = watch[i] as ScheduledCall;
    if (queued ? w.status !== 'ready' : w.status !== 'running' || w.attempts !== attempts[i]) return true;
  }
  return watch.length === 0;
}

/**
 * The first limit that refuses `c` now, in the order dispatch looks at them (global, tenant, per run,
 * tool, resource, rate, lock); undefined when none does.
 */
export function explain(s: SchedulerState, c: ScheduledCall): Found | undefined {
  const l = s.limiter;
  const v = l.inspect();
  if (l.globalFull()) return counted(v, 'global', '', v.limits.global as number, l.runningCount, -1);
  if (l.tenantFull(c.tenant)) return counted(v, 'tenant', c.tenant, l.tenantLimit(c.tenant) as number, v.byTenant.get(c.tenant) ?? 0, -1);
  // The per-run limit names no holders: they are the run's own running calls, there in its view.
  if (l.runFull(c.runId)) return counted(v, 'perRun', c.runId, v.limits.perRun as number, v.runningOf(c.runId), -1);
  if (l.toolFull(c.tool)) return counted(v, 'tool', c.tool, own(v.limits.tool, c.tool) as number, v.byTool.get(c.tool) ?? 0, -1);
  if (v.pauses.size > 0) {
    const p = l.pausedAt(c, s.now);
    if (p) {
      const id = pauseId(p.tool, p.key);
      const reason: WaitReason = {
        kind: 'backoff',
        key: p.key === undefined ? p.tool : `${p.tool} ${p.key}`,
        tool: p.tool,
        until: p.until,
        ...(p.status !== undefined ? { status: p.status } : {}),
        holders: [],
      };
      return found('backoff', id, 0, 0, undefined, reason, undefined);
    }
  }
  const groups = v.groupsOf(c);
  for (let k = 0; k < groups.length; k++) {
    const g = groups[k] as KeyGroup;
    const u = v.keyUse.get(g.id);
    if (u === undefined || u.used < g.limit) continue;
    const f = counted(v, 'key', g.id, g.limit, u.used, -1);
    f.group = g;
    return f;
  }
  const resources = v.resourcesOf(c);
  for (let k = 0; k < resources.length; k++) {
    const i = resources[k] as number;
    const r = v.resourceKeys[i] as { text: string; limit: number; used: number };
    if (r.used < r.limit) continue;
    return counted(v, 'resource', r.text, r.limit, r.used, i);
  }
  const buckets = v.bucketsOf(c);
  let latest: Readonly<Bucket> | undefined;
  let at = 0;
  for (let k = 0; k < buckets.length; k++) {
    const b = buckets[k] as Readonly<Bucket>;
    const units = unitsAt(b, s.now);
    if (units >= b.perMs) continue;
    const when = Math.max(b.last, s.now) + Math.ceil((b.perMs - units) / b.cap);
    if (!latest || when > at) {
      latest = b;
      at = when;
    }
  }
  if (latest) {
    const key = bucketName(v, latest);
    const reason: WaitReason = { kind: 'rate', key, limit: latest.cap, perMs: latest.perMs, retryAt: at, holders: [] };
    return found('rate', key, latest.cap, 0, latest, reason, undefined);
  }
  return c.domain === null ? undefined : lock(s, v, c);
}

/** A full count limit; its holders (the oldest `MAX_HOLDERS`) go to `HOLDERS`. */
function counted(v: LimiterState, kind: WaitKind, key: string, limit: number, inUse: number, index: number): Found {
  holderCount = 0;
  if (kind !== 'perRun') {
    for (const h of v.running) {
      if (!holds(kind, key, index, h)) continue;
      HOLDERS[holderCount++] = h as ScheduledCall;
      if (holderCount === MAX_HOLDERS) break;
    }
  }
  const f = found(kind, key, limit, inUse, undefined, undefined, undefined);
  f.index = index;
  return f;
}

/** Whether running call `h` counts against the limit of `kind` and `key` (`index`: a resource limit's). */
function holds(kind: WaitKind, key: string, index: number, h: Holder): boolean {
  switch (kind) {
    case 'global':
      return true;
    case 'tenant':
      return h.tenant === key;
    case 'perRun':
      return h.runId === key;
    case 'tool':
      return h.tool === key;
    case 'resource':
      return h.resourceLimits?.includes(index) === true;
    case 'key':
      return h.groups?.some((g) => g.id === key) === true;
    default:
      return false;
  }
}

function found(
  kind: WaitKind,
  key: string,
  limit: number,
  inUse: number,
  bucket: Readonly<Bucket> | undefined,
  reason: WaitReason | undefined,
  watch: ScheduledCall[] | undefined,
): Found {
  const f = FOUND;
  f.kind = kind;
  f.key = key;
  f.limit = limit;
  f.inUse = inUse;
  f.index = -1;
  f.bucket = bucket;
  f.group = undefined;
  f.reason = reason;
  f.watch = watch;
  return f;
}

/** A lock: the running calls of other runs in its domain that it conflicts with, else the waiters ahead. */
function lock(s: SchedulerState, v: LimiterState, c: ScheduledCall): Found | undefined {
  const watch: ScheduledCall[] = [];
  let key: string | undefined;
  for (const h of v.running) {
    if (!clash(c, h)) continue;
    key ??= heldKey(c, h);
    if (watch.length < MAX_HOLDERS) watch.push(h as ScheduledCall);
  }
  let reason: WaitReason;
  if (watch.length > 0) reason = { kind: 'lock', key: key as string, domain: c.domain as string, holders: watch.map(holderOf) };
  else {
    for (const w of v.waiters) {
      if (w === c) break;
      if (!clash(c, w)) continue;
      key ??= heldKey(c, w);
      if (watch.length < MAX_HOLDERS) watch.push(w as ScheduledCall);
    }
    if (watch.length === 0) return undefined;
    const queuedBehind = watch.map((w) => ({
      runId: w.runId,
      callId: w.id,
      tenant: w.tenant,
      since: w.status === 'ready' && w.waitReasons !== undefined ? (w.waitSince as number) : s.now,
    }));
    reason = { kind: 'lock', key: key as string, domain: c.domain as string, holders: [], queuedBehind };
  }
  return found('lock', key as string, 0, 0, undefined, reason, watch);
}

/** The key of `o` that `c` conflicts with: a write of either overlapping the other's read or write. */
function heldKey(c: Holder, o: Holder): string {
  const hit = (mine: readonly Key[], theirs: readonly Key[]) => theirs.find((k) => mine.some((m) => overlaps(m.segs, k.segs)));
  return (hit(c.writes, o.writes) ?? hit(c.writes, o.reads) ?? hit(c.reads, o.writes) ?? { text: '*' }).text;
}

/**
 * A running call as a holder, made once per attempt (so equal holders are the same object). One that
 * holds its limits while it asks for a cluster-wide permit holds them since it began waiting.
 */
function holderOf(c: ScheduledCall): WaitHolder {
  const since = c.status === 'running' ? (c.attemptStartedAt ?? 0) : (c.waitSince ?? 0);
  if (c.heldAs === undefined || c.heldAs.since !== since) c.heldAs = { runId: c.runId, callId: c.id, tenant: c.tenant, since };
  return c.heldAs;
}

/** A bucket's units at `now`, without refilling it (as `Limiter.refill` would). */
export function unitsAt(b: Readonly<Bucket>, now: number): number {
  if (b.last === Number.NEGATIVE_INFINITY || now <= b.last) return b.units;
  return Math.min(b.cap * b.perMs, b.units + (now - b.last) * b.cap);
}

/** A bucket's name in the limiter: `tool:<name>` or `tenant:<t>`. */
export function bucketName(v: LimiterState, b: Readonly<Bucket>): string {
  for (const [name, x] of v.buckets) if (x === b) return name;
  return '?';
}
