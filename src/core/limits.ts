/**
 * Limits across every run of an engine (DESIGN §4): global, tenant, tool, per run, resource and rate,
 * plus reader–writer locks on resources between runs.
 *
 * A call starts only when every limit that applies has room; `check()` looks at all of them and
 * `acquire()` takes them all at once, so nothing is ever held while waiting for something else.
 *
 * Locks: a tool's `scope` says who shares its resources. `run`: nobody (never locked across runs);
 * `tenant`: runs of the same tenant; `global`: every run. A call conflicts with a running call of
 * another run in the same domain when a write of one overlaps a read or write of the other. Waiters are
 * served first come, first served: a call that conflicts with an earlier waiter of another run waits
 * behind it, so a writer is never starved by a stream of readers.
 *
 * Keyed limits (DESIGN §4 Flow control): a tool's `concurrency: { limit, per }` counts its running calls
 * per expanded key, and `limits.each` counts, for each key K under a pattern, the running calls whose
 * reads or writes name K: each such key is a *group* (`KeyGroup`), counted while any call holds it.
 * Pauses (backpressure): a tool, or one keyed group of it, that answered 429 (or 503 with Retry-After)
 * starts no call until the time it gave.
 */
import type { Key } from './resources.js';
import { anyOverlap, keyUnder, overlaps, parseKey } from './resources.js';
import type { KeyedConcurrency, Limits, Rate } from './tool.js';

/** Separates the parts of a group's id and of a pause's: no tool name or pattern holds it. */
export const GROUP_SEP = '\u001f';

/**
 * One key of a keyed limit that a call counts against (DESIGN §4): a tool's `concurrency.per` value
 * (`tool` set, `pattern` the template) or a key K under a `limits.each` pattern.
 */
export interface KeyGroup {
  /** `key:<tool><SEP><K>` or `each:<pattern><SEP><K>`: what is counted (one counter row in a cluster). */
  id: string;
  /** The `limits.each` pattern, or the tool's `per` template. */
  pattern: string;
  /** A tool's keyed concurrency: the tool. */
  tool?: string;
  /** The expanded key K (`repo:acme`, `acme/web`). */
  key: string;
  limit: number;
}

/** A `limits.each` pattern, parsed. */
export interface EachPattern {
  text: string;
  segs: readonly string[];
  limit: number;
}

const NO_PATTERNS: readonly EachPattern[] = Object.freeze([]);

/** The `limits.each` patterns of `limits`, parsed. */
export function eachPatterns(limits: Limits): EachPattern[] {
  return Object.entries(limits.each ?? {}).map(([text, limit]) => ({ text, segs: parseKey(text), limit }));
}

/** The keyed groups a call counts against: its tool's `per` key, then each distinct K under each pattern. */
export function keyGroupsOf(h: Holder, each: readonly EachPattern[]): KeyGroup[] {
  const keyed = h.keyed;
  if (keyed === undefined && each.length === 0) return NOTHING;
  let out: KeyGroup[] | undefined;
  if (keyed !== undefined && h.perKey !== undefined)
    out = [{ id: `key:${h.tool}${GROUP_SEP}${h.perKey}`, pattern: keyed.per, tool: h.tool, key: h.perKey, limit: keyed.limit }];
  for (let p = 0; p < each.length; p++) {
    const pat = each[p] as EachPattern;
    for (const list of [h.writes, h.reads]) {
      for (let i = 0; i < list.length; i++) {
        const k = keyUnder(list[i] as Key, pat.segs);
        if (k === undefined) continue;
        const id = `each:${pat.text}${GROUP_SEP}${k}`;
        if (out?.some((g) => g.id === id)) continue;
        (out ??= []).push({ id, pattern: pat.text, key: k, limit: pat.limit });
      }
    }
  }
  return out ?? NOTHING;
}

/** The id of a pause: the tool, or the tool and a keyed group's key. */
export function pauseId(tool: string, key: string | undefined): string {
  return key === undefined ? tool : `${tool}${GROUP_SEP}${key}`;
}

