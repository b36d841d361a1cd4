/**
 * Why ready calls wait (DESIGN §7: `waitingFor`, the `call.waiting` event), with `explainWaits` on.
 *
 * Off the hot path: dispatch only notes the calls that became ready (`WaitBook.fresh`). After each
 * step, `noteWaits` explains those that did not start, and explains again only the waiters whose
 * limit changed under them:
 * - a count limit (global, tenant, perRun, tool, resource) with room after the step: its waiters wait
 *   for something else now;
 * - a rate bucket with a token after the step (likewise);
 * - a lock whose holders, or the waiters ahead, are not the same any more;
 * - a short queue (`SMALL_GROUP`) behind a count limit when a holder it names ends.
 * While a limit stays full, the waiters of a long queue are not looked at again, so a step costs
 * nothing per waiter, and a waiting call costs one explanation, and one event, per change of what it
 * waits for. So in a long queue the holders of a count limit, and a bucket's `retryAt`, are those of
 * when the call began waiting for it; the live ones are in `limitsInUse` (limits-in-use.ts,
 * GET /v1/limits).
 *
 * What the scheduler decides never depends on any of this: it reads the limiter, and changes nothing
 * (a lock waiter is queued by `Limiter.check` alone, as without it).
 */
import { clash, own, type Bucket, type Holder, type LimiterState } from '../limits.js';
import { overlaps, type Key } from '../resources.js';
import { MAX_HOLDERS, sameWait, type WaitHolder, type WaitKind, type WaitReason } from '../waiting.js';
import { emit, type ScheduledCall, type SchedulerState, type WaitBook, type WaitEntry, type WaitGroup } from './records.js';

/** What refuses a call now, and where its entry goes. */
interface Found {
  reason: WaitReason;
  /** A count limit or bucket: the group to join. */
  kind?: WaitKind;
  key?: string | undefined;
  index?: number;
  bucket?: Readonly<Bucket>;
  /** A lock: the calls it waits for. */
  watch?: ScheduledCall[];
}

/**
 * A group of at most this many waiters is explained again when a holder it names ends (so a short
 * queue behind a tool limit names who holds it now); a longer one only when its limit has room.
 */
const SMALL_GROUP = 16;

/** Stale groups of a step (reused: most steps have none). */
const staleGroups: WaitGroup[] = [];

/** After a step: explains the calls that became ready and did not start, and the waiters whose limit changed. */
export function noteWaits(s: SchedulerState): void {
  const book = s.waits as WaitBook;
  // The fresh first: a call that waited before (and ran, and is ready again) gets its new entry, so
  // its old one below is stale.
  const fresh = book.fresh;
  for (let i = 0; i < fresh.length; i++) {
    const c = fresh[i] as ScheduledCall;
    if (c.status !== 'ready') continue;
    const found = explain(s, c);
    if (!found) {
      c.wait = undefined;
      continue;
    }
    const reasons = [found.reason];
    enter(book, c, found, reasons, s.now);
    emitWaiting(s, c, reasons);
  }
  fresh.length = 0;
  if (book.groups.size > 0) {
    for (const g of book.groups.values()) if (isStale(s, g) || (g.members.length <= SMALL_GROUP && g.members.some((m) => live(m) && holdersEnded(s, m)))) staleGroups.push(g);
    for (let i = 0; i < staleGroups.length; i++) {
      const g = staleGroups[i] as WaitGroup;
      book.groups.delete(g.id);
      for (const m of g.members) if (live(m)) explainAgain(s, book, m);
    }
    staleGroups.length = 0;
  }
  if (book.locks.length > 0) {
    const locks = book.locks;
    book.locks = [];
    for (const m of locks) {
      if (!live(m)) continue;
      if (watchChanged(m)) explainAgain(s, book, m);
      else book.locks.push(m);
    }
  }
}

function explainAgain(s: SchedulerState, book: WaitBook, old: WaitEntry): void {
  const c = old.c;
  const found = explain(s, c);
  const reasons = found ? [found.reason] : [];
  enter(book, c, found, reasons, old.since);
  if (!sameWait(old.reasons, reasons)) emitWaiting(s, c, reasons);
}

function emitWaiting(s: SchedulerState, c: ScheduledCall, reasons: WaitReason[]): void {
  const run = s.runs.get(c.runId);
  if (run) emit(s, 'call.waiting', run, c, { waitingFor: reasons });
}

/** Keeps the call's new entry, in its group or among the lock waiters. */
function enter(book: WaitBook, c: ScheduledCall, found: Found | undefined, reasons: WaitReason[], since: number): void {
  const entry: WaitEntry = { c, reasons, since, group: undefined, watch: undefined, watchAttempts: undefined };
  c.wait = entry;
  if (!found) return;
  if (found.watch) {
    entry.watch = found.watch;
    entry.watchAttempts = found.watch.map((w) => w.attempts);
    book.locks.push(entry);
    return;
  }
  const kind = found.kind as WaitKind;
  const id = found.key === undefined ? kind : `${kind}\u0000${found.key}`;
  let g = book.groups.get(id);
  if (!g) {
    g = { id, kind, key: found.key, index: found.index ?? -1, members: [], compactAt: 64, bucket: found.bucket };
    book.groups.set(id, g);
  }
  entry.group = g;
  if (g.members.length >= g.compactAt) {
    g.members = g.members.filter((m) => m.c.wait === m && m.c.status === 'ready');
    g.compactAt = Math.max(64, 2 * g.members.length);
  }
  g.members.push(entry);
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
    default:
      return true;
  }
}

