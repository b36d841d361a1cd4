// Bookkeeping that the scheduler and the simulation keep for speed, and that could go wrong silently:
// the running calls by id (attempt ends), and the simulation's attempts in flight by call id.
import { describe, expect, it } from 'vitest';
import { PURE, rig, timeline, tool } from './helpers/sched.js';

describe('attempt ends find their call', () => {
  it('with duplicate ids (core batches allow them), an end goes to the last call with the id, as before', () => {
    const r = rig({ tools: [tool('t', PURE)] });
    r.submit(0, { calls: [{ id: 'a', tool: 't', args: { ms: 5 } }, { id: 'a', tool: 't', args: { ms: 7 } }, { id: 'b', tool: 't', args: { ms: 3 } }] });
    r.run();
    // The first `a` is never matched: it stays running, and so does the run.
    expect(timeline(r.events, ['call.started', 'call.succeeded', 'call.failed', 'run.completed'])).toEqual([
      '0 call.started a',
      '0 call.started a',
      '0 call.started b',
      '3 call.succeeded b',
      '7 call.succeeded a',
    ]);
  });

  it('a call started again after a retry is found again for its new attempt', () => {
    const r = rig({ tools: [tool('t', { ...PURE, idempotent: true, retry: { attempts: 3, backoffMs: 1, maxBackoffMs: 1 } })] });
    r.submit(0, { calls: [{ id: 'a', tool: 't', args: { ms: 4, fail: 1, retryable: true } }, { id: 'b', tool: 't', args: { ms: 2 } }] });
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