/** A tool (or a keyed group of it) paused by backpressure until `until`. */
export interface Pause {
  tool: string;
  key?: string;
  until: number;
  /** The HTTP status that asked for it (429, 503), if any. */
  status?: number;
}

export interface Holder {
  runId: string;
  tenant: string;
  tool: string;
  /** `global`, `tenant:<t>`, or null for run-scoped tools. */
  domain: string | null;
  reads: readonly Key[];
  writes: readonly Key[];
  toolRate?: Rate | undefined;
  /** Indexes into the resource limits that this call counts against (filled by the limiter). */
  resourceLimits?: number[] | undefined;
  /** The rate buckets this call takes a token from (filled by the limiter). */
  buckets?: Bucket[] | undefined;
  /** Its tool's keyed concurrency, if it has one. */
  keyed?: KeyedConcurrency | undefined;
  /** With `keyed`: the `per` template expanded against the call's args. */
  perKey?: string | undefined;
  /** The keyed groups it counts against (filled by the limiter). */
  groups?: KeyGroup[] | undefined;
}

export type Refusal = 'global' | 'tenant' | 'tool' | 'key' | 'resource' | 'rate' | 'backoff' | 'lock';

export type Check = { ok: true } | { ok: false; reason: Refusal; wakeAt?: number };

/**
 * What a holder counts against when that is nothing (most calls: no resource limit or rate applies),
 * shared, so frozen: two arrays fewer kept per call.
 */
const NOTHING = Object.freeze([]) as unknown as never[];

/** The answers without a time in them (shared, so frozen: a check per candidate call and dispatch). */
const ROOM: Check = Object.freeze({ ok: true });
const REFUSED = {
  global: refusal('global'),
  tenant: refusal('tenant'),
  tool: refusal('tool'),
  key: refusal('key'),
  resource: refusal('resource'),
  lock: refusal('lock'),
};

function refusal(reason: Exclude<Refusal, 'rate' | 'backoff'>): Check {
  return Object.freeze({ ok: false, reason });
}

/**
 * A token bucket kept in whole units of `1/perMs` token (`units = tokens · perMs`): a millisecond adds
 * `cap` units and a start takes `perMs`, so refills on an integer clock are exact integers and a token
 * is there at exactly the millisecond it is earned (floating-point tokens drifted a millisecond late).
 */
export interface Bucket {
  cap: number;
  perMs: number;
  units: number;
  last: number;
}

export interface LimitUsage {
  name: string;
  limit: number;
  used: number;
}

/** A read-only look at a `Limiter` (see `Limiter.inspect`). */
export interface LimiterState {
  readonly limits: Limits;
  readonly byTenant: ReadonlyMap<string, number>;
  readonly byTool: ReadonlyMap<string, number>;
  readonly resourceKeys: readonly { text: string; limit: number; used: number }[];
  readonly buckets: ReadonlyMap<string, Readonly<Bucket>>;
  /** The keyed groups held now, by id: the group and how many running calls count against it. */
  readonly keyUse: ReadonlyMap<string, { group: KeyGroup; used: number }>;
  /** Pauses, by `pauseId` (some may have ended: see `Pause.until`). */
  readonly pauses: ReadonlyMap<string, Pause>;
  /** The running calls, in the order they started. */
  readonly running: ReadonlySet<Holder>;
  /** Lock waiters, first come first. */
  readonly waiters: readonly Holder[];
  runningOf(runId: string): number;
  resourcesOf(h: Holder): readonly number[];
  bucketsOf(h: Holder): readonly Readonly<Bucket>[];
  groupsOf(h: Holder): readonly KeyGroup[];
}

