/**
 * `GET /v1/limits` across the cluster (DESIGN §7, §12): every shared limit and lock in use by any
 * replica. One read (`LIMITS_SQL`, store/postgres/limits.ts) gets the permits of live instances (every running call of every
 * replica: its holders and what they count against), the rate buckets, and the wait summaries that the
 * other live replicas publish (wait-summary.ts); this replica's own waiters are counted live. They are
 * counted into a `Limiter` of the shared limits, as permits.ts does to grant, and listed as one replica
 * lists its own (core `limitItems`): `inUse` and the holders from the permits, `waiting` and
 * `longestWaitMs` summed over replicas.
 *
 * `global` and `perRun` stay per replica (`global` protects each replica's host; a run's calls all run
 * where the run is): those items are this replica's own, as are the pauses (`backoff`), which every
 * replica hears of. Times are on the database's clock.
 */
import { Limiter, own, type Bucket, type Holder } from '../core/limits.js';
import { lockHolderOfRow } from './permit-rows.js';
import { limitItems, waitId, type LimitInUse, type WaitCounts } from '../core/scheduler.js';
import type { Catalog, Limits, Rate } from '../core/tool.js';
import { WAIT_KINDS, type WaitHolder } from '../core/waiting.js';
import type { LimitsRow } from '../store/postgres/limits.js';
import type { PublishedWait } from './wait-summary.js';

export type { LimitsRow } from '../store/postgres/limits.js';

/** At most this many running calls are read (the oldest): each is a row of `permits`. */
export const MAX_PERMITS_READ = 10_000;

/** At most this many items are listed. */
export const MAX_LIMIT_ITEMS = 1000;

export interface ClusterLimitsInput {
  row: LimitsRow;
  limits: Limits;
  catalog: Catalog;
  /** This replica's items (its `global` and `perRun` are taken as they are). */
  local: readonly LimitInUse[];
  /** This replica's waiters now, and its clock. */
  mine: { counts: WaitCounts; now: number };
}

/** The cluster's limits and locks in use, in the order of `WAIT_KINDS`, then by key. */
export function clusterLimits(input: ClusterLimitsInput): LimitInUse[] {
  const { row, catalog } = input;
  const now = Number(row.now);
  const { global: _g, perRun: _p, ...shared } = input.limits;
  const limiter = new Limiter(shared);
  const who = new Map<Holder, WaitHolder>();
  for (const p of row.permits) {
    const manifest = catalog.get(p.tool);
    const rate: Rate | undefined = manifest?.rate;
    const keyed = manifest?.keyedConcurrency;
    const h: Holder = {
      ...lockHolderOfRow(p),
      ...(rate ? { toolRate: rate } : {}),
      ...(keyed !== undefined && typeof p.per_key === 'string' ? { keyed, perKey: p.per_key } : {}),
    };
    who.set(h, { runId: p.run_id, callId: p.call_id, tenant: p.tenant, since: Number(p.since) });
    limiter.hold(h);
  }
  const items = limitItems({
    limiter,
    now,
    waiting: waitsOf(input, now),
    holderOf: (h) => who.get(h) as WaitHolder,
    buckets: bucketsOf(input),
  });
  // Pauses (backpressure) are told to every replica: this one's list has them all.
  const local = input.local.filter((i) => i.kind === 'global' || i.kind === 'perRun' || i.kind === 'backoff');
  const rank = (i: LimitInUse) => WAIT_KINDS.indexOf(i.kind);
  // Stable: within a kind, each list keeps its order (by key).
  return [...local, ...items].sort((a, b) => rank(a) - rank(b)).slice(0, MAX_LIMIT_ITEMS);
}

/**
 * Every replica's waiters, summed by limit, with when the longest began waiting on the database's
 * clock: a summary's `since` is on its replica's clock, `clock` that clock at the write, `at` the
 * database's then.
 */
function waitsOf(input: ClusterLimitsInput, now: number): WaitCounts {
  const out: WaitCounts = new Map();
  const add = (id: string, n: number, since: number) => {
    const w = out.get(id);
    if (w) {
      w.n += n;
      w.since = Math.min(w.since, since);
    } else out.set(id, { n, since });
  };
  for (const [id, w] of input.mine.counts) add(id, w.n, now - Math.max(0, input.mine.now - w.since));
  for (const r of input.row.waits) {
    let list: PublishedWait[];
    try {
      list = JSON.parse(r.waits) as PublishedWait[];
    } catch {
      continue;
    }
    if (!Array.isArray(list)) continue;
    for (const w of list) {
      if (typeof w?.n !== 'number' || typeof w.since !== 'number' || !(WAIT_KINDS as readonly string[]).includes(w.kind)) continue;
      add(waitId(w.kind, w.key, w.domain), w.n, Number(r.at) - Math.max(0, Number(r.clock) - w.since));
    }
  }
  return out;
}

/** The shared rate buckets, with the rates they are kept for now (a bucket of a rate no longer set is left out). */
function bucketsOf(input: ClusterLimitsInput): Map<string, Bucket> {
  const out = new Map<string, Bucket>();
  const tenantRates = input.limits.rate.tenant;
  for (const b of input.row.buckets) {
    const [kind, ...rest] = b.name.split(':');
    const name = rest.join(':');
    const rate =
      kind === 'tool'
        ? input.catalog.get(name)?.rate
        : kind === 'tenant'
          ? (own(tenantRates, name) ?? own(tenantRates, 'default'))
          : undefined;
    if (!rate) continue;
    out.set(b.name, { cap: rate.tokens, perMs: rate.perMs, units: Number(b.units), last: Number(b.last) });
  }
  return out;
}
