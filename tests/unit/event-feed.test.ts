/**
 * The feed's following (cluster/feed.ts) on a virtual clock, over a store, notifications and follower
 * rows of the test's own: it follows from its first reader, renews while readers come, stops after a
 * whole renewal with none, writes its row one write after another, and reads every subscription again
 * once the row is written and once `settleMs` later.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { EventFeed, type Following } from '../../src/cluster/feed.js';
import type { Notifications } from '../../src/cluster/notifications.js';
import type { RunEvent } from '../../src/core/events.js';
import type { Store } from '../../src/store/types.js';

const RENEW = 1000;
const SETTLE = 50;

function setup() {
  const log: string[] = [];
  const stored: RunEvent[] = [];
  let reads = 0;
  const store = {
    async events(runId: string, after: number) {
      reads++;
      return stored.filter((e) => e.runId === runId && e.seq > after);
    },
  } as unknown as Store;
  const listeners = new Map<string, (payload: string) => void>();
  const notifications = { on: (ch: string, l: (p: string) => void) => listeners.set(ch, l) } as unknown as Notifications;
  const pending: { op: string; resolve: () => void; reject: (e: Error) => void }[] = [];
  const following: Following = {
    follow: (ttlMs) =>
      new Promise<void>((resolve, reject) => {
        log.push(`follow ${ttlMs}`);
        pending.push({ op: 'follow', resolve, reject });
      }),
    unfollow: () =>
      new Promise<void>((resolve, reject) => {
        log.push('unfollow');
        pending.push({ op: 'unfollow', resolve, reject });
      }),
  };
  const feed = new EventFeed(store, notifications, following, { pollMs: 60_000, renewMs: RENEW, settleMs: SETTLE });
  const event = (runId: string, seq: number): RunEvent =>
    ({ runId, seq, type: 'call.started', at: seq, callId: 'c', data: {} }) as RunEvent;
  /** Answers the oldest row write. */
  const answer = async (ok = true) => {
    await vi.advanceTimersByTimeAsync(0);
    const p = pending.shift();
    if (!p) throw new Error('no row write is pending');
    if (ok) p.resolve();
    else p.reject(new Error('database away'));
    await vi.advanceTimersByTimeAsync(0);
    return p.op;
  };
  return { feed, log, stored, event, answer, pending, reads: () => reads, notify: (p: string) => listeners.get('toolgraph_events')?.(p) };
}