export class Limiter {
  private global = 0;
  private readonly byTenant = new Map<string, number>();
  private readonly byTool = new Map<string, number>();
  private readonly resourceKeys: { text: string; segs: readonly string[]; limit: number; used: number }[];
  private readonly buckets = new Map<string, Bucket>();
  private readonly running = new Set<Holder>();
  /** How many of `running` each run has: a call only clashes with other runs' calls, and when all
   *  that runs is of its own run (one big run, say) the lock check needs no scan of them. */
  private readonly runningPerRun = new Map<string, number>();
  /** The running calls that can clash (a lock domain and resource keys), by domain: a lock check reads only its own. */
  private readonly lockingIn = new Map<string, Set<Holder>>();
  private readonly waiters: Holder[] = [];
  private readonly each: EachPattern[];
  private readonly keyUse = new Map<string, { group: KeyGroup; used: number }>();
  /** The groups of calls without a tool's keyed concurrency, by their (shared) writes and reads lists. */
  private readonly groupCache = new WeakMap<readonly Key[], WeakMap<readonly Key[], KeyGroup[]>>();
  /** The groups of calls of a tool with keyed concurrency, by tool and key, with the `each` groups they were made with (bounded). */
  private readonly perGroups = new Map<string, { keyed: KeyedConcurrency; each: KeyGroup[]; groups: KeyGroup[] }>();
  private readonly pauses = new Map<string, Pause>();
  private state: LimiterState | undefined;
  private seeds: Map<string, { units: number; last: number }> | undefined;

  /** `rates`: false when rate limits are counted elsewhere (several replicas: the cluster's buckets). */
  constructor(
    private readonly limits: Limits,
    private readonly rates = true,
  ) {
    this.resourceKeys = Object.entries(limits.resource).map(([text, limit]) => ({ text, segs: parseKey(text), limit, used: 0 }));
    this.each = eachPatterns(limits);
  }

  /**
   * Pauses a tool, or with `key` one keyed group of it, until `until` (backpressure, DESIGN §4): a later
   * `until` wins. Returns whether this changed anything.
   */
  pause(p: Pause): boolean {
    const id = pauseId(p.tool, p.key);
    const old = this.pauses.get(id);
    if (old && old.until >= p.until) return false;
    this.pauses.set(id, p);
    return true;
  }

  /** The pause that holds `h` back at `now`, if any (ended pauses are forgotten). */
  pausedAt(h: Holder, now: number): Pause | undefined {
    if (this.pauses.size === 0) return undefined;
    const id = h.keyed !== undefined && h.perKey !== undefined ? pauseId(h.tool, h.perKey) : h.tool;
    const p = this.pauses.get(id);
    if (p === undefined) return undefined;
    if (p.until > now) return p;
    this.pauses.delete(id);
    return undefined;
  }

  /** Whether a running call's keyed groups have room for `h`. */
  keyFull(h: Holder): boolean {
    const groups = this.groupsOf(h);
    for (let k = 0; k < groups.length; k++) {
      const g = groups[k] as KeyGroup;
      const u = this.keyUse.get(g.id);
      if (u !== undefined && u.used >= g.limit) return true;
    }
    return false;
  }

  tenantLimit(tenant: string): number | undefined {
    return own(this.limits.tenant, tenant) ?? own(this.limits.tenant, 'default');
  }

  globalFull(): boolean {
    return this.limits.global !== undefined && this.global >= this.limits.global;
  }

  tenantFull(tenant: string): boolean {
    const limit = this.tenantLimit(tenant);
    return limit !== undefined && (this.byTenant.get(tenant) ?? 0) >= limit;
  }

  /** Whether the run has `limits.perRun` calls running (a big batch can't starve concurrent runs). */
  runFull(runId: string): boolean {
    return this.limits.perRun !== undefined && (this.runningPerRun.get(runId) ?? 0) >= this.limits.perRun;
  }

  toolFull(tool: string): boolean {
    const limit = own(this.limits.tool, tool);
    return limit !== undefined && (this.byTool.get(tool) ?? 0) >= limit;
  }

