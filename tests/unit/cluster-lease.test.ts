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

  it('is lost when a renewal finds it ended (another process of its name joined)', async () => {
    const db = fakeSql(() => Date.now());
    const lost: string[] = [];
    const lease = new Lease(db.sql, 'r1', 3000, { lost: (reason) => lost.push(reason) });
    await lease.join();
    const other = new Lease(db.sql, 'r1', 3000, { lost: () => {} });
    await other.join();
    await vi.advanceTimersByTimeAsync(1000);
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatch(/had ended when it was renewed/);
    await other.stop(false);
  });
});