describe('EventFeed following', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('does not follow without a reader; follows once from the first, for three renewals', async () => {
    const t = setup();
    expect(t.feed.follows).toBe(false);
    t.feed.subscribe('r1', 0, () => {});
    t.feed.subscribe('r2', 0, () => {});
    expect(t.feed.follows).toBe(true);
    await vi.advanceTimersByTimeAsync(0);
    expect(t.log).toEqual([`follow ${RENEW * 3}`]);
  });

  it('reads every subscription again once its row is written, and once more settleMs later', async () => {
    const t = setup();
    const got: number[] = [];
    t.feed.subscribe('r1', 0, (es) => got.push(...es.map((e) => e.seq)));
    await vi.advanceTimersByTimeAsync(0);
    expect(got).toEqual([]);
    // An append that began before the row was visible: stored, never announced.
    t.stored.push(t.event('r1', 1));
    expect(await t.answer()).toBe('follow');
    expect(got).toEqual([1]);
    t.stored.push(t.event('r1', 2));
    await vi.advanceTimersByTimeAsync(SETTLE - 1);
    expect(got).toEqual([1]);
    await vi.advanceTimersByTimeAsync(1);
    expect(got).toEqual([1, 2]);
    // From then on a notification brings what it announces.
    t.stored.push(t.event('r1', 3));
    t.notify('r1:3');
    await vi.advanceTimersByTimeAsync(0);
    expect(got).toEqual([1, 2, 3]);
  });

  it('renews while readers come, stops after a whole renewal with none, and follows again for a new reader', async () => {
    const t = setup();
    const stop = t.feed.subscribe('r1', 0, () => {});
    await t.answer();
    await vi.advanceTimersByTimeAsync(RENEW);
    expect(t.log).toEqual([`follow ${RENEW * 3}`, `follow ${RENEW * 3}`]);
    await t.answer();
    stop();
    // The reader left: one more renewal (it was there at the last one), then the row goes.
    await vi.advanceTimersByTimeAsync(RENEW);
    expect(t.log.at(-1)).toBe(`follow ${RENEW * 3}`);
    expect(t.feed.follows).toBe(true);
    await t.answer();
    await vi.advanceTimersByTimeAsync(RENEW);
    expect(t.log.at(-1)).toBe('unfollow');
    expect(t.feed.follows).toBe(false);
    await t.answer();
    await vi.advanceTimersByTimeAsync(RENEW * 5);
    expect(t.log.filter((l) => l === 'unfollow')).toHaveLength(1);
    // A listener of every run's changes is a reader too.
    t.feed.onRunChanged(() => {});
    await vi.advanceTimersByTimeAsync(0);
    expect(t.log.at(-1)).toBe(`follow ${RENEW * 3}`);
    expect(t.feed.follows).toBe(true);
  });

  it('a reader that comes and goes between renewals keeps the row one renewal more', async () => {
    for (const transient of [false, true]) {
      const t = setup();
      const stop = t.feed.subscribe('r1', 0, () => {});
      await t.answer();
      stop();
      // The first renewal still sees the reader that just left.
      await vi.advanceTimersByTimeAsync(RENEW);
      await t.answer();
      await vi.advanceTimersByTimeAsync(RENEW / 2);
      if (transient) t.feed.subscribe('r2', 0, () => {})();
      await vi.advanceTimersByTimeAsync(RENEW / 2);
      expect(t.log).toEqual(
        transient
          ? [`follow ${RENEW * 3}`, `follow ${RENEW * 3}`, `follow ${RENEW * 3}`]
          : [`follow ${RENEW * 3}`, `follow ${RENEW * 3}`, 'unfollow'],
      );
      t.feed.close();
    }
  });

  it('writes its row one write after another: an unfollow never overtakes the follow after it', async () => {
    const t = setup();
    t.feed.subscribe('r1', 0, () => {})();
    await vi.advanceTimersByTimeAsync(RENEW * 2);
    // The first follow is still unanswered: nothing else was sent meanwhile.
    expect(t.log).toEqual([`follow ${RENEW * 3}`]);
    await t.answer();
    await t.answer();
    expect(t.log).toEqual([`follow ${RENEW * 3}`, `follow ${RENEW * 3}`, 'unfollow']);
    t.feed.subscribe('r1', 0, () => {});
    expect(t.log).toEqual([`follow ${RENEW * 3}`, `follow ${RENEW * 3}`, 'unfollow']);
    expect(await t.answer()).toBe('unfollow');
    expect(t.log.at(-1)).toBe(`follow ${RENEW * 3}`);
  });

  it('a row write that fails is written at the next renewal; close gives the row up', async () => {
    const t = setup();
    t.feed.subscribe('r1', 0, () => {});
    const readsBefore = t.reads();
    await t.answer(false);
    // No read again for a row that was not written.
    expect(t.reads()).toBe(readsBefore);
    await vi.advanceTimersByTimeAsync(RENEW);
    expect(t.log).toEqual([`follow ${RENEW * 3}`, `follow ${RENEW * 3}`]);
    await t.answer();
    t.feed.close();
    expect(t.feed.follows).toBe(false);
    await vi.advanceTimersByTimeAsync(0);
    expect(t.log.at(-1)).toBe('unfollow');
    t.feed.subscribe('r2', 0, () => {});
    await vi.advanceTimersByTimeAsync(0);
    expect(t.log.at(-1)).toBe('unfollow');
  });
});
