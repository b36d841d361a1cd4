import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Lease } from '../../src/cluster/lease.js';
import type { LeaseSql } from '../../src/store/postgres/lease.js';

/** An in-memory lease table on the fake clock: what store/postgres/lease.ts does in SQL. */
function fakeSql(now: () => number) {
  const until = new Map<string, number>();
  const log: string[] = [];
  let away = false;
  const sql: LeaseSql = {
    async join(instance, name, leaseMs) {
      if (away) throw new Error('connection refused');
      for (const k of until.keys()) if (k.startsWith(`${name}/`)) until.set(k, 0);
      until.set(instance, now() + leaseMs);
      log.push(`join ${name}`);
    },
    async renew(instance, leaseMs) {
      if (away) throw new Error('connection refused');
      log.push(`renew at ${now()}`);
      if ((until.get(instance) ?? 0) <= now()) return false;
      until.set(instance, now() + leaseMs);
      return true;
    },
    async replaced(instance) {
      return until.get(instance) === 0;
    },
    async held(name) {
      return [...until].some(([k, u]) => k.startsWith(`${name}/`) && u > now());
    },
    async end(instance) {
      until.set(instance, 0);
      log.push('end');
    },
  };
  return { sql, until, log, setAway: (v: boolean) => (away = v) };
}

describe('Lease (cluster/lease.ts) over a fake LeaseSql', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('renews every third of the lease and holds while renewals get through', async () => {
    const db = fakeSql(() => Date.now());
    const lost: string[] = [];
    const lease = new Lease(db.sql, 'r1', 3000, { lost: (reason) => lost.push(reason) });
    const start = Date.now();
    await lease.join();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(lost).toEqual([]);
    expect(lease.holds).toBe(true);
    expect(db.log.filter((l) => l.startsWith('renew')).map((l) => Number(l.split(' ')[2]) - start)).toEqual(
      Array.from({ length: 10 }, (_, i) => (i + 1) * 1000),
    );
    await lease.stop(true);
    expect(db.log.at(-1)).toBe('end');
  });

  it('is lost once, by the watchdog, when no renewal gets through for a whole lease', async () => {
    const db = fakeSql(() => Date.now());
    const lost: string[] = [];
    const lease = new Lease(db.sql, 'r1', 3000, { lost: (reason) => lost.push(reason) });
    await lease.join();
    db.setAway(true);
    await vi.advanceTimersByTimeAsync(2999);
    expect(lost).toEqual([]);
    await vi.advanceTimersByTimeAsync(2);
    expect(lost).toEqual(['no renewal of the lease got through for a whole lease']);
    expect(lease.instance).toBeUndefined();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(lost).toHaveLength(1);
  });

  it('is lost when a later instance of its name joined, which says so; the name stays held while that one lives', async () => {
    const db = fakeSql(() => Date.now());
    const lost: string[] = [];
    const lease = new Lease(db.sql, 'r1', 3000, { lost: (reason) => lost.push(reason) });
    const mine = await lease.join();
    const other = new Lease(db.sql, 'r1', 3000, { lost: () => {} });
    await other.join();
    await vi.advanceTimersByTimeAsync(1000);
    expect(lost).toEqual(['the lease had ended when it was renewed (the process was paused or cut off for longer than the lease)']);
    expect(lease.holds).toBe(false);
    expect(other.holds).toBe(true);
    expect(await lease.replaced(mine)).toBe(true);
    expect(await lease.nameHeld()).toBe(true);
    // The other process stops without a word (kill -9): the name is free once its lease ran out.
    await other.stop(false);
    await vi.advanceTimersByTimeAsync(3001);
    expect(await lease.nameHeld()).toBe(false);
    expect(lost).toHaveLength(1);
  });

  it('a lease that ran out (a pause longer than the lease) is not one a later instance replaced', async () => {
    const db = fakeSql(() => Date.now());
    const lost: string[] = [];
    const lease = new Lease(db.sql, 'r1', 3000, { lost: (reason) => lost.push(reason) });
    const instance = await lease.join();
    db.until.set(instance, Date.now() - 1);
    await vi.advanceTimersByTimeAsync(1000);
    expect(lost).toEqual(['the lease had ended when it was renewed (the process was paused or cut off for longer than the lease)']);
    expect(await lease.replaced(instance)).toBe(false);
    expect(await lease.nameHeld()).toBe(false);
  });
});
