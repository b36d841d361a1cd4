/**
 * Slices of counted limits (cluster/permit-slices.ts), on a virtual clock: a replica grants from a slice
 * only while it has a free place and nobody else waits for the key; a slice grows by at most an eighth
 * of the limit and never past the room the counter has; its free places go back as soon as another
 * replica wants the key (past its even share of the limit, none when that replica waits with a more
 * urgent call; a place freed within the share waits a moment for a call here), and the whole slice
 * once idle; calls that end before their row is written
 * are never written. And, over random sequences, the places granted never pass the slice, and the slice
 * is exactly what the database was told it took less what it was told went back.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chunkOf, SliceBook } from '../../src/cluster/permit-slices.js';
import type { NewPermit } from '../../src/store/postgres/permits.js';
import { permitRequest } from '../helpers/permits.js';

const OPTS = { contendMs: 1000, idleMs: 2000 };
const K = 'tenant:acme';
const permit = (callId: string, runId = 'r1'): NewPermit => ({ ...permitRequest(callId, { runId }), keys: [K], locks: [] });
const counters = (inUse: number, cap = 64, marked = false) => new Map([[K, { cap, inUse, marked }]]);

describe('slices of counted limits', () => {
  it('grants only from free places of a slice, and a place given back is granted again', () => {
    const b = new SliceBook(OPTS);
    expect(b.tryGrant(permit('c0'), [K], 0)).toBe(false);
    b.grew(new Map([[K, 3]]), 0);
    expect([1, 2, 3, 4].map((i) => b.tryGrant(permit(`c${i}`), [K], 1))).toEqual([true, true, true, false]);
    expect(b.sizes().get(K)).toEqual({ size: 3, used: 3 });
    expect(b.release('r1', 'c2', 2)).toBe('freed');
    expect(b.release('r1', 'c2', 2)).toBe(false);
    expect(b.release('r1', 'nope', 2)).toBe(false);
    expect(b.tryGrant(permit('c4'), [K], 3)).toBe(true);
    // A call whose every key must have room: one without a slice is not granted here.
    expect(b.tryGrant(permit('c5'), [K, 'tool:echo'], 3)).toBe(false);
  });

  it('grows by an eighth of the limit at most, within the room of the counter and the limit, for keys asked for only', () => {
    expect([1, 3, 8, 9, 64, 1000].map(chunkOf)).toEqual([1, 1, 1, 2, 8, 125]);
    const b = new SliceBook(OPTS);
    const wanted = new Set([K]);
    const grabs = (...args: Parameters<SliceBook['grabs']>) => b.grabs(...args).grabs;
    const open = (...args: Parameters<SliceBook['grabs']>) => b.grabs(...args).open;
    expect(grabs(counters(0), wanted, 0)).toEqual(new Map([[K, 8]]));
    expect(grabs(counters(60), wanted, 0)).toEqual(new Map([[K, 4]]));
    // A full counter gives nothing more, but stays open: the calls an ask grants take their places in.
    expect(grabs(counters(64), wanted, 0)).toEqual(new Map());
    expect(open(counters(64), wanted, 0)).toEqual(new Set([K]));
    expect(grabs(counters(0), new Set(), 0)).toEqual(new Map());
    expect(open(counters(0), new Set(), 0)).toEqual(new Set());
    // A row with waiter marks of another replica's calls (an urgent waiter elsewhere) is not sliced.
    expect(grabs(counters(0, 64, true), wanted, 0)).toEqual(new Map());
    expect(open(counters(0, 64, true), wanted, 0)).toEqual(new Set());
    // The slice never passes the limit, whatever the counter says.
    b.grew(new Map([[K, 60]]), 0);
    expect(grabs(counters(0), wanted, 0)).toEqual(new Map([[K, 4]]));
    // A contended key is neither grown nor open.
    b.wanted([K], 0);
    expect(grabs(counters(0), wanted, 500)).toEqual(new Map());
    expect(open(counters(0), wanted, 500)).toEqual(new Set());
    expect(grabs(counters(0), wanted, 1000)).toEqual(new Map([[K, 4]]));
  });

  it('gives free places back as soon as another replica wants the key, and every place freed while it is contended', () => {
    const b = new SliceBook(OPTS);
    b.grew(new Map([[K, 8]]), 0);
    for (const c of ['a', 'b', 'c']) expect(b.tryGrant(permit(c), [K], 0)).toBe(true);
    expect(b.cuts(10)).toEqual(new Map());
    expect(b.wanted(['tool:other'], 10)).toBe(false);
    expect(b.wanted([K], 10)).toBe(true);
    expect(b.tryGrant(permit('d'), [K], 20)).toBe(false);
    expect(b.cuts(20)).toEqual(new Map([[K, { n: 5, whole: false }]]));
    expect(b.sizes().get(K)).toEqual({ size: 3, used: 3 });
    expect(b.release('r1', 'a', 30)).toBe('contended');
    expect(b.cuts(30)).toEqual(new Map([[K, { n: 1, whole: false }]]));
    // Once nobody asked for a while, freed places stay in the slice.
    expect(b.release('r1', 'b', 1100)).toBe('freed');
    expect(b.cuts(1100)).toEqual(new Map());
    expect(b.tryGrant(permit('e'), [K], 1100)).toBe(true);
  });

  it('shares a contended limit evenly with the replicas that wait for it, unless one waits with a more urgent call', () => {
    const b = new SliceBook({ ...OPTS, handoffMs: 20 });
    const caps = [8];
    const call = (c: string, priority?: number) => ({ ...permit(c), ...(priority !== undefined ? { priority } : {}) });
    b.grew(new Map([[K, 8]]), 0, new Map([[K, 8]]));
    for (const c of ['a', 'b', 'c', 'd', 'e', 'f']) expect(b.tryGrant(call(c), [K], 0, caps)).toBe(true);
    // Replica r2 waits with a call of the default priority: this one keeps half the limit (4).
    expect(b.wanted([K], 10, { instance: 'r2', priority: new Map([[K, 3]]) })).toBe(true);
    expect(b.shareOf(K, 8, 10)).toBe(4);
    expect(b.tryGrant(call('g'), [K], 10, caps)).toBe(false);
    expect(b.cuts(10)).toEqual(new Map([[K, { n: 2, whole: false }]]));
    // Places freed past the share go back; one freed within it is kept for a moment for a call here.
    for (const c of ['a', 'b']) b.release('r1', c, 11);
    expect(b.cuts(12)).toEqual(new Map([[K, { n: 2, whole: false }]]));
    expect(b.release('r1', 'c', 13)).toBe('contended');
    expect(b.cuts(13)).toEqual(new Map());
    expect(b.keeps(13)).toBe(true);
    expect(b.sizes().get(K)).toEqual({ size: 4, used: 3 });
    expect(b.tryGrant(call('h'), [K], 14, caps)).toBe(true);
    expect(b.tryGrant(call('i'), [K], 14, caps)).toBe(false);
    b.release('r1', 'h', 15);
    expect(b.cuts(40)).toEqual(new Map([[K, { n: 1, whole: false }]]));
    expect(b.keeps(40)).toBe(false);
    // The calls that wait here ask the database once per probe period, or at once after a place freed elsewhere.
    expect(b.sizes().get(K)).toEqual({ size: 3, used: 3 });
    expect(b.probe(K, 41, 25)).toBe(true);
    expect(b.probe(K, 50, 25)).toBe(false);
    expect(b.probe(K, 66, 25)).toBe(true);
    b.probeNow();
    expect(b.probe(K, 67, 25)).toBe(true);
    // A third replica waits too: a third of the limit each (2).
    b.wanted([K], 50, { instance: 'r3', priority: new Map([[K, 3]]) });
    expect(b.shareOf(K, 8, 50)).toBe(2);
    // One waits with a more urgent call (priority 1): nothing for calls of priority 3 here, all for priority 1.
    b.wanted([K], 60, { instance: 'r3', priority: new Map([[K, 1]]) });
    expect(b.shareOf(K, 8, 60)).toBe(0);
    expect(b.shareOf(K, 8, 60, 1)).toBe(2);
    // Once nobody has asked for contendMs, the limit is this replica's again.
    expect(b.isContended(K, 1060)).toBe(false);
    expect(b.release('r1', 'd', 1060)).toBe('freed');
    expect(b.cuts(1060)).toEqual(new Map());
    expect(b.tryGrant(call('j'), [K], 1060, caps)).toBe(true);
  });

  it('gives an unused slice back whole once it has been idle for idleMs', () => {
    const b = new SliceBook(OPTS);
    b.grew(new Map([[K, 8]]), 0);
    expect(b.tryGrant(permit('a'), [K], 0)).toBe(true);
    expect(b.release('r1', 'a', 100)).toBe('freed');
    expect(b.cuts(2099)).toEqual(new Map());
    expect(b.hasFree()).toBe(true);
    expect(b.cuts(2100)).toEqual(new Map([[K, { n: 8, whole: true }]]));
    expect(b.sizes().size).toBe(0);
    expect(b.hasFree()).toBe(false);
  });

  it('lists the calls that still run when rows are written, and unlists those that ended after', () => {
    const b = new SliceBook(OPTS);
    b.grew(new Map([[K, 8]]), 0);
    b.tryGrant(permit('quick'), [K], 0);
    b.tryGrant(permit('long'), [K], 0);
    b.release('r1', 'quick', 5);
    const first = b.takeRows(40);
    expect(first.started.map((h) => [h.permit.callId, h.ageMs])).toEqual([['long', 40]]);
    expect(first.ended).toEqual([]);
    expect(b.hasRows()).toBe(false);
    // Ended and granted again before the next write: its row stays.
    b.release('r1', 'long', 50);
    b.tryGrant(permit('long'), [K], 60);
    expect(b.takeRows(100)).toEqual({ started: [], ended: [] });
    b.release('r1', 'long', 120);
    expect(b.takeRows(140)).toEqual({ started: [], ended: [{ runId: 'r1', callId: 'long' }] });
  });

  it('grants nothing once cleared (the lease ended), and forgets what it held', () => {
    const b = new SliceBook(OPTS);
    b.grew(new Map([[K, 8]]), 0);
    b.tryGrant(permit('a'), [K], 0);
    b.clear();
    expect(b.tryGrant(permit('b'), [K], 1)).toBe(false);
    expect(b.release('r1', 'a', 1)).toBe(false);
    expect(b.takeRows(2)).toEqual({ started: [], ended: [] });
  });

  it('never grants past its slice, and holds exactly what it took less what it gave back (random sequences)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('grant' as const), call: fc.nat(20) }),
      fc.record({ kind: fc.constant('release' as const), call: fc.nat(20) }),
      fc.record({ kind: fc.constant('grow' as const), inUse: fc.nat(80) }),
      fc.record({ kind: fc.constant('want' as const) }),
      fc.record({ kind: fc.constant('cut' as const) }),
      fc.record({ kind: fc.constant('tick' as const), ms: fc.nat(3000) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const b = new SliceBook(OPTS);
        let now = 0;
        let told = 0;
        const running = new Set<number>();
        for (const o of ops) {
          if (o.kind === 'grant') {
            if (b.tryGrant(permit(`c${o.call}`), [K], now)) {
              expect(running.has(o.call)).toBe(false);
              running.add(o.call);
            }
          } else if (o.kind === 'release') expect(Boolean(b.release('r1', `c${o.call}`, now))).toBe(running.delete(o.call));
          else if (o.kind === 'grow') {
            const g = b.grabs(counters(Math.min(64, o.inUse + told)), new Set([K]), now).grabs;
            told += g.get(K) ?? 0;
            b.grew(g, now);
          } else if (o.kind === 'want') b.wanted([K], now);
          else if (o.kind === 'cut') told -= b.cuts(now).get(K)?.n ?? 0;
          else now += o.ms;
          const s = b.sizes().get(K) ?? { size: 0, used: 0 };
          expect(s.used).toBe(running.size);
          expect(s.used).toBeLessThanOrEqual(s.size);
          expect(s.size).toBe(told);
          expect(s.size).toBeLessThanOrEqual(64);
        }
      }),
      { numRuns: 300 },
    );
  });
});
