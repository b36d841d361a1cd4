// Failure modes, compensation, replan and cancel (DESIGN §6), with exact times and orders.
import { describe, expect, it } from 'vitest';
import { callError } from '../../src/core/errors.js';
import type { CoreEvent, EventOf } from '../../src/core/events.js';
import { SchedulerError } from '../../src/core/scheduler.js';
import { PURE, defaultScript, ends, finalStatuses, illegalMoves, rig, runStatus, starts, timeline, tool } from '../helpers/sched.js';

const blockedBy = (events: CoreEvent[], callId: string) =>
  events.find((e): e is EventOf<'call.blocked'> => e.type === 'call.blocked' && e.callId === callId)?.data.blockedBy;
const cancelReason = (events: CoreEvent[], callId: string) =>
  events.find((e): e is EventOf<'call.cancelled'> => e.type === 'call.cancelled' && e.callId === callId)?.data.reason;

describe('partial (the default mode)', () => {
  const tools = [tool('pure', PURE), tool('check', PURE), tool('deploy', { ...PURE, after: ['check'] })];

  it('blocks what depends on the failure (data or policy), naming the failed call; the independent branch goes on', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 'pure', args: { ms: 10, fail: 'always' } },
        { id: 'b', tool: 'pure', args: { x: '${a.output.id}' } },
        { id: 'c', tool: 'pure', args: { x: '${b.output.id}' } },
        { id: 'k', tool: 'check', args: { ms: 5, fail: 'always' } },
        { id: 'dep', tool: 'deploy' },
        { id: 'd', tool: 'pure', args: { ms: 20 } },
        { id: 'e', tool: 'pure', args: { x: '${d.output.id}' } },
      ],
    });
    r.run();
    expect(ends(r.events)).toEqual(['5 k failed', '5 dep blocked', '10 a failed', '10 b blocked', '10 c blocked', '20 d ok', '30 e ok']);
    expect(blockedBy(r.events, 'b')).toMatchObject({ code: 'dependency_failed', callId: 'a' });
    expect(blockedBy(r.events, 'c')).toMatchObject({ code: 'dependency_failed', callId: 'a' });
    expect(blockedBy(r.events, 'dep')).toMatchObject({ code: 'dependency_failed', callId: 'k' });
    expect(finalStatuses(r.events)).toEqual({
      a: 'failed',
      b: 'blocked',
      c: 'blocked',
      k: 'failed',
      dep: 'blocked',
      d: 'succeeded',
      e: 'succeeded',
    });
    expect(runStatus(r.events)).toBe('partial');
    expect(timeline(r.events, ['run.completed'])).toEqual(['30 run.completed']);
    expect(illegalMoves(r.events)).toEqual([]);
  });

  it('ends failed when nothing succeeded, succeeded when everything did', () => {
    const bad = rig({ tools });
    bad.submit(0, {
      calls: [
        { id: 'a', tool: 'pure', args: { fail: 'always' } },
        { id: 'b', tool: 'pure', args: { fail: 'always', ms: 20 } },
        { id: 'c', tool: 'pure', args: { x: '${a.output.id}' } },
      ],
    });
    bad.run();
    expect(runStatus(bad.events)).toBe('failed');
    expect(finalStatuses(bad.events)).toEqual({ a: 'failed', b: 'failed', c: 'blocked' });

    const good = rig({ tools });
    good.submit(0, {
      calls: [
        { id: 'a', tool: 'pure' },
        { id: 'b', tool: 'pure', args: { x: '${a.output.id}' } },
      ],
    });
    good.run();
    expect(runStatus(good.events)).toBe('succeeded');
  });

  it('fails a call whose reference path is missing from the output, at run time, and blocks its descendants', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 'pure', args: { out: { v: 1 } } },
        { id: 'b', tool: 'pure', args: { x: '${a.output.nope}' } },
        { id: 'c', tool: 'pure', args: { x: '${b.output.id}' } },
      ],
    });
    r.run();
    expect(ends(r.events)).toEqual(['10 a ok', '10 b failed', '10 c blocked']);
    expect(r.events.find((e) => e.type === 'call.failed')?.data.error).toMatchObject({ code: 'unresolved_reference' });
    expect(starts(r.events)).toEqual(['0 a']);
  });
});

