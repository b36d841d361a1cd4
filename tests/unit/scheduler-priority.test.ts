// Priority and fairness (DESIGN §4) on the virtual clock: the more urgent run goes first, a waiting
// run gains a level every `limits.priorityAgingMs` so nothing starves, and within a level tenants share
// by weight (weighted round robin). Exact start orders.
import { describe, expect, it } from 'vitest';
import type { EventOf } from '../../src/core/events.js';
import { PURE, concurrency, rig, runStatus, starts, tool } from '../helpers/sched.js';

const calls = (prefix: string, n: number, args: Record<string, unknown> = {}) =>
  Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i + 1}`, tool: 'pure', args: { ...args } }));

describe('priority', () => {
  it("an urgent run submitted after a background run's calls are waiting starts first", () => {
    const r = rig({ tools: [tool('pure', PURE)], limits: { global: 1 } });
    r.submit(0, { runId: 'bg', priority: 5, calls: calls('b', 4) });
    r.submit(5, { runId: 'urgent', priority: 1, calls: calls('u', 2) });
    r.run();
    expect(starts(r.events)).toEqual(['0 bg/b1', '10 urgent/u1', '20 urgent/u2', '30 bg/b2', '40 bg/b3', '50 bg/b4']);
    expect(concurrency(r.events).max).toBe(1);
    const created = r.events.find((e): e is EventOf<'run.created'> => e.type === 'run.created' && e.runId === 'urgent');
    expect(created?.data.priority).toBe(1);
  });

  it('without priorities the earlier run goes first (the order before priorities, unchanged)', () => {
    const r = rig({ tools: [tool('pure', PURE)], limits: { global: 1 } });
    r.submit(0, { runId: 'bg', calls: calls('b', 2) });
    r.submit(5, { runId: 'urgent', calls: calls('u', 2) });
    r.run();
    expect(starts(r.events)).toEqual(['0 bg/b1', '10 bg/b2', '20 urgent/u1', '30 urgent/u2']);
  });

  /**
   * A run of priority 5 submitted at 0 behind a priority-1 run that holds the only slot, and a steady
   * stream of priority-1 runs, one every 10 ms from 5 ms, of one 10 ms call each: when the slot frees,
   * a priority-1 run always waits.
   */
  function stream(agingMs: number) {
    const r = rig({ tools: [tool('pure', PURE)], limits: { global: 1, priorityAgingMs: agingMs } });
    r.submit(0, { runId: 's000', priority: 1, calls: calls('c', 1) });
    r.submit(0, { runId: 'low', priority: 5, calls: calls('l', 2) });
    for (let t = 5; t < 1000; t += 10) r.submit(t, { runId: `s${String(t).padStart(3, '0')}`, priority: 1, calls: calls('c', 1) });
    r.run();
    return r;
  }

  it('aging lets a priority-5 run through a steady stream of priority-1 runs', () => {
    const r = stream(100);
    const low = starts(r.events).filter((x) => x.includes('low/'));
    // Level 5 at 0, 4 at 100, … 1 at 400: then it is as urgent as the stream, and arrived earlier. Its
    // second call has waited as long, so it goes next too.
    expect(low).toEqual(['400 low/l1', '410 low/l2']);
    // Before 400, only the stream started (one at a time, every 10 ms).
    const before = starts(r.events).filter((x) => Number(x.split(' ')[0]) < 400);
    expect(before).toHaveLength(40);
    expect(before.every((x) => x.includes('/c1'))).toBe(true);
    expect(runStatus(r.events, 'low')).toBe('succeeded');
  });

  it('without aging (a very long period) the priority-5 run waits for the whole stream', () => {
    const r = stream(1_000_000);
    expect(starts(r.events).filter((x) => x.includes('low/'))).toEqual(['1010 low/l1', '1020 low/l2']);
  });
});

describe('fairness between tenants', () => {
  it('within a priority, tenants share by weight (weighted round robin)', () => {
    const r = rig({ tools: [tool('pure', PURE)], limits: { global: 1, weights: { heavy: 3 } } });
    // A first run holds the only slot while both tenants' runs arrive.
    r.submit(0, { runId: 'first', tenant: 'other', calls: calls('f', 1, { ms: 5 }) });
    r.submit(0, { runId: 'h', tenant: 'heavy', calls: calls('h', 7) });
    r.submit(0, { runId: 'l', tenant: 'light', calls: calls('l', 3) });
    r.run();
    const who = starts(r.events).map((x) => x.split(' ')[1]?.slice(0, 1));
    expect(who.join('')).toBe('fhhhlhhhlhl');
    // Without weights: one turn each.
    const even = rig({ tools: [tool('pure', PURE)], limits: { global: 1 } });
    even.submit(0, { runId: 'first', tenant: 'other', calls: calls('f', 1, { ms: 5 }) });
    even.submit(0, { runId: 'h', tenant: 'heavy', calls: calls('h', 4) });
    even.submit(0, { runId: 'l', tenant: 'light', calls: calls('l', 3) });
    even.run();
    expect(
      starts(even.events)
        .map((x) => x.split(' ')[1]?.slice(0, 1))
        .join(''),
    ).toBe('fhlhlhlh');
  });

  it('a more urgent run of a light tenant still goes before a heavy tenant', () => {
    const r = rig({ tools: [tool('pure', PURE)], limits: { global: 1, weights: { heavy: 3 } } });
    r.submit(0, { runId: 'first', tenant: 'other', calls: calls('f', 1, { ms: 5 }) });
    r.submit(0, { runId: 'h', tenant: 'heavy', calls: calls('h', 4) });
    r.submit(0, { runId: 'l', tenant: 'light', priority: 2, calls: calls('l', 2) });
    r.run();
    expect(starts(r.events).map((x) => x.split(' ')[1])).toEqual(['first/f1', 'l/l1', 'l/l2', 'h/h1', 'h/h2', 'h/h3', 'h/h4']);
  });
});
