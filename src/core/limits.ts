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
 */
import type { Key } from './resources.js';
import { anyOverlap, overlaps, parseKey } from './resources.js';
import type { Limits, Rate } from './tool.js';

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
}

export type Refusal = 'global' | 'tenant' | 'tool' | 'resource' | 'rate' | 'lock';

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
  resource: refusal('resource'),
  lock: refusal('lock'),
};

function refusal(reason: Exclude<Refusal, 'rate'>): Check {
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
  /** The running calls, in the order they started. */
  readonly running: ReadonlySet<Holder>;
  /** Lock waiters, first come first. */
  readonly waiters: readonly Holder[];
  runningOf(runId: string): number;
  resourcesOf(h: Holder): readonly number[];
  bucketsOf(h: Holder): readonly Readonly<Bucket>[];
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
  private readonly waiters: Holder[] = [];
  private state: LimiterState | undefined;
  private seeds: Map<string, { units: number; last: number }> | undefined;

  /** `rates`: false when rate limits are counted elsewhere (several replicas: the cluster's buckets). */
  constructor(
    private readonly limits: Limits,
    private readonly rates = true,
  ) {
    this.resourceKeys = Object.entries(limits.resource).map(([text, limit]) => ({ text, segs: parseKey(text), limit, used: 0 }));
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
    return this.resourceLimitsOf(h).length > 0;
  }

  /** Whether `h` could start now; the earliest time worth trying again when only a rate refuses. */
  check(h: Holder, now: number): Check {
    if (this.globalFull()) return REFUSED.global;
    if (this.tenantFull(h.tenant)) return REFUSED.tenant;
    if (this.toolFull(h.tool)) return REFUSED.tool;
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
    const buckets = this.bucketsOf(h);
    for (let k = 0; k < buckets.length; k++) {
      const b = buckets[k] as Bucket;
      this.refill(b, now);
      b.units -= b.perMs;
    }
    this.running.add(h);
    this.runningPerRun.set(h.runId, (this.runningPerRun.get(h.runId) ?? 0) + 1);
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
    const mine = (this.runningPerRun.get(h.runId) as number) - 1;
    if (mine === 0) this.runningPerRun.delete(h.runId);
    else this.runningPerRun.set(h.runId, mine);
    this.global--;
    this.byTenant.set(h.tenant, (this.byTenant.get(h.tenant) as number) - 1);
    this.byTool.set(h.tool, (this.byTool.get(h.tool) as number) - 1);
    const limited = this.resourceLimitsOf(h);
    for (let k = 0; k < limited.length; k++) (this.resourceKeys[limited[k] as number] as { used: number }).used--;
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
      running: this.running,
      waiters: this.waiters,
      runningOf: (runId) => this.runningPerRun.get(runId) ?? 0,
      resourcesOf: (h) => this.resourceLimitsOf(h),
      bucketsOf: (h) => this.bucketsOf(h),
    });
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
    if (h.domain === null) return false;
    const others = this.running.size - (this.runningPerRun.get(h.runId) ?? 0);
    if (others > 0) for (const o of this.running) if (clash(h, o)) return true;
    for (const w of this.waiters) {
      if (w === h) break;
      if (clash(h, w)) return true;
    }
    return false;
  }
}

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
