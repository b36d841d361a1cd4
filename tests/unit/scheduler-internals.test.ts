// Bookkeeping that the scheduler and the simulation keep for speed, and that could go wrong silently:
// how attempt ends find their call, the limiter's count of running calls per run (lock checks skip the
// scan when only the call's own run is running), and the simulation's attempts in flight by call id.
import { describe, expect, it } from 'vitest';
import { Simulation } from '../../src/core/simulation.js';
import { PURE, defaultScript, finalStatuses, rig, starts, timeline, tool } from '../helpers/sched.js';

describe('attempt ends find their call', () => {
  it('refuses a batch that uses one id twice, and keeps no run of it', () => {
    const r = rig({ tools: [tool('t', PURE)] });
    const dup = {
      calls: [
        { id: 'a', tool: 't', args: { ms: 5 } },
        { id: 'a', tool: 't', args: { ms: 7 } },
      ],
    };
    r.submit(0, dup);
    expect(() => r.run()).toThrow(/call id a is used in run r1 already/);
    expect(r.events).toEqual([]);
    // No run r1 was left behind: the same id takes a good batch, which runs to the end.
    r.submit(1, { calls: [{ id: 'a', tool: 't', args: { ms: 5 } }] });
    r.run();
    expect(finalStatuses(r.events)).toEqual({ a: 'succeeded' });
  });

  it('a call started again after a retry is found again for its new attempt', () => {
    const r = rig({ tools: [tool('t', { ...PURE, idempotent: true, retry: { attempts: 3, backoffMs: 1, maxBackoffMs: 1 } })] });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 't', args: { ms: 4, fail: 1, retryable: true } },
        { id: 'b', tool: 't', args: { ms: 2 } },
      ],
    });
    r.run();
    expect(timeline(r.events, ['call.started', 'call.retry_scheduled', 'call.succeeded', 'run.completed'])).toEqual([
      '0 call.started a',
      '0 call.started b',
      '2 call.succeeded b',
      '4 call.retry_scheduled a',
      '4 call.started a',
      '8 call.succeeded a',
      '8 run.completed',
    ]);
  });
});

describe('the index hint of an attempt end', () => {
  it('is the call’s place in its run, and a wrong, stale or missing hint still ends the call named by id', () => {
    const r = rig({ tools: [tool('t', PURE)] });
    const calls = ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id, tool: 't', args: { ms: 1 } }));
    const first = r.scheduler.submit(0, { runId: 'r1', tenant: 'acme', calls });
    expect(first.starts.map((s) => [s.callId, s.index])).toEqual([
      ['a', 0],
      ['b', 1],
      ['c', 2],
      ['d', 3],
      ['e', 4],
    ]);
    const ok = { ok: true as const, output: 1 };
    const ends = [
      { runId: 'r1', callId: 'a', index: 0, attempt: 1, result: ok }, // right
      { runId: 'r1', callId: 'b', index: 3, attempt: 1, result: ok }, // another call's place
      { runId: 'r1', callId: 'c', index: 99, attempt: 1, result: ok }, // past the end
      { runId: 'r1', callId: 'd', attempt: 1, result: ok }, // none
      { runId: 'r1', callId: 'e', index: -1, attempt: 1, result: ok }, // not a place
    ];
    const ended = ends.flatMap((e, i) =>
      r.scheduler
        .attemptEnded(1 + i, e)
        .events.filter((ev) => ev.type === 'call.succeeded')
        .map((ev) => ev.callId),
    );
    // (Had b's end been taken for the call at its hint, d, this would read a, d, c, …)
    expect(ended).toEqual(['a', 'b', 'c', 'd', 'e']);
    // An end for an id the run does not have ends nothing, whatever call its hint points at.
    expect(r.scheduler.attemptEnded(9, { runId: 'r1', callId: 'x', index: 0, attempt: 1, result: ok }).events).toEqual([]);
  });
});