describe('fail_fast', () => {
  const tools = [
    tool('pure', PURE),
    tool('create', {
      reads: [],
      writes: ['res:{name}'],
      compensate: { tool: 'delete', args: { name: '${self.args.name}', note: 'undo ${self.args.name} made by ${self.output.id}' } },
    }),
    tool('delete', PURE),
    tool('lost', { ...PURE, compensate: { tool: 'no_such_tool', args: {} } }),
  ];

  it('cancels pending calls, aborts running ones, ends failed, then compensates newest first, one at a time', () => {
    const r = rig({ tools });
    r.submit(0, {
      failure: 'fail_fast',
      calls: [
        { id: 's1', tool: 'create', args: { name: 'x', ms: 10 } },
        { id: 's2', tool: 'create', args: { name: 'y', ms: 20 } },
        { id: 'long', tool: 'pure', args: { ms: 100 } },
        { id: 'bad', tool: 'pure', args: { ms: 30, fail: 'always' } },
        { id: 'later', tool: 'pure', args: { x: '${long.output.id}' } },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 long', '0 s1', '0 s2', '0 bad']);
    expect(r.aborts).toEqual([
      { at: 30, runId: 'r1', callId: 'long', attempt: 1, reason: expect.objectContaining({ code: 'cancelled', callId: 'bad' }) },
    ]);
    expect(timeline(r.events, ['call.succeeded', 'call.failed', 'call.cancelled', 'call.compensated', 'run.completed'])).toEqual([
      '10 call.succeeded s1',
      '20 call.succeeded s2',
      '30 call.failed bad',
      '30 call.cancelled later',
      '30 call.cancelled long',
      '35 call.compensated s2',
      '40 call.compensated s1',
      '40 run.completed',
    ]);
    const comps = r.sim.starts.filter((s) => s.start.kind === 'compensation');
    expect(comps.map((s) => [s.at, s.start.callId, s.start.tool.name, s.start.args])).toEqual([
      [30, 's2', 'delete', { name: 'y', note: 'undo y made by s2' }],
      [35, 's1', 'delete', { name: 'x', note: 'undo x made by s1' }],
    ]);
    const compensated = r.events.filter((e) => e.type === 'call.compensated').map((e) => e.data);
    expect(compensated).toMatchObject([
      { status: 'succeeded', output: { undone: { name: 'y', note: 'undo y made by s2' } } },
      { status: 'succeeded', output: { undone: { name: 'x', note: 'undo x made by s1' } } },
    ]);
    expect(runStatus(r.events)).toBe('failed');
    expect(finalStatuses(r.events)).toEqual({ s1: 'succeeded', s2: 'succeeded', long: 'cancelled', bad: 'failed', later: 'cancelled' });
    expect(illegalMoves(r.events)).toEqual([]);
  });

  it('reports a failed compensation and goes on with the next; a compensation with no tool fails at once', () => {
    const r = rig({
      tools,
      script: (s, now) =>
        s.kind === 'compensation' && s.callId === 's2'
          ? { durationMs: 7, result: { ok: false, error: callError('tool_error', 'cannot delete y') } }
          : defaultScript(s, now),
    });
    r.submit(0, {
      failure: 'fail_fast',
      calls: [
        { id: 's1', tool: 'create', args: { name: 'x', ms: 10 } },
        { id: 'l', tool: 'lost', args: { ms: 15 } },
        { id: 's2', tool: 'create', args: { name: 'y', ms: 20 } },
        { id: 'bad', tool: 'pure', args: { ms: 30, fail: 'always' } },
      ],
    });
    r.run();
    expect(
      r.events
        .filter((e) => e.type === 'call.compensated')
        .map((e) => [e.at, e.callId, e.data.status, e.data.status === 'failed' ? e.data.error.code : undefined]),
    ).toEqual([
      [37, 's2', 'failed', 'tool_error'],
      [37, 'l', 'failed', 'unknown_tool'],
      [42, 's1', 'succeeded', undefined],
    ]);
    expect(timeline(r.events, ['run.completed'])).toEqual(['42 run.completed']);
    expect(runStatus(r.events)).toBe('failed');
  });

  it('a cancel that comes while compensations run changes nothing: the run stays failed', () => {
    const r = rig({ tools });
    r.submit(0, {
      failure: 'fail_fast',
      calls: [
        { id: 's1', tool: 'create', args: { name: 'x', ms: 5 } },
        { id: 's2', tool: 'create', args: { name: 'y', ms: 6 } },
        { id: 'bad', tool: 'pure', args: { ms: 10, fail: 'always' } },
      ],
    });
    let late: unknown;
    r.sim.at(12, (now) => {
      late = r.scheduler.cancel(now, 'r1');
      return late as ReturnType<typeof r.scheduler.cancel>;
    });
    r.run();
    expect(late).toEqual({ events: [], starts: [], aborts: [] });
    expect(timeline(r.events, ['call.compensated', 'run.completed'])).toEqual([
      '15 call.compensated s2',
      '20 call.compensated s1',
      '20 run.completed',
    ]);
    expect(runStatus(r.events)).toBe('failed');
  });

  it("a tool's own failure: fail_fast applies in a partial run", () => {
    const r = rig({ tools: [...tools, tool('shell', { ...PURE, failure: 'fail_fast' })] });
    r.submit(0, {
      failure: 'partial',
      calls: [
        { id: 'sh', tool: 'shell', args: { ms: 10, fail: 'always' } },
        { id: 'long', tool: 'pure', args: { ms: 50 } },
        { id: 'dep', tool: 'pure', args: { x: '${long.output.id}' } },
        { id: 'c', tool: 'create', args: { name: 'z', ms: 5 } },
      ],
    });
    r.run();
    expect(r.aborts.map((a) => [a.at, a.callId, a.reason.code])).toEqual([[10, 'long', 'cancelled']]);
    expect(ends(r.events)).toEqual(['5 c ok', '10 sh failed', '10 dep cancelled', '10 long cancelled']);
    expect(timeline(r.events, ['call.compensated', 'run.completed'])).toEqual(['15 call.compensated c', '15 run.completed']);
    expect(runStatus(r.events)).toBe('failed');
  });

  it('the failure of an ordinary tool in a partial run does not fail fast', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'bad', tool: 'pure', args: { ms: 10, fail: 'always' } },
        { id: 'long', tool: 'pure', args: { ms: 50 } },
      ],
    });
    r.run();
    expect(r.aborts).toEqual([]);
    expect(ends(r.events)).toEqual(['10 bad failed', '50 long ok']);
    expect(r.events.some((e) => e.type === 'call.compensated')).toBe(false);
  });
});

