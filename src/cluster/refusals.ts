/**
 * What refused a permit (DESIGN §7 `waitingFor`, §12): the cluster said no to a call that its own
 * replica's limits let start; this says why (for a rate or a lock, from a core `Limiter` of what is
 * held: permits.ts builds one only on a refusal), in the shape a local wait has (core/waiting.ts): the
 * tenant, tool or resource limit with its key, capacity, use and holders (the oldest running calls of
 * any replica that count against it), a rate bucket with `retryAt`, or a lock with the calls that hold
 * it (or, when none holds it, the earlier asks of the same batch it queues behind).
 */
import { clash, own, type Bucket, type Check, type Holder, type Limiter } from '../core/limits.js';
import { overlaps, type Key } from '../core/resources.js';
import { MAX_HOLDERS, type WaitHolder, type WaitReason } from '../core/waiting.js';

/** Why `limiter` refused `h` (`check`, just made); `who` names running calls and asks as holders. */
export function refusalOf(
  limiter: Limiter,
  h: Holder,
  check: Extract<Check, { ok: false }>,
  who: ReadonlyMap<Holder, WaitHolder>,
): WaitReason | undefined {
  const v = limiter.inspect();
  const holders = (counts: (o: Holder) => boolean): WaitHolder[] => {
    const out: WaitHolder[] = [];
    for (const o of v.running) {
      const w = counts(o) ? who.get(o) : undefined;
      if (w) out.push(w);
      if (out.length === MAX_HOLDERS) break;
    }
    return out;
  };
  switch (check.reason) {
    case 'tenant': {
      const limit = limiter.tenantLimit(h.tenant) as number;
      return { kind: 'tenant', key: h.tenant, limit, inUse: v.byTenant.get(h.tenant) ?? 0, holders: holders((o) => o.tenant === h.tenant) };
    }
    case 'tool':
      return {
        kind: 'tool',
        key: h.tool,
        limit: own(v.limits.tool, h.tool) as number,
        inUse: v.byTool.get(h.tool) ?? 0,
        holders: holders((o) => o.tool === h.tool),
      };
    case 'resource': {
      for (const i of v.resourcesOf(h)) {
        const r = v.resourceKeys[i] as { text: string; limit: number; used: number };
        if (r.used < r.limit) continue;
        return {
          kind: 'resource',
          key: r.text,
          limit: r.limit,
          inUse: r.used,
          holders: holders((o) => o.resourceLimits?.includes(i) === true),
        };
      }
      return undefined;
    }
    case 'rate':
      return rate(limiter, h, check.wakeAt);
    case 'lock':
      return lock(v.running, v.waiters, h, who);
    default:
      return undefined;
  }
}

/** The bucket that has a token again last (`check` refilled them all to now). */
function rate(limiter: Limiter, h: Holder, wakeAt: number | undefined): WaitReason | undefined {
  const v = limiter.inspect();
  let latest: Readonly<Bucket> | undefined;
  let at = 0;
  for (const b of v.bucketsOf(h)) {
    if (b.units >= b.perMs) continue;
    const when = b.last + Math.ceil((b.perMs - b.units) / b.cap);
    if (!latest || when > at) [latest, at] = [b, when];
  }
  if (!latest) return undefined;
  let key = '?';
  for (const [name, b] of v.buckets) if (b === latest) key = name;
  return { kind: 'rate', key, limit: latest.cap, perMs: latest.perMs, retryAt: wakeAt ?? at, holders: [] };
}

/** The running calls in conflict with `h`, else the waiters ahead of it (first come, first served). */
function lock(
  running: ReadonlySet<Holder>,
  waiters: readonly Holder[],
  h: Holder,
  who: ReadonlyMap<Holder, WaitHolder>,
): WaitReason | undefined {
  const domain = h.domain as string;
  const named = (list: Iterable<Holder>, stopAt?: Holder) => {
    const out: WaitHolder[] = [];
    let key: string | undefined;
    for (const o of list) {
      if (o === stopAt) break;
      if (!clash(h, o)) continue;
      key ??= heldKey(h, o);
      const w = who.get(o);
      if (w && out.length < MAX_HOLDERS) out.push(w);
    }
    return { key, out };
  };
  const held = named(running);
  if (held.key !== undefined) return { kind: 'lock', key: held.key, domain, holders: held.out };
  const ahead = named(waiters, h);
  if (ahead.key === undefined) return undefined;
  return { kind: 'lock', key: ahead.key, domain, holders: [], queuedBehind: ahead.out };
}

/** The key of `o` that `h` conflicts with: a write of either overlapping the other's read or write. */
function heldKey(h: Holder, o: Holder): string {
  const hit = (mine: readonly Key[], theirs: readonly Key[]) => theirs.find((k) => mine.some((m) => overlaps(m.segs, k.segs)));
  return (hit(h.writes, o.writes) ?? hit(h.writes, o.reads) ?? hit(h.reads, o.writes) ?? { text: '*' }).text;
}