describe('simulation: attempts in flight', () => {
  it('tells apart the attempts of calls with one id in two runs, and ends only the aborted one early', () => {
    const r = rig({ tools: [tool('t', PURE)] });
    r.sim.at(0, (now) => r.scheduler.submit(now, { runId: 'r1', tenant: 'acme', calls: [{ id: 'a', tool: 't', args: { ms: 10 } }] }));
    r.sim.at(0, (now) => r.scheduler.submit(now, { runId: 'r2', tenant: 'acme', calls: [{ id: 'a', tool: 't', args: { ms: 20 } }] }));
    r.sim.at(5, (now) => r.scheduler.cancel(now, 'r1'));
    r.run();
    expect(timeline(r.events, ['call.started', 'call.succeeded', 'call.cancelled', 'run.completed'])).toEqual([
      '0 call.started r1/a',
      '0 call.started r2/a',
      '5 call.cancelled r1/a',
      '5 run.completed r1',
      '20 call.succeeded r2/a',
      '20 run.completed r2',
    ]);
  });
});

describe('lock checks with the running calls counted per run', () => {
  it('a run whose own calls come and go still waits for another run’s conflicting call', () => {
    const rw = [
      tool('read', { reads: ['file:{path}'], writes: [], scope: 'tenant' }),
      tool('write', { reads: [], writes: ['file:{path}'], scope: 'tenant' }),
    ];
    const r = rig({ tools: rw });
    r.submit(0, {
      runId: 'r1',
      calls: [
        { id: 'b', tool: 'write', args: { path: '/b', ms: 5 } },
        { id: 'c', tool: 'write', args: { path: '/c', ms: 12 } },
      ],
    });
    r.submit(2, { runId: 'r2', calls: [{ id: 'w', tool: 'write', args: { path: '/a', ms: 20 } }] });
    // Readers of /a arrive while r1, r2 and their own run run calls (r3), and once r1 is done (r4).
    r.sim.at(3, (now) =>
      r.scheduler.submit(now, {
        runId: 'r3',
        tenant: 'acme',
        calls: [
          { id: 'x', tool: 'write', args: { path: '/x', ms: 1 } },
          { id: 'ra', tool: 'read', args: { path: '/a', ms: 1 } },
        ],
      }),
    );
    r.sim.at(15, (now) =>
      r.scheduler.submit(now, { runId: 'r4', tenant: 'acme', calls: [{ id: 'ra', tool: 'read', args: { path: '/a', ms: 1 } }] }),
    );
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/b', '0 r1/c', '2 r2/w', '3 r3/x', '22 r3/ra', '22 r4/ra']);
  });
});

describe('simulation: record: false', () => {
  it('keeps no events or starts, hands every event to onEvent, and schedules as a recording one does', () => {
    const calls = [
      { id: 'a', tool: 'write', args: { path: '/a', ms: 5 } },
      { id: 'b', tool: 'read', args: { path: '/a', ms: 3 } },
      { id: 'c', tool: 'read', args: { path: '/c', ms: 4 } },
    ];
    const tools = [tool('write', { reads: [], writes: ['file:{path}'] }), tool('read', { reads: ['file:{path}'], writes: [] })];
    const recorded = rig({ tools });
    recorded.submit(0, { calls });
    recorded.run();
    const seen: string[] = [];
    const bare = new Simulation(rig({ tools }).scheduler, {
      attempt: defaultScript,
      record: false,
      onEvent: (e) => seen.push(`${e.at} ${e.type} ${e.callId ?? ''}`),
    });
    bare.at(0, (now) => bare.scheduler.submit(now, { runId: 'r1', tenant: 'acme', calls }));
    bare.run();
    expect(bare.events).toEqual([]);
    expect(bare.starts).toEqual([]);
    expect(seen).toEqual(recorded.events.map((e) => `${e.at} ${e.type} ${e.callId ?? ''}`));
    expect(seen).toContain('5 call.started b');
  });
});