describe('replan', () => {
  const tools = [tool('pure', PURE), tool('write', { reads: [], writes: ['file:{path}'] })];
  const batch = [
    { id: 'a', tool: 'pure', args: { ms: 10, out: { v: 'A' } } },
    { id: 'w', tool: 'write', args: { path: '/x', ms: 10 } },
    { id: 'f', tool: 'pure', args: { ms: 20, fail: 'always' } },
    { id: 'd1', tool: 'pure', args: { x: '${f.output.id}' } },
    { id: 'd2', tool: 'pure', args: { x: '${d1.output.id}' } },
    { id: 'i', tool: 'pure', args: { ms: 30 } },
  ];

  it('holds the descendants awaiting a replan, then runs the new calls and supersedes the waiting ones', () => {
    const r = rig({
      tools,
      onEvent: (e, sim) => {
        if (e.type === 'run.completed' && e.data.status === 'needs_replan') {
          sim.at(100, (now) =>
            r.scheduler.replan(now, 'r1', [
              { id: 'f2', tool: 'pure', args: { x: '${a.output.v}', ms: 5 } },
              { id: 'g', tool: 'pure', args: { y: '${f2.output.id}' } },
            ]),
          );
        }
      },
    });
    r.submit(0, { failure: 'replan', calls: batch });
    r.run();
    expect(
      timeline(r.events, [
        'call.failed',
        'call.blocked',
        'call.succeeded',
        'run.needs_replan',
        'call.cancelled',
        'run.replanned',
        'run.completed',
      ]),
    ).toEqual([
      '10 call.succeeded a',
      '10 call.succeeded w',
      '20 call.failed f',
      '20 call.blocked d1',
      '20 call.blocked d2',
      '30 call.succeeded i',
      '30 run.needs_replan',
      '30 run.completed',
      '100 call.cancelled d1',
      '100 call.cancelled d2',
      '100 run.replanned',
      '105 call.succeeded f2',
      '115 call.succeeded g',
      '115 run.completed',
    ]);
    expect(blockedBy(r.events, 'd1')).toMatchObject({ code: 'awaiting_replan', callId: 'f' });
    expect(blockedBy(r.events, 'd2')).toMatchObject({ code: 'awaiting_replan', callId: 'f' });
    const ctx = r.events.find((e) => e.type === 'run.needs_replan')?.data.replanContext;
    expect(ctx).toEqual({
      failed: [{ callId: 'f', error: expect.objectContaining({ code: 'tool_error' }) }],
      waiting: ['d1', 'd2'],
      sideEffects: ['w'],
    });
    expect(r.events.filter((e) => e.type === 'run.completed').map((e) => e.data.status)).toEqual(['needs_replan', 'succeeded']);
    expect(cancelReason(r.events, 'd1')).toMatchObject({ code: 'superseded' });
    expect(r.sim.starts.find((s) => s.start.callId === 'f2')?.start.args).toEqual({ x: 'A', ms: 5 });
    expect(starts(r.events).slice(-2)).toEqual(['100 f2', '105 g']);
    expect(finalStatuses(r.events)).toEqual({
      a: 'succeeded',
      w: 'succeeded',
      f: 'failed',
      d1: 'cancelled',
      d2: 'cancelled',
      i: 'succeeded',
      f2: 'succeeded',
      g: 'succeeded',
    });
    expect(illegalMoves(r.events)).toEqual([]);
    expect(() => r.scheduler.replan(200, 'r1', [{ id: 'z', tool: 'pure' }])).toThrow(SchedulerError);
  });

  it('a new failure after a replan asks for another one, naming only the new failure', () => {
    let replans = 0;
    const r = rig({
      tools,
      onEvent: (e, sim) => {
        if (e.type === 'run.completed' && e.data.status === 'needs_replan' && replans++ === 0) {
          sim.at(100, (now) => r.scheduler.replan(now, 'r1', [{ id: 'f2', tool: 'pure', args: { fail: 'always' } }]));
        }
      },
    });
    r.submit(0, { failure: 'replan', calls: batch });
    r.run();
    const contexts = r.events
      .filter((e) => e.type === 'run.needs_replan')
      .map((e) => e.data.replanContext as { failed: { callId: string }[]; waiting: string[] });
    expect(contexts.map((c) => [c.failed.map((f) => f.callId), c.waiting])).toEqual([
      [['f'], ['d1', 'd2']],
      [['f2'], []],
    ]);
    expect(runStatus(r.events)).toBe('needs_replan');
  });

  it('a replanned call that refers to the failed call is blocked (dependency_failed), not left awaiting a replan', () => {
    const r = rig({
      tools,
      onEvent: (e, sim) => {
        if (e.type === 'run.completed' && e.data.status === 'needs_replan') {
          sim.at(100, (now) => r.scheduler.replan(now, 'r1', [{ id: 'again', tool: 'pure', args: { x: '${f.output.id}' } }]));
        }
      },
    });
    r.submit(0, { failure: 'replan', calls: batch });
    r.run();
    expect(blockedBy(r.events, 'again')).toMatchObject({ code: 'dependency_failed', callId: 'f' });
    expect(r.events.filter((e) => e.type === 'run.completed').map((e) => [e.at, e.data.status])).toEqual([
      [30, 'needs_replan'],
      [100, 'partial'],
    ]);
  });

  // KNOWN BUG (not fixed: the fix belongs in how a replan is planned, see the report). A replan plans
  // the old and new calls together. `c` (old, writes k, `after: [prep]`) gains a policy edge from the
  // new `prep` call, so the topological order becomes n0, c, n1 and the hazard index orders n0 → c → n1
  // and leaves out n0 → n1 as implied. The scheduler drops edges into old calls and ignores edges out
  // of them (they have ended), so n0 and n1, two writers of k:x, run at the same time.
  it('two new writers of one key stay ordered when the plan puts an old call between them', () => {
    const r = rig({
      tools: [
        tool('gate', { reads: [], writes: ['k'], after: ['prep'] }),
        tool('prep', { reads: [], writes: ['k:{a}'] }),
        tool('w', { reads: [], writes: ['k:{a}'] }),
      ],
      onEvent: (e, sim) => {
        if (e.type === 'run.completed' && e.data.status === 'needs_replan') {
          sim.at(100, (now) =>
            r.scheduler.replan(now, 'r1', [
              { id: 'n0', tool: 'prep', args: { a: 'x', ms: 20 } },
              { id: 'n1', tool: 'w', args: { a: 'x', ms: 10 } },
            ]),
          );
        }
      },
    });
    r.submit(0, { failure: 'replan', calls: [{ id: 'c', tool: 'gate', args: { fail: 'always' } }] });
    r.run();
    expect(starts(r.events)).toEqual(['0 c', '100 n0', '120 n1']); // today: '100 n0', '100 n1'
  });

  it('refuses a replan of a run that is not needs_replan, and a call id already used', () => {
    const r = rig({ tools });
    r.submit(0, { failure: 'replan', calls: batch });
    r.run();
    expect(() => r.scheduler.replan(50, 'r1', [{ id: 'a', tool: 'pure' }])).toThrow(expect.objectContaining({ code: 'conflict' }));
    const ok = rig({ tools });
    ok.submit(0, { failure: 'replan', calls: [{ id: 'a', tool: 'pure' }] });
    ok.run();
    expect(() => ok.scheduler.replan(50, 'r1', [{ id: 'b', tool: 'pure' }])).toThrow(expect.objectContaining({ code: 'conflict' }));
    expect(() => ok.scheduler.replan(50, 'nope', [])).toThrow(expect.objectContaining({ code: 'run_not_found' }));
  });
});

