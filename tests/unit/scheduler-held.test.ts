/**
 * A held run (`onConcurrent: queue`, DESIGN §4) in the pure scheduler: submitted `held`, it is
 * `queued` with nothing planned or started; `release` starts it (`run.started` with `released`); a
 * cancel of a held run ends its calls cancelled without starting any; a restore of its events keeps
 * it held (and a released one running).
 */
import { describe, expect, it } from 'vitest';
import type { CoreEvent } from '../../src/core/events.js';
import { Scheduler } from '../../src/core/scheduler.js';
import { RunProjection } from '../../src/core/view.js';
import { catalogOf, DEFAULTS, limits, tool } from '../helpers/sched.js';

function scheduler(): Scheduler {
  return new Scheduler({
    catalog: catalogOf([tool('work', { reads: [], writes: [], risk: 'read' })]),
    policy: { rules: [] },
    limits: limits(),
    defaults: DEFAULTS,
  });
}

const calls = [
  { id: 'a', tool: 'work', args: {} },
  { id: 'b', tool: 'work', args: {} },
];

describe('a held run', () => {
  it('is queued with nothing started until release, then runs', () => {
    const s = scheduler();
    const log: CoreEvent[] = [];
    const out = s.submit(0, { runId: 'r', tenant: 't', calls, held: true, meta: { concurrencyKey: 'conv' } });
    log.push(...out.events);
    expect(out.events.map((e) => e.type)).toEqual(['run.created']);
    expect(out.events[0]?.data).toMatchObject({ held: true, concurrencyKey: 'conv' });
    expect(out.starts).toEqual([]);
    expect(RunProjection.of(log).view).toMatchObject({ status: 'queued', calls: [{ status: 'pending' }, { status: 'pending' }] });
    expect(s.heldRuns()).toEqual([{ runId: 'r', tenant: 't', concurrencyKey: 'conv' }]);

    const released = s.release(5, 'r');
    log.push(...released.events);
    expect(released.events[0]).toMatchObject({ type: 'run.started', data: { released: true } });
    expect(released.starts.map((x) => x.callId)).toEqual(['a', 'b']);
    expect(RunProjection.of(log).view.status).toBe('running');
    expect(s.heldRuns()).toEqual([]);
    // Releasing again changes nothing.
    expect(s.release(6, 'r').events).toEqual([]);
  });

  it('cancelled while held: its calls end cancelled, none started, the run cancelled', () => {
    const s = scheduler();
    const log = [...s.submit(0, { runId: 'r', tenant: 't', calls, held: true, meta: { concurrencyKey: 'conv' } }).events];
    const out = s.cancel(3, 'r');
    log.push(...out.events);
    expect(out.starts).toEqual([]);
    expect(RunProjection.of(log).view).toMatchObject({ status: 'cancelled', calls: [{ status: 'cancelled' }, { status: 'cancelled' }] });
    expect(s.heldRuns()).toEqual([]);
  });

  it('is still held after a restore of its events, and a released one is not', () => {
    const first = scheduler();
    const held = first.submit(0, { runId: 'r', tenant: 't', calls, held: true, meta: { concurrencyKey: 'conv' } }).events;
    const again = scheduler();
    expect(again.restore(10, held).starts).toEqual([]);
    expect(again.heldRuns()).toEqual([{ runId: 'r', tenant: 't', concurrencyKey: 'conv' }]);
    expect(again.release(11, 'r').starts.map((x) => x.callId)).toEqual(['a', 'b']);

    // Its log up to run.started (the calls not started yet when the process stopped).
    const released = [...held, ...first.release(5, 'r').events.filter((e) => e.type === 'run.started')];
    const third = scheduler();
    expect(third.restore(10, released).starts.map((x) => x.callId)).toEqual(['a', 'b']);
    expect(third.heldRuns()).toEqual([]);
  });
});