const live = (m: WaitEntry) => m.c.wait === m && m.c.status === 'ready';

/** Whether a holder the entry names is not running that attempt any more. */
function holdersEnded(s: SchedulerState, m: WaitEntry): boolean {
  const holders = m.reasons[0]?.holders ?? [];
  for (let i = 0; i < holders.length; i++) {
    const h = holders[i] as WaitHolder;
    const run = s.runs.get(h.runId);
    const c = run?.calls[run.byId.get(h.callId) ?? -1];
    if (!c || c.status !== 'running' || c.attemptStartedAt !== h.since) return true;
  }
  return false;
}

/** Whether a lock waiter's holders ended (or the waiters ahead moved on). */
function watchChanged(m: WaitEntry): boolean {
  const watch = m.watch as ScheduledCall[];
  const attempts = m.watchAttempts as number[];
  const queued = m.reasons[0]?.holders.length === 0;
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
  if (l.globalFull()) return counted(v, 'global', undefined, v.limits.global as number, v.global, () => true);
  if (l.tenantFull(c.tenant)) {
    return counted(v, 'tenant', c.tenant, l.tenantLimit(c.tenant) as number, v.byTenant.get(c.tenant) ?? 0, (h) => h.tenant === c.tenant);
  }
  if (l.runFull(c.runId)) return counted(v, 'perRun', c.runId, v.limits.perRun as number, -1, (h) => h.runId === c.runId);
  if (l.toolFull(c.tool)) return counted(v, 'tool', c.tool, own(v.limits.tool, c.tool) as number, v.byTool.get(c.tool) ?? 0, (h) => h.tool === c.tool);
  const { resources, buckets } = v.limitsOf(c);
  for (const i of resources) {
    const r = v.resourceKeys[i] as { text: string; limit: number; used: number };
    if (r.used < r.limit) continue;
    const f = counted(v, 'resource', r.text, r.limit, r.used, (h) => h.resourceLimits?.includes(i) === true);
    f.index = i;
    return f;
  }
  let latest: { b: Readonly<Bucket>; at: number } | undefined;
  for (const b of buckets) {
    const units = unitsAt(b, s.now);
    if (units >= b.perMs) continue;
    const at = Math.max(b.last, s.now) + Math.ceil((b.perMs - units) / b.cap);
    if (!latest || at > latest.at) latest = { b, at };
  }
  if (latest) {
    const key = bucketName(v, latest.b);
    return { reason: { kind: 'rate', key, limit: latest.b.cap, perMs: latest.b.perMs, retryAt: latest.at, holders: [] }, kind: 'rate', key, bucket: latest.b };
  }
  return c.domain === null ? undefined : lock(s, v, c);
}

/** A full count limit: its holders (the oldest `MAX_HOLDERS`). `inUse` < 0: count them. */
function counted(v: LimiterState, kind: WaitKind, key: string | undefined, limit: number, inUse: number, holds: (h: Holder) => boolean): Found {
  const holders: WaitHolder[] = [];
  let n = 0;
  for (const h of v.running) {
    if (!holds(h)) continue;
    n++;
    if (holders.length < MAX_HOLDERS) holders.push(holderOf(h as ScheduledCall));
    else if (inUse >= 0) break;
  }
  const reason: WaitReason = key === undefined ? { kind, limit, inUse: inUse >= 0 ? inUse : n, holders } : { kind, key, limit, inUse: inUse >= 0 ? inUse : n, holders };
  return { reason, kind, key };
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
  if (watch.length > 0) {
    return { reason: { kind: 'lock', key: key as string, domain: c.domain as string, holders: watch.map(holderOf) }, watch };
  }
  for (const w of v.waiters) {
    if (w === c) break;
    if (!clash(c, w)) continue;
    key ??= heldKey(c, w);
    if (watch.length < MAX_HOLDERS) watch.push(w as ScheduledCall);
  }
  if (watch.length === 0) return undefined;
  const queuedBehind = watch.map((w) => ({ runId: w.runId, callId: w.id, tenant: w.tenant, since: w.wait?.since ?? s.now }));
  return { reason: { kind: 'lock', key: key as string, domain: c.domain as string, holders: [], queuedBehind }, watch };
}

/** The key of `o` that `c` conflicts with: a write of either overlapping the other's read or write. */
function heldKey(c: Holder, o: Holder): string {
  const hit = (mine: readonly Key[], theirs: readonly Key[]) => theirs.find((k) => mine.some((m) => overlaps(m.segs, k.segs)));
  return (hit(c.writes, o.writes) ?? hit(c.writes, o.reads) ?? hit(c.reads, o.writes) ?? { text: '*' }).text;
}

/** A running call as a holder, made once per attempt. */
function holderOf(c: ScheduledCall): WaitHolder {
  const since = c.attemptStartedAt ?? 0;
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
