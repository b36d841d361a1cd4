/**
 * This replica's side of the slices (cluster/replica-slices.ts), with no database: what it grants at
 * once, what waits here with no round trip (a slice that is the whole limit; a key the database said
 * is full, between two probes: an ask's calls probe together), that only an ask probes (`grantNow` never uses the probe up), which
 * of the calls an ask grants move into the slices, and that a new instance starts with none.
 */
import { describe, expect, it } from 'vitest';
import { claimOf, decide, sharedLimits, type AskRows, type Claim, type Rates } from '../../src/cluster/permit-plan.js';
import { ReplicaSlices, sliceable } from '../../src/cluster/replica-slices.js';
import { parseConfig } from '../../src/config/load.js';
import type { PermitRequest } from '../../src/core/scheduler.js';
import type { PermitAnswer } from '../../src/engine/engine.js';
import type { PgPool } from '../../src/store/pg-pool.js';
import { permitRequest } from '../helpers/permits.js';

const config = parseConfig(
  `
tools:
  - name: echo
    executor: { kind: builtin, name: echo }
  - name: rated
    rate: 5/s
    executor: { kind: builtin, name: echo }
limits:
  tenant: { default: 3 }
`,
  'test',
);
const limits = sharedLimits(config.limits);
const K = 'tenant:acme';
const NO_RATES: Rates = { check: () => ({ ok: true }), take: () => {} };

const req = permitRequest;
const claim = (r: PermitRequest) => claimOf(r, limits, config.catalog);
const rows = (inUse: number): AskRows => ({ counters: new Map([[K, inUse]]), nodes: new Map() });

/** Slices of instance `who()`, with a lease that holds; nothing here reaches the pool. */
function slices(who: () => string | undefined = () => 'i1') {
  let writes = 0;
  const s = new ReplicaSlices({
    pool: undefined as unknown as PgPool,
    instance: who,
    limits,
    catalog: config.catalog,
    holds: () => true,
    paused: () => false,
    retryMs: 1000,
    enqueue: () => writes++,
    book: { contendMs: 3000, idleMs: 2000 },
  });
  return { s, writes: () => writes };
}
/** What a call was told to wait for (a refusal's `waitingFor`). */
const why = (a: PermitAnswer | undefined) => (a && !a.granted ? a.waitingFor : undefined);
const granted = (a: ReturnType<ReplicaSlices['answer']>) => a?.answers.map((x) => (x === undefined ? 'ask' : x.granted ? 'yes' : 'wait'));