  /**
   * Several replicas (DESIGN §12): whether any limit shared by the cluster applies to `h` (a tenant,
   * tool, resource or rate limit, or a lock: resources in a lock domain). A call under none of them
   * needs no cluster-wide permit.
   */
  shared(h: Holder): boolean {
    if (this.tenantLimit(h.tenant) !== undefined || own(this.limits.tool, h.tool) !== undefined) return true;
    if (
      h.toolRate !== undefined ||
      own(this.limits.rate.tenant, h.tenant) !== undefined ||
      own(this.limits.rate.tenant, 'default') !== undefined
    )
      return true;
    if (h.domain !== null && (h.reads.length > 0 || h.writes.length > 0)) return true;
    if (this.groupsOf(h).length > 0) return true;
    // A tool paused here (it may be no more by the time the cluster is asked: the ask says).
    if (this.pauses.size > 0 && (this.pauses.has(h.tool) || (h.perKey !== undefined && this.pauses.has(pauseId(h.tool, h.perKey)))))
      return true;
    return this.resourceLimitsOf(h).length > 0;
  }

  /** Whether `h` could start now; the earliest time worth trying again when only a rate refuses. */
  check(h: Holder, now: number): Check {
    if (this.globalFull()) return REFUSED.global;
    if (this.tenantFull(h.tenant)) return REFUSED.tenant;
    if (this.toolFull(h.tool)) return REFUSED.tool;
    if (this.pauses.size > 0) {
      const p = this.pausedAt(h, now);
      if (p) return { ok: false, reason: 'backoff', wakeAt: p.until };
    }
    if (this.keyFull(h)) return REFUSED.key;
    // Indexed loops over a holder's lists here: they are mostly the shared frozen empty list, which
    // for…of iterates through the generic (allocating) iterator path, several times slower.
    const limited = this.resourceLimitsOf(h);
    for (let k = 0; k < limited.length; k++) {
      const r = this.resourceKeys[limited[k] as number] as (typeof this.resourceKeys)[number];
      if (r.used >= r.limit) return REFUSED.resource;
    }
    let wakeAt: number | undefined;
    const buckets = this.bucketsOf(h);
    for (let k = 0; k < buckets.length; k++) {
      const b = buckets[k] as Bucket;
      this.refill(b, now);
      if (b.units < b.perMs) {
        const at = b.last + Math.ceil((b.perMs - b.units) / b.cap);
        wakeAt = wakeAt === undefined ? at : Math.max(wakeAt, at);
      }
    }
    if (wakeAt !== undefined) return { ok: false, reason: 'rate', wakeAt };
    if (this.lockConflict(h)) {
      if (!this.waiters.includes(h)) this.waiters.push(h);
      return REFUSED.lock;
    }
    return ROOM;
  }

  acquire(h: Holder, now: number): void {
    this.global++;
    this.byTenant.set(h.tenant, (this.byTenant.get(h.tenant) ?? 0) + 1);
    this.byTool.set(h.tool, (this.byTool.get(h.tool) ?? 0) + 1);
    const limited = this.resourceLimitsOf(h);
    for (let k = 0; k < limited.length; k++) (this.resourceKeys[limited[k] as number] as { used: number }).used++;
    const groups = this.groupsOf(h);
    for (let k = 0; k < groups.length; k++) {
      const g = groups[k] as KeyGroup;
      const u = this.keyUse.get(g.id);
      if (u) u.used++;
      else this.keyUse.set(g.id, { group: g, used: 1 });
    }
    const buckets = this.bucketsOf(h);
    for (let k = 0; k < buckets.length; k++) {
      const b = buckets[k] as Bucket;
      this.refill(b, now);
      b.units -= b.perMs;
    }
    this.running.add(h);
    this.runningPerRun.set(h.runId, (this.runningPerRun.get(h.runId) ?? 0) + 1);
    if (locking(h)) {
      const set = this.lockingIn.get(h.domain as string);
      if (set) set.add(h);
      else this.lockingIn.set(h.domain as string, new Set([h]));
    }
    this.dropWaiter(h);
  }

  /**
   * Several replicas (DESIGN §12): counts a call that runs already elsewhere, like `acquire` but
   * without taking a rate token (it took its token when it started).
   */
  hold(h: Holder): void {
    const buckets = h.buckets;
    h.buckets = NOTHING as Bucket[];
    this.acquire(h, 0);
    h.buckets = buckets;
  }