describe('cancel', () => {
  const tools = [
    tool('pure', PURE),
    tool('flaky', { ...PURE, idempotent: true, retry: { attempts: 3, backoffMs: 100, maxBackoffMs: 1000 } }),
    tool('danger', { ...PURE, risk: 'dangerous' }),
  ];

  it('cancels pending calls (also one in backoff and one awaiting review), aborts running ones, ends cancelled', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'done', tool: 'pure', args: { ms: 10 } },
        { id: 'a', tool: 'pure', args: { ms: 50 } },
        { id: 'b', tool: 'pure', args: { x: '${a.output.id}' } },
        { id: 'rt', tool: 'flaky', args: { ms: 5, fail: 1, retryable: true } },
        { id: 'rv', tool: 'danger' },
      ],
    });
    r.sim.at(15, (now) => r.scheduler.cancel(now, 'r1'));
    r.run();
    expect(r.aborts.map((a) => [a.at, a.callId, a.attempt, a.reason.code])).toEqual([[15, 'a', 1, 'cancelled']]);
    expect(ends(r.events)).toEqual(['5 rt retry', '10 done ok', '15 b cancelled', '15 rt cancelled', '15 rv cancelled', '15 a cancelled']);
    expect(starts(r.events)).toEqual(['0 a', '0 done', '0 rt']);
    expect(timeline(r.events, ['run.completed'])).toEqual(['15 run.completed']);
    expect(runStatus(r.events)).toBe('cancelled');
    expect(finalStatuses(r.events)).toEqual({ done: 'succeeded', a: 'cancelled', b: 'cancelled', rt: 'cancelled', rv: 'cancelled' });
    expect(illegalMoves(r.events)).toEqual([]);
    // Cancelling again, or an ended run, does nothing.
    expect(r.scheduler.cancel(20, 'r1')).toEqual({ events: [], starts: [], aborts: [] });
    expect(() => r.scheduler.cancel(20, 'nope')).toThrow(SchedulerError);
  });

  it('frees the slots of the cancelled run for another run at once', () => {
    const r = rig({ tools, limits: { global: 1 } });
    r.submit(0, { runId: 'r1', calls: [{ id: 'a', tool: 'pure', args: { ms: 100 } }] });
    r.submit(0, { runId: 'r2', calls: [{ id: 'b', tool: 'pure', args: { ms: 10 } }] });
    r.sim.at(20, (now) => r.scheduler.cancel(now, 'r1'));
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/a', '20 r2/b']);
    expect(runStatus(r.events, 'r2')).toBe('succeeded');
  });
});