describe("a replica's slices", () => {
  it('grant at once while the slice has room; a call it cannot take asks the database', () => {
    const { s } = slices();
    expect(granted(s.answer([req('c0')], true))).toEqual(['ask']);
    s.took('i1', new Map([[K, 2]]), new Set(), new Map([[K, 3]]));
    const a = s.answer([req('c1'), req('c2'), req('c3')], true);
    expect(granted(a)).toEqual(['yes', 'yes', 'ask']);
    expect([a?.granted, a?.refused]).toEqual([2, 0]);
    expect(s.release('r1', 'c1', performance.now())).toBe('freed');
    expect(granted(s.answer([req('c3')], true))).toEqual(['yes']);
  });

  it('a slice that is the whole limit and full: its calls wait here, told which calls hold it, with no round trip', () => {
    const { s } = slices();
    s.answer([], true);
    s.took('i1', new Map([[K, 3]]), new Set(), new Map([[K, 3]]));
    expect(granted(s.answer([req('c1'), req('c2'), req('c3')], true))).toEqual(['yes', 'yes', 'yes']);
    // Also from `grantNow` (not asking): nothing else could grant it.
    for (const asking of [true, false]) {
      const a = s.answer([req('c4')], asking);
      expect(granted(a)).toEqual(['wait']);
      expect(why(a?.answers[0])?.[0]?.holders.map((h) => h.callId)).toEqual(['c1', 'c2', 'c3']);
    }
  });

  it('of a key the database said is full, the calls of one ask probe it together and the next ask waits here; grantNow never uses the probe up', () => {
    const { s } = slices();
    const claims = [claim(req('c1'))];
    const decided = decide(claims, rows(3), NO_RATES);
    expect(decided.decisions[0]?.granted).toBe(false);
    const told = { kind: 'limit', limit: 'tenant', key: 'acme', capacity: 3, inUse: 3 } as never;
    s.answer([], true);
    s.noteFull(claims, decided, [{ granted: false, waitingFor: [told] }]);
    // grantNow: neither granted nor refused here, and the probe is still there for the ask after it.
    expect(granted(s.answer([req('c1'), req('c2')], false))).toEqual(['ask', 'ask']);
    // The ask's calls of the key go to the database together, as one probe; the next ask's wait here,
    // told what the database said (the next probe is PROBE_MS away, far more than these lines take).
    expect(granted(s.answer([req('c1'), req('c2')], true))).toEqual(['ask', 'ask']);
    const a = s.answer([req('c2')], true);
    expect(granted(a)).toEqual(['wait']);
    expect(why(a?.answers[0])).toEqual([told]);
    // A place freed in the cluster: the next ask probes at once.
    s.probeNow();
    expect(granted(s.answer([req('c2')], true))).toEqual(['ask']);
    // A call of it granted by the database: the key is not full any more.
    const ok = [claim(req('c2'))];
    s.noteFull(ok, decide(ok, rows(2), NO_RATES), [{ granted: true }]);
    expect(granted(s.answer([req('c3'), req('c4')], true))).toEqual(['ask', 'ask']);
  });

  it('an ask moves the calls it grants into the slices only on keys open to them, held, growing or full, and never a call with a lock or a rate', () => {
    const { s } = slices();
    s.answer([], true);
    const claims = [claim(req('c1')), claim(req('c2', { domain: 'd', writes: ['file:/a'] })), claim(req('c3', { tool: 'rated' }))];
    expect(claims.map(sliceable)).toEqual([true, false, false]);
    const decided = decide(claims, rows(0), NO_RATES);
    expect(decided.decisions.map((d) => d.granted)).toEqual([true, true, true]);
    const ids = (m: Set<Claim>) => [...m].map((c) => c.request.callId);
    expect(ids(s.takesInto(claims, decided, new Map([[K, 1]]), new Set([K])))).toEqual(['c1']);
    // Not open to the slices (another replica's more urgent waiter): it stays a permit of its own.
    expect(ids(s.takesInto(claims, decided, new Map([[K, 1]]), new Set()))).toEqual([]);
    // Open, but no slice held, none growing and not full: a call granted on a free key stays a permit.
    expect(ids(s.takesInto(claims, decided, new Map(), new Set([K])))).toEqual([]);
    // Moved calls take their places in the slice that grew for them, and are listed shortly.
    const { s: t, writes } = slices();
    t.answer([], true);
    const lost = t.took('i1', new Map([[K, 1]]), new Set([claims[0] as Claim]), new Map([[K, 3]]));
    expect(lost.size).toBe(0);
    expect(t.book.holds('r1', 'c1')).toBe(true);
    expect(writes()).toBe(0);
  });

  it('slices belong to one instance: a new instance starts with none, and moved calls of the old one are refused', () => {
    let who: string | undefined = 'i1';
    const { s } = slices(() => who);
    s.answer([], true);
    s.took('i1', new Map([[K, 2]]), new Set(), new Map([[K, 3]]));
    expect(granted(s.answer([req('c1')], true))).toEqual(['yes']);
    who = undefined;
    expect(s.answer([req('c2')], true)).toBeUndefined();
    who = 'i2';
    expect(granted(s.answer([req('c2')], true))).toEqual(['ask']);
    const moved = new Set([claim(req('c3'))]);
    expect(s.took('i1', new Map([[K, 1]]), moved, new Map([[K, 3]]))).toEqual(moved);
  });
});