  /** Several replicas: a rate bucket as the cluster keeps it, used when the bucket is first needed. */
  seedBucket(name: string, units: number, last: number): void {
    (this.seeds ??= new Map()).set(name, { units, last });
  }

  /** The rate buckets in use, by name (`tool:<t>`, `tenant:<t>`), to keep them where the cluster does. */
  rateBuckets(): ReadonlyMap<string, Bucket> {
    return this.buckets;
  }

  release(h: Holder): void {
    if (!this.running.delete(h)) return;
    if (locking(h)) {
      const set = this.lockingIn.get(h.domain as string);
      set?.delete(h);
      if (set?.size === 0) this.lockingIn.delete(h.domain as string);
    }
    const mine = (this.runningPerRun.get(h.runId) as number) - 1;
    if (mine === 0) this.runningPerRun.delete(h.runId);
    else this.runningPerRun.set(h.runId, mine);
    this.global--;
    this.byTenant.set(h.tenant, (this.byTenant.get(h.tenant) as number) - 1);
    this.byTool.set(h.tool, (this.byTool.get(h.tool) as number) - 1);
    const limited = this.resourceLimitsOf(h);
    for (let k = 0; k < limited.length; k++) (this.resourceKeys[limited[k] as number] as { used: number }).used--;
    const groups = this.groupsOf(h);
    for (let k = 0; k < groups.length; k++) {
      const g = groups[k] as KeyGroup;
      const u = this.keyUse.get(g.id);
      if (u === undefined) continue;
      if (--u.used <= 0) this.keyUse.delete(g.id);
    }
  }

  /** A waiter that will not start after all (its call ended or was cancelled). */
  dropWaiter(h: Holder): void {
    const i = this.waiters.indexOf(h);
    if (i >= 0) this.waiters.splice(i, 1);
  }

  /** How full each limit is, for metrics and diagnostics. */
  usage(): LimitUsage[] {
    const out: LimitUsage[] = [];
    if (this.limits.global !== undefined) out.push({ name: 'global', limit: this.limits.global, used: this.global });
    for (const [t, limit] of Object.entries(this.limits.tenant)) out.push({ name: `tenant:${t}`, limit, used: this.byTenant.get(t) ?? 0 });
    for (const [t, limit] of Object.entries(this.limits.tool)) out.push({ name: `tool:${t}`, limit, used: this.byTool.get(t) ?? 0 });
    for (const r of this.resourceKeys) out.push({ name: `resource:${r.text}`, limit: r.limit, used: r.used });
    return out;
  }

  get runningCount(): number {
    return this.global;
  }

  /**
   * What is held and queued now, and which resource limits and buckets a holder counts against: for
   * explaining waits (scheduler/waits.ts), off the hot path. One object, live (not a copy): read it,
   * never change it.
   */
  inspect(): LimiterState {
    return (this.state ??= {
      limits: this.limits,
      byTenant: this.byTenant,
      byTool: this.byTool,
      resourceKeys: this.resourceKeys,
      buckets: this.buckets,
      keyUse: this.keyUse,
      pauses: this.pauses,
      running: this.running,
      waiters: this.waiters,
      runningOf: (runId) => this.runningPerRun.get(runId) ?? 0,
      resourcesOf: (h) => this.resourceLimitsOf(h),
      bucketsOf: (h) => this.bucketsOf(h),
      groupsOf: (h) => this.groupsOf(h),
    });
  }

  private groupsOf(h: Holder): KeyGroup[] {
    if (h.groups) return h.groups;
    if (h.keyed === undefined && this.each.length === 0) return (h.groups = NOTHING);
    // Calls with the same keys (shared, memoized lists: resources.ts) share their `each` groups: found once.
    let each: KeyGroup[] = NOTHING;
    if (this.each.length > 0) {
      let byReads = this.groupCache.get(h.writes);
      if (!byReads) this.groupCache.set(h.writes, (byReads = new WeakMap()));
      let g = byReads.get(h.reads);
      if (!g) byReads.set(h.reads, (g = keyGroupsOf({ ...h, keyed: undefined }, this.each)));
      each = g;
    }
    if (h.keyed === undefined || h.perKey === undefined) return (h.groups = each);
    // A tool's keyed group, with the `each` groups of the call's keys: made once per key and keys.
    const id = `${h.tool}${GROUP_SEP}${h.perKey}`;
    const known = this.perGroups.get(id);
    if (known && known.each === each && known.keyed === h.keyed) return (h.groups = known.groups);
    const own = keyGroupsOf(h, NO_PATTERNS);
    const groups = each.length === 0 ? own : [...own, ...each];
    if (this.perGroups.size >= 10_000) this.perGroups.clear();
    this.perGroups.set(id, { keyed: h.keyed, each, groups });
    return (h.groups = groups);
  }

