// Human review (DESIGN §5) and plan-time cycles (DESIGN §3) through the scheduler, on the virtual clock.
import { describe, expect, it } from 'vitest';
import type { CoreEvent, EventOf } from '../../src/core/events.js';
import { SchedulerError } from '../../src/core/scheduler.js';
import { PURE, ends, finalStatuses, illegalMoves, rig, runStatus, starts, timeline, tool } from '../helpers/sched.js';

const input = { type: 'object', properties: { name: { type: 'string' }, ms: { type: 'integer' } }, required: ['name'] };
const tools = [tool('danger', { ...PURE, risk: 'dangerous', input }), tool('pure', PURE), tool('reader', { ...PURE, risk: 'read' })];
const batch = [
  { id: 'x', tool: 'danger', args: { name: 'n', ms: 10 } },
  { id: 'y', tool: 'pure', args: { from: '${x.output.id}' } },
  { id: 'z', tool: 'pure', args: { ms: 5 } },
];
const decided = (events: CoreEvent[]) => events.filter((e) => e.type === 'review.decided').map((e) => e.data);

describe('review', () => {
  it('a dangerous call waits in awaiting_review; approve lets it run', () => {
    const r = rig({ tools });
    r.submit(0, { calls: batch });
    r.sim.at(50, (now) => r.scheduler.decideReview(now, { runId: 'r1', callId: 'x', decision: 'approve', comment: 'fine' }));
    r.run();
    expect(timeline(r.events).filter((l) => / x$| y$|run\.completed/.test(l))).toEqual([
      '0 call.awaiting_review x',
      '50 review.decided x',
      '50 call.ready x',
      '50 call.started x',
      '60 call.succeeded x',
      '60 call.ready y',
      '60 call.started y',
      '70 call.succeeded y',
      '70 run.completed',
    ]);
    expect(r.events.find((e) => e.type === 'call.awaiting_review')?.data).toMatchObject({ args: { name: 'n', ms: 10 } });
    expect(decided(r.events)).toEqual([{ decision: 'approve', comment: 'fine' }]);
    expect(starts(r.events)).toEqual(['0 z', '50 x', '60 y']);
    expect(runStatus(r.events)).toBe('succeeded');
    expect(illegalMoves(r.events)).toEqual([]);
  });

  it('an edit with invalid args throws and the call keeps waiting; a valid edit runs with the new args', () => {
    const r = rig({ tools });
    r.submit(0, { calls: batch });
    r.run(); // settles at 5: x waits for a human, y for x
    expect(finalStatuses(r.events)).toEqual({ x: 'awaiting_review', y: 'pending', z: 'succeeded' });
    const before = r.events.length;
    let thrown: unknown;
    try {
      r.scheduler.decideReview(10, { runId: 'r1', callId: 'x', decision: 'edit', args: { name: 5 } });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(SchedulerError);
    expect((thrown as SchedulerError).code).toBe('invalid_args');
    expect(() => r.scheduler.decideReview(10, { runId: 'r1', callId: 'x', decision: 'edit' })).toThrow(
      expect.objectContaining({ code: 'invalid_args' }),
    );
    expect(() => r.scheduler.decideReview(10, { runId: 'r1', callId: 'z', decision: 'approve' })).toThrow(
      expect.objectContaining({ code: 'conflict' }),
    );
    expect(() => r.scheduler.decideReview(10, { runId: 'r1', callId: 'nope', decision: 'approve' })).toThrow(
      expect.objectContaining({ code: 'call_not_found' }),
    );
    expect(r.events.length).toBe(before);
    expect(r.scheduler.runStatus('r1')).toBe('running');

    r.sim.at(20, (now) => r.scheduler.decideReview(now, { runId: 'r1', callId: 'x', decision: 'edit', args: { name: 'm', ms: 3 } }));
    r.run();
    expect(decided(r.events)).toEqual([{ decision: 'edit', args: { name: 'm', ms: 3 } }]);
    expect(starts(r.events)).toEqual(['0 z', '20 x', '23 y']);
    expect(r.events.find((e): e is EventOf<'call.started'> => e.type === 'call.started' && e.callId === 'x')?.data.args).toEqual({
      name: 'm',
      ms: 3,
    });
    expect(r.sim.starts.find((s) => s.start.callId === 'x')?.start.args).toEqual({ name: 'm', ms: 3 });
    expect(runStatus(r.events)).toBe('succeeded');
    expect(illegalMoves(r.events)).toEqual([]);
  });

  it('reject fails the call with review_rejected and blocks what depends on it', () => {
    const r = rig({ tools });
    r.submit(0, { calls: batch });
    r.sim.at(30, (now) => r.scheduler.decideReview(now, { runId: 'r1', callId: 'x', decision: 'reject', comment: 'too risky' }));
    r.run();
    expect(ends(r.events)).toEqual(['5 z ok', '30 x failed', '30 y blocked']);
    const err = r.events.find((e) => e.type === 'call.failed')?.data.error as { code: string; message: string };
    expect(err.code).toBe('review_rejected');
    expect(err.message).toContain('too risky');
    expect(r.events.find((e) => e.type === 'call.blocked')?.data.blockedBy).toMatchObject({ code: 'dependency_failed', callId: 'x' });
    expect(starts(r.events)).toEqual(['0 z']);
    expect(runStatus(r.events)).toBe('partial');
    expect(illegalMoves(r.events)).toEqual([]);
  });

  it('policy: review: true on any tool, review: false waives the default review of a dangerous tool', () => {
    const r = rig({
      tools,
      policy: {
        rules: [
          { match: { tool: 'reader' }, review: true },
          { match: { tool: 'danger' }, review: false },
        ],
      },
    });
    r.submit(0, {
      calls: [
        { id: 'd', tool: 'danger', args: { name: 'n' } },
        { id: 'rd', tool: 'reader' },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 d']);
    expect(finalStatuses(r.events)).toEqual({ d: 'succeeded', rd: 'awaiting_review' });
    expect(r.scheduler.runStatus('r1')).toBe('running'); // a run awaiting a human is not deadlocked
  });

  it('a call awaiting review holds no limit', () => {
    const r = rig({ tools, limits: { global: 1 } });
    r.submit(0, {
      calls: [
        { id: 'x', tool: 'danger', args: { name: 'n' } },
        { id: 'p', tool: 'pure' },
        { id: 'q', tool: 'pure' },
      ],
    });
    r.sim.at(100, (now) => r.scheduler.decideReview(now, { runId: 'r1', callId: 'x', decision: 'approve' }));
    r.run();
    expect(starts(r.events)).toEqual(['0 p', '10 q', '100 x']);
  });
});

describe('cycles', () => {
  it('a 2-cycle beside an independent call: the independent one succeeds, the cycle is blocked, the run deadlocked', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 'pure', args: { x: '${b.output.id}' } },
        { id: 'b', tool: 'pure', args: { x: '${a.output.id}' } },
        { id: 'c', tool: 'pure', args: { ms: 10 } },
        { id: 'd', tool: 'pure', args: { x: '${a.output.id}' } },
      ],
    });
    r.run();
    const started = r.events.find((e) => e.type === 'run.started');
    expect(started?.data.diagnostics).toEqual([{ code: 'cycle', message: expect.stringContaining('a → b → a'), callIds: ['a', 'b', 'a'] }]);
    expect(ends(r.events)).toEqual(['0 a blocked', '0 b blocked', '0 d blocked', '10 c ok']);
    const blocked = Object.fromEntries(r.events.filter((e) => e.type === 'call.blocked').map((e) => [e.callId, e.data.blockedBy]));
    expect(blocked.a).toMatchObject({ code: 'cycle' });
    expect(blocked.b).toMatchObject({ code: 'cycle' });
    expect(blocked.d).toMatchObject({ code: 'dependency_blocked', callId: 'a' });
    expect(starts(r.events)).toEqual(['0 c']);
    expect(timeline(r.events, ['run.completed'])).toEqual(['10 run.completed']);
    expect(runStatus(r.events)).toBe('deadlocked');
    expect(illegalMoves(r.events)).toEqual([]);
  });

  it('a cycle of policy edges (after) is found too', () => {
    const r = rig({ tools: [tool('p', { ...PURE, after: ['q'] }), tool('q', { ...PURE, after: ['p'] }), tool('pure', PURE)] });
    r.submit(0, {
      calls: [
        { id: 'p1', tool: 'p' },
        { id: 'q1', tool: 'q' },
        { id: 'ok', tool: 'pure' },
      ],
    });
    r.run();
    expect(
      (r.events.find((e) => e.type === 'run.started')?.data.diagnostics as { callIds: string[] }[] | undefined)?.map((d) => d.callIds),
    ).toEqual([['p1', 'q1', 'p1']]);
    expect(finalStatuses(r.events)).toEqual({ p1: 'blocked', q1: 'blocked', ok: 'succeeded' });
    expect(runStatus(r.events)).toBe('deadlocked');
  });
});
