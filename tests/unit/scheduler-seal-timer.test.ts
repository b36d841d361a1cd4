// An open run's seal timer (DESIGN §10) is the next wake-up only while the run is open: once it was
// sealed or ended, `nextWakeAt` no longer names it, so an engine with nothing else to do holds no timer.
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/core/scheduler.js';
import { catalogOf, DEFAULTS, limits, tool } from '../helpers/sched.js';

function scheduler() {
  return new Scheduler({
    catalog: catalogOf([tool('echo', { reads: [], writes: [] })]),
    policy: { rules: [] },
    limits: limits(),
    defaults: { ...DEFAULTS, openRunTimeoutMs: 30_000 },
  });
}

describe('the seal timer of an open run', () => {
  it('is the next wake-up while the run is open, and is gone once it is sealed', () => {
    const s = scheduler();
    s.submit(1000, { runId: 'r1', tenant: 't', calls: [], open: true });
    expect(s.nextWakeAt()).toBe(31_000);
    s.append(1001, 'r1', [{ id: 'a', tool: 'echo', args: {} }]);
    expect(s.nextWakeAt()).toBe(31_000);
    s.attemptEnded(1002, { runId: 'r1', callId: 'a', index: 0, attempt: 1, kind: 'call', result: { ok: true, output: {} } });
    s.seal(1003, 'r1');
    expect(s.nextWakeAt()).toBeUndefined();
    // Firing at the old instant changes nothing: the run had ended.
    expect(s.tick(31_000).events).toEqual([]);
  });

  it("of one run does not hide another open run's", () => {
    const s = scheduler();
    s.submit(1000, { runId: 'r1', tenant: 't', calls: [], open: true });
    s.submit(2000, { runId: 'r2', tenant: 't', calls: [], open: true });
    s.seal(2001, 'r1');
    expect(s.nextWakeAt()).toBe(32_000);
    const sealed = s.tick(32_000).events.filter((e) => e.type === 'run.sealed');
    expect(sealed.map((e) => [e.runId, (e.data as { reason?: string }).reason])).toEqual([['r2', 'openRunTimeoutMs']]);
  });
});