  private resourceLimitsOf(h: Holder): number[] {
    if (h.resourceLimits) return h.resourceLimits;
    if (this.resourceKeys.length === 0) return (h.resourceLimits = NOTHING);
    const found: number[] = [];
    const hits = (r: { segs: readonly string[] }) => (k: Key) => overlaps(k.segs, r.segs);
    this.resourceKeys.forEach((r, i) => {
      if (h.reads.some(hits(r)) || h.writes.some(hits(r))) found.push(i);
    });
    h.resourceLimits = found.length > 0 ? found : NOTHING;
    return h.resourceLimits;
  }

  private bucketsOf(h: Holder): Bucket[] {
    if (h.buckets) return h.buckets;
    if (!this.rates) return (h.buckets = NOTHING as Bucket[]);
    const tenantRate = own(this.limits.rate.tenant, h.tenant) ?? own(this.limits.rate.tenant, 'default');
    if (!h.toolRate && !tenantRate) return (h.buckets = NOTHING as Bucket[]);
    const out: Bucket[] = [];
    if (h.toolRate) out.push(this.bucket(`tool:${h.tool}`, h.toolRate));
    if (tenantRate) out.push(this.bucket(`tenant:${h.tenant}`, tenantRate));
    return (h.buckets = out);
  }

  private bucket(name: string, rate: Rate): Bucket {
    let b = this.buckets.get(name);
    if (!b) {
      const seed = this.seeds?.get(name);
      b = {
        cap: rate.tokens,
        perMs: rate.perMs,
        units: Math.min(seed?.units ?? Infinity, rate.tokens * rate.perMs),
        last: seed?.last ?? Number.NEGATIVE_INFINITY,
      };
      this.buckets.set(name, b);
    }
    return b;
  }

  private refill(b: Bucket, now: number): void {
    if (b.last === Number.NEGATIVE_INFINITY) {
      b.last = now;
      return;
    }
    if (now <= b.last) return;
    b.units = Math.min(b.cap * b.perMs, b.units + (now - b.last) * b.cap);
    b.last = now;
  }

  private lockConflict(h: Holder): boolean {
    // A call without resource keys clashes with nothing (see `clash`).
    if (!locking(h)) return false;
    const others = this.running.size - (this.runningPerRun.get(h.runId) ?? 0);
    if (others > 0) for (const o of this.lockingIn.get(h.domain as string) ?? NO_HOLDERS) if (clash(h, o)) return true;
    for (const w of this.waiters) {
      if (w === h) break;
      if (clash(h, w)) return true;
    }
    return false;
  }
}

/** Whether a call can clash with another: it has a lock domain and resource keys. */
function locking(h: Holder): boolean {
  return h.domain !== null && (h.reads.length > 0 || h.writes.length > 0);
}

const NO_HOLDERS: ReadonlySet<Holder> = new Set();

/** Whether two calls of different runs in one lock domain conflict: a write of one overlaps the other. */
export function clash(h: Holder, o: Holder): boolean {
  return (
    o.runId !== h.runId &&
    o.domain === h.domain &&
    (anyOverlap(h.writes, o.writes) || anyOverlap(h.writes, o.reads) || anyOverlap(h.reads, o.writes))
  );
}

/** A record's own entry: a tenant or tool named `constructor` or `hasOwnProperty` is no prototype key. */
export function own<T>(record: Record<string, T>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}
