// Queue timeouts (DESIGN §4) on the virtual clock: a call ready but not started within its tool's
// `queueTimeoutMs` (else `defaults.queueTimeoutMs`) fails `queue_timeout` and never reaches the tool;
// one that starts in time is not touched, and a retry's wait is its own.
import { describe, expect, it } from 'vitest';
import type { EventOf } from '../../src/core/events.js';
import { PURE, ends, finalStatuses, rig, runStatus, starts, tool } from '../helpers/sched.js';

const calls = (n: number, t: string, ms = 100) => Array.from({ length: n }, (_, i) => ({ id: `c${i + 1}`, tool: t, args: { ms } }));

describe('queue_timeout', () => {
  it("a call not started within its tool's queueTimeoutMs fails queue_timeout and never runs", () => {
    const slow = tool('slow', { ...PURE, queueTimeoutMs: 150 });
    const r = rig({ tools: [slow], limits: { tool: { slow: 1 } } });
    r.submit(0, { calls: calls(3, 'slow') });
    r.run();
    // c2 starts at 100, within 150; c3 would start at 200: it fails at 150 instead.
    expect(starts(r.events)).toEqual(['0 c1', '100 c2']);
    expect(ends(r.events)).toEqual(['100 c1 ok', '150 c3 failed', '200 c2 ok']);
    const failed = r.events.find((e): e is EventOf<'call.failed'> => e.type === 'call.failed');
    expect(failed?.data).toEqual({
      error: {
        code: 'queue_timeout',
        message: 'c3 was ready for 150 ms and did not start (queueTimeoutMs); nothing ran',
        details: { queueTimeoutMs: 150 },
      },
    });
    expect(finalStatuses(r.events)).toEqual({ c1: 'succeeded', c2: 'succeeded', c3: 'failed' });
    expect(runStatus(r.events)).toBe('partial');
  });

  it("defaults.queueTimeoutMs applies to tools without their own; a tool's own wins", () => {
    const own = tool('own', { ...PURE, queueTimeoutMs: 1000 });
    const r = rig({ tools: [tool('plain', PURE), own], limits: { global: 1 }, defaults: { queueTimeoutMs: 50 } });
    r.submit(0, { calls: [...calls(2, 'plain'), { id: 'o1', tool: 'own', args: { ms: 100 } }] });
    r.run();
    expect(starts(r.events)).toEqual(['0 c1', '100 o1']);
    expect(ends(r.events)).toEqual(['50 c2 failed', '100 c1 ok', '200 o1 ok']);
  });

  it('none by default: a call may wait as long as it takes', () => {
    const r = rig({ tools: [tool('t', PURE)], limits: { tool: { t: 1 } } });
    r.submit(0, { calls: calls(3, 't', 10_000) });
    r.run();
    expect(starts(r.events)).toEqual(['0 c1', '10000 c2', '20000 c3']);
  });

  it('what depends on a call that timed out in the queue is blocked, as for any failure', () => {
    const r = rig({ tools: [tool('t', { ...PURE, queueTimeoutMs: 10 })], limits: { tool: { t: 1 } } });
    r.submit(0, { runId: 'r0', calls: [{ id: 'a', tool: 't', args: { ms: 100 } }] });
    r.submit(0, {
      runId: 'r1',
      calls: [
        { id: 'b', tool: 't', args: { ms: 100 } },
        { id: 'c', tool: 't', args: { x: '${b.output.id}' } },
      ],
    });
    r.run();
    expect(finalStatuses(r.events, 'r0')).toEqual({ a: 'succeeded' });
    expect(finalStatuses(r.events, 'r1')).toEqual({ b: 'failed', c: 'blocked' });
  });
});
