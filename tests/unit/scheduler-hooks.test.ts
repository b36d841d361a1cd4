/**
 * Hooks in the scheduler (DESIGN §14), on the virtual clock: what each decision does to the call, when
 * things happen (exact times), that a hook holds no permit and counts in no attempt, that hooks run
 * once per call, and that a restore does not ask again what was decided.
 */
import { describe, expect, it } from 'vitest';
import type { CoreEvent, EventOf } from '../../src/core/events.js';
import type { HookDecision, HookMatcher, HookRequest } from '../../src/core/hooks.js';
import { escapedKeys } from '../../src/core/hooks.js';
import { accessOf } from '../../src/core/resources.js';
import { Scheduler } from '../../src/core/scheduler.js';
import { Simulation } from '../../src/core/simulation.js';
import { DEFAULTS, catalogOf, finalStatuses, illegalMoves, limits, rig, runStatus, timeline, tool } from '../helpers/sched.js';

type Answer = Omit<HookDecision, 'hook' | 'startedAt' | 'durationMs'> & { ms?: number };

/** A rig whose hooks answer from `answers[on][callId]` (allow after 0 ms when absent), recording every request. */
function hooked(opts: {
  tools: Parameters<typeof rig>[0]['tools'];
  hooks: HookMatcher[];
  answers?: Partial<Record<string, Answer | Answer[]>>;
  limits?: Parameters<typeof rig>[0]['limits'];
  defaultFailure?: 'partial' | 'fail_fast';
}) {
  const requests: (HookRequest & { at: number })[] = [];
  const r = rig({
    tools: opts.tools,
    hooks: opts.hooks,
    ...(opts.limits ? { limits: opts.limits } : {}),
    ...(opts.defaultFailure ? { defaultFailure: opts.defaultFailure } : {}),
    hook(req, now) {
      requests.push({ ...req, at: now });
      const given = opts.answers?.[`${req.on}/${req.callId}`];
      const list =
        given === undefined
          ? [{ decision: req.on === 'before_call' ? 'allow' : 'allow' } as Answer]
          : Array.isArray(given)
            ? given
            : [given];
      let at = now;
      const decisions = list.map((a, i) => {
        const { ms = 0, ...rest } = a;
        const d: HookDecision = { hook: opts.hooks[req.hooks[i] ?? 0]?.name ?? 'h', startedAt: at, durationMs: ms, ...rest };
        at += ms;
        return d;
      });
      return { at, decisions };
    },
  });
  return { ...r, requests };
}

const beforeCall = (name = 'guard', match: HookMatcher['match'] = {}): HookMatcher => ({ on: 'before_call', name, match });
const afterCall = (name = 'redact', match: HookMatcher['match'] = {}): HookMatcher => ({ on: 'after_call', name, match });
const hookEvents = (events: CoreEvent[]) => events.filter((e): e is EventOf<'call.hook'> => e.type === 'call.hook');
const startedArgs = (events: CoreEvent[], id: string) =>
  events.find((e): e is EventOf<'call.started'> => e.type === 'call.started' && e.callId === id)?.data.args;
const errorOf = (events: CoreEvent[], id: string) =>
  events.find((e): e is EventOf<'call.failed'> => e.type === 'call.failed' && e.callId === id)?.data.error;

describe('before_call hooks', () => {
  it('allow: the call waits in ready for the hook, then starts; the decision is a call.hook event', () => {
    const r = hooked({ tools: [tool('t')], hooks: [beforeCall()], answers: { 'before_call/a': { decision: 'allow', ms: 7 } } });
    r.submit(0, { calls: [{ id: 'a', tool: 't', args: { x: 1 } }] });
    r.run();
    expect(timeline(r.events, ['call.ready', 'call.hook', 'call.started', 'call.succeeded'])).toEqual([
      '0 call.ready a',
      '7 call.hook a',
      '7 call.started a',
      '17 call.succeeded a',
    ]);
    expect(hookEvents(r.events)[0]?.data).toEqual({
      on: 'before_call',
      askedAt: 0,
      hook: 'guard',
      decision: 'allow',
      startedAt: 0,
      durationMs: 7,
    });
    expect(r.requests).toMatchObject([{ on: 'before_call', callId: 'a', tenant: 'acme', args: { x: 1 }, hooks: [0], at: 0 }]);
    expect(illegalMoves(r.events)).toEqual([]);
  });

  it('asks only the hooks that match (tool glob, risk, tenant), in config order', () => {
    const r = hooked({
      tools: [tool('fs__write', { risk: 'write' }), tool('fs__read', { risk: 'read' }), tool('other')],
      hooks: [
        beforeCall('a', { tool: 'fs__*' }),
        beforeCall('b', { risk: 'read' }),
        beforeCall('c', { tenant: 'other*' }),
        beforeCall('d', { tool: 'fs__*', tenant: 'ac*' }),
      ],
    });
    r.submit(0, {
      calls: [
        { id: 'w', tool: 'fs__write' },
        { id: 'r', tool: 'fs__read' },
        { id: 'o', tool: 'other' },
      ],
    });
    r.run();
    expect(r.requests.map((q) => `${q.callId}:${q.hooks.join(',')}`)).toEqual(['w:0,3', 'r:0,1,3']);
    expect(runStatus(r.events)).toBe('succeeded');
  });

  it('deny: the call fails hook_denied with the reason, and the run mode applies to its dependents', () => {
    const r = hooked({
      tools: [tool('t')],
      hooks: [beforeCall()],
      answers: { 'before_call/a': { decision: 'deny', reason: 'writes outside /srv', ms: 2 } },
    });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 't' },
        { id: 'b', tool: 't', args: { x: '${a.output}' } },
        { id: 'c', tool: 't' },
      ],
    });
    r.run();
    expect(errorOf(r.events, 'a')).toEqual({ code: 'hook_denied', message: 'a: writes outside /srv', details: { hook: 'guard' } });
    expect(finalStatuses(r.events)).toEqual({ a: 'failed', b: 'blocked', c: 'succeeded' });
    expect(r.events.some((e) => e.type === 'call.started' && e.callId === 'a')).toBe(false);
  });

  it('review: the call awaits a human; once approved it starts without asking the hook again', () => {
    const r = hooked({
      tools: [tool('t')],
      hooks: [beforeCall()],
      answers: { 'before_call/a': { decision: 'review', reason: 'big change', ms: 1 } },
    });
    r.submit(0, { calls: [{ id: 'a', tool: 't' }] });
    r.sim.at(50, (now) => r.scheduler.decideReview(now, { runId: 'r1', callId: 'a', decision: 'approve' }));
    r.run();
    expect(
      timeline(r.events, ['call.ready', 'call.hook', 'call.awaiting_review', 'review.decided', 'call.started', 'call.succeeded']),
    ).toEqual([
      '0 call.ready a',
      '1 call.hook a',
      '1 call.awaiting_review a',
      '50 review.decided a',
      '50 call.ready a',
      '50 call.started a',
      '60 call.succeeded a',
    ]);
    expect(r.events.find((e) => e.type === 'call.awaiting_review')?.data).toEqual({ reason: 'hook guard: big change', args: {} });
    expect(r.requests).toHaveLength(1);
  });

  it('rewrite: the call runs with the new args, which are checked again', () => {
    const schema = { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] };
    const r = hooked({
      tools: [tool('t', { input: schema })],
      hooks: [beforeCall()],
      answers: {
        'before_call/a': { decision: 'allow', args: { path: '/safe' } },
        'before_call/b': { decision: 'allow', args: { path: 7 } },
      },
    });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 't', args: { path: '/x' } },
        { id: 'b', tool: 't', args: { path: '/y' } },
      ],
    });
    r.run();
    expect(r.events.find((e) => e.type === 'call.started' && e.callId === 'a')?.data).toEqual({ attempt: 1, args: { path: '/safe' } });
    expect(errorOf(r.events, 'b')).toMatchObject({
      code: 'invalid_args',
      message: 'b: the args of hook guard: property path: expected string, got integer',
    });
  });

  it('args rewritten past limits.maxArgsBytes fail args_too_large (their own code, as through a reference), not invalid_args', () => {
    const r = hooked({
      tools: [tool('t')],
      hooks: [beforeCall()],
      limits: { maxArgsBytes: 64 },
      answers: {
        'before_call/a': { decision: 'allow', args: { blob: 'x'.repeat(100) } },
        'before_call/b': { decision: 'allow', args: { blob: 'x'.repeat(40) } },
      },
    });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 't', args: { blob: '' } },
        { id: 'b', tool: 't', args: { blob: '' } },
      ],
    });
    r.run();
    expect(errorOf(r.events, 'a')).toMatchObject({
      code: 'args_too_large',
      message: 'a: the args of hook guard: the args pass 64 bytes of JSON (limits.maxArgsBytes)',
      details: { maxBytes: 64, tool: 't', hook: 'guard' },
    });
    expect(r.events.some((e) => e.type === 'call.started' && e.callId === 'a')).toBe(false);
    expect(startedArgs(r.events, 'b')).toEqual({ blob: 'x'.repeat(40) });
  });

  it('a later hook sees no rewrite of its own here: the chain stops at the first deny, and its args are not used', () => {
    const r = hooked({
      tools: [tool('t')],
      hooks: [beforeCall('one'), beforeCall('two')],
      answers: {
        'before_call/a': [
          { decision: 'allow', args: { v: 2 }, ms: 1 },
          { decision: 'deny', reason: 'no', ms: 1 },
        ],
      },
    });
    r.submit(0, { calls: [{ id: 'a', tool: 't', args: { v: 1 } }] });
    r.run();
    expect(hookEvents(r.events).map((e) => `${e.at} ${e.data.hook} ${e.data.decision} ${e.data.startedAt}`)).toEqual([
      '2 one allow 0',
      '2 two deny 1',
    ]);
    expect(errorOf(r.events, 'a')?.code).toBe('hook_denied');
  });

  it('new args whose resource keys leave the planned ones fail hook_changed_resources; keys within them are fine', () => {
    const files = tool('write_file', { reads: [], writes: ['file:{path}'] });
    const r = hooked({
      tools: [files],
      hooks: [beforeCall()],
      answers: {
        'before_call/inside': { decision: 'allow', args: { path: '/srv/app/a.txt/../b.txt' } },
        'before_call/below': { decision: 'allow', args: { path: '/srv/app/sub/c.txt' } },
        'before_call/escape': { decision: 'allow', args: { path: '/etc/passwd' } },
      },
    });
    r.submit(0, {
      calls: [
        { id: 'inside', tool: 'write_file', args: { path: '/srv/app/b.txt' } },
        { id: 'below', tool: 'write_file', args: { path: '/srv/app' } },
        { id: 'escape', tool: 'write_file', args: { path: '/srv/app/x' } },
      ],
    });
    r.run();
    expect(finalStatuses(r.events)).toEqual({ inside: 'succeeded', below: 'succeeded', escape: 'failed' });
    expect(errorOf(r.events, 'escape')).toEqual({
      code: 'hook_changed_resources',
      message: 'escape: the args of hook guard reach resources the graph was not planned on (writes file:/etc/passwd)',
      details: { hook: 'guard', reads: [], writes: ['file:/etc/passwd'] },
    });
  });

  it('covers keys by kind: a read within a planned write is covered, a write within a planned read is not; a wildcard covers its subtree', () => {
    const rw = { reads: ['file:{src}'], writes: ['file:{dst}'] };
    const planned = accessOf(rw, { src: '/in', dst: '/out' });
    expect(escapedKeys(planned, accessOf(rw, { src: '/out/x', dst: '/out/y' }))).toEqual({ reads: [], writes: [] });
    expect(escapedKeys(planned, accessOf(rw, { src: '/in', dst: '/in/z' }))).toEqual({ reads: [], writes: ['file:/in/z'] });
    // A reference's placeholder is planned as `file:*`: anything under file: is within it, nothing else.
    const wild = accessOf(rw, { src: '${a.output}', dst: '${a.output}' });
    expect(escapedKeys(wild, accessOf(rw, { src: '/any', dst: '/where' }))).toEqual({ reads: [], writes: [] });
    expect(escapedKeys(wild, accessOf({ reads: ['db:{src}'], writes: [] }, { src: 'x' }))).toEqual({ reads: ['db:x'], writes: [] });
  });

  it('holds no permit while it runs: under a limit of 1, a call whose hook is quick starts first', () => {
    const r = hooked({
      tools: [tool('t', { reads: [], writes: [] })],
      hooks: [beforeCall()],
      limits: { tool: { t: 1 } },
      answers: { 'before_call/a': { decision: 'allow', ms: 50 } },
    });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 't' },
        { id: 'b', tool: 't', args: { ms: 100 } },
      ],
    });
    r.run();
    expect(timeline(r.events, ['call.started', 'call.succeeded'])).toEqual([
      '0 call.started b',
      '100 call.succeeded b',
      '100 call.started a',
      '110 call.succeeded a',
    ]);
  });

  it('runs once per call: a retried call is not asked again', () => {
    const r = hooked({
      tools: [tool('t', { idempotent: true, retry: { attempts: 3, backoffMs: 10, maxBackoffMs: 10 } })],
      hooks: [beforeCall(), afterCall()],
    });
    r.submit(0, { calls: [{ id: 'a', tool: 't', args: { fail: 2, retryable: true } }] });
    r.run();
    expect(r.events.filter((e) => e.type === 'call.started')).toHaveLength(3);
    expect(r.requests.map((q) => q.on)).toEqual(['before_call', 'after_call']);
    expect(runStatus(r.events)).toBe('succeeded');
  });

  it('a cancel while the hook runs cancels the call; the late answer changes nothing', () => {
    const r = hooked({ tools: [tool('t')], hooks: [beforeCall()], answers: { 'before_call/a': { decision: 'allow', ms: 100 } } });
    r.submit(0, { calls: [{ id: 'a', tool: 't' }] });
    r.sim.at(30, (now) => r.scheduler.cancel(now, 'r1'));
    r.run();
    expect(timeline(r.events, ['call.ready', 'call.cancelled', 'call.hook', 'call.started', 'run.completed'])).toEqual([
      '0 call.ready a',
      '30 call.cancelled a',
      '30 run.completed',
    ]);
    expect(runStatus(r.events)).toBe('cancelled');
  });
});

describe('after_call hooks', () => {
  it('an output replaced past limits.maxOutputBytes fails the call output_too_large', () => {
    const r = hooked({
      tools: [tool('t')],
      hooks: [afterCall('redact', { tool: 't' })],
      limits: { maxOutputBytes: 50 },
      answers: { 'after_call/a': { decision: 'replace', output: { blob: 'y'.repeat(100) } } },
    });
    r.submit(0, { calls: [{ id: 'a', tool: 't', args: { out: { small: 1 } } }] });
    r.run();
    expect(errorOf(r.events, 'a')).toMatchObject({ code: 'output_too_large', details: { maxBytes: 50 } });
  });

  it('replace: dependents and the results see the new output; the attempt keeps its own duration', () => {
    const r = hooked({
      tools: [tool('t')],
      hooks: [afterCall('redact', { tool: 't' })],
      answers: { 'after_call/a': { decision: 'replace', output: { token: '[redacted]' }, ms: 4 } },
    });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 't', args: { out: { token: 's3cret' } } },
        { id: 'b', tool: 't', args: { seen: '${a.output.token}' } },
      ],
    });
    r.run();
    expect(r.requests[0]).toMatchObject({ on: 'after_call', callId: 'a', status: 'succeeded', output: { token: 's3cret' }, at: 10 });
    expect(r.events.find((e) => e.type === 'call.succeeded' && e.callId === 'a')).toMatchObject({
      at: 14,
      data: { output: { token: '[redacted]' }, durationMs: 10 },
    });
    expect(startedArgs(r.events, 'b')).toEqual({ seen: '[redacted]' });
    // Only the call's own input (its args, from the script) holds the secret: no outcome does.
    const outcomes = r.events.filter((e) => e.type === 'call.succeeded' || e.type === 'call.hook');
    expect(JSON.stringify(outcomes)).not.toContain('s3cret');
  });

  it('fail: a succeeded call fails hook_rejected, and its dependents are blocked', () => {
    const r = hooked({
      tools: [tool('t')],
      hooks: [afterCall()],
      answers: { 'after_call/a': { decision: 'fail', fail: { message: 'leaks a key' } } },
    });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 't' },
        { id: 'b', tool: 't', args: { x: '${a.output}' } },
      ],
    });
    r.run();
    expect(errorOf(r.events, 'a')).toEqual({ code: 'hook_rejected', message: 'a: leaks a key', details: { hook: 'redact' } });
    expect(finalStatuses(r.events)).toEqual({ a: 'failed', b: 'blocked' });
  });

  it('on a failed call it only observes: its output and fail are ignored', () => {
    const r = hooked({ tools: [tool('t')], hooks: [afterCall()], answers: { 'after_call/a': { decision: 'replace', output: 'fine' } } });
    r.submit(0, { calls: [{ id: 'a', tool: 't', args: { fail: 'always' } }] });
    r.run();
    expect(r.requests[0]).toMatchObject({ status: 'failed', error: { code: 'tool_error' } });
    expect(errorOf(r.events, 'a')?.code).toBe('tool_error');
    expect(hookEvents(r.events)).toHaveLength(1);
  });

  it('gives its permits back when the attempt ends, but the run waits for the decision', () => {
    const r = hooked({
      tools: [tool('t', { reads: [], writes: [] })],
      hooks: [afterCall()],
      limits: { tool: { t: 1 } },
      answers: { 'after_call/a': { decision: 'allow', ms: 30 } },
    });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 't' },
        { id: 'b', tool: 't' },
      ],
    });
    r.run();
    expect(timeline(r.events, ['call.started', 'call.succeeded', 'run.completed'])).toEqual([
      '0 call.started a',
      '10 call.started b',
      '20 call.succeeded b',
      '40 call.succeeded a',
      '40 run.completed',
    ]);
  });

  it('is not asked for a call that never ran', () => {
    const r = hooked({ tools: [tool('t')], hooks: [afterCall()] });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 't', args: { fail: 'always' } },
        { id: 'b', tool: 't', args: { x: '${a.output}' } },
      ],
    });
    r.run();
    expect(r.requests.map((q) => q.callId)).toEqual(['a']);
  });
});

describe('restore with hooks', () => {
  it('a before_call decision that was stored is not asked again, and its args stand', () => {
    const tools = [tool('t', { reads: [], writes: ['k:{k}'] })];
    const hooks = [beforeCall()];
    // The live run: the hook rewrote the args; the process dies before the call starts (a limit held it).
    const live = hooked({
      tools,
      hooks,
      limits: { tool: { t: 1 } },
      answers: { 'before_call/b': { decision: 'allow', args: { k: 'b', v: 2 } } },
    });
    live.submit(0, {
      calls: [
        { id: 'a', tool: 't', args: { k: 'a', ms: 100 } },
        { id: 'b', tool: 't', args: { k: 'b' } },
      ],
    });
    live.run();
    // What was stored before the process died at 99 ms: b's hook had decided, b waited for the limit.
    const log = live.events.filter((e) => e.at < 100);
    expect(log.some((e) => e.type === 'call.hook' && e.callId === 'b')).toBe(true);
    expect(log.some((e) => e.type === 'call.started' && e.callId === 'b')).toBe(false);
    // Restored: no new request for b, and b runs with the hook's args.
    const requests: HookRequest[] = [];
    const fresh = new Scheduler({
      catalog: catalogOf(tools),
      policy: { rules: [] },
      limits: limits({ tool: { t: 1 } }),
      defaults: DEFAULTS,
      hooks,
    });
    const sim = new Simulation(fresh, {
      attempt: () => ({ durationMs: 5, result: { ok: true, output: 1 } }),
      hook: (req, now) => {
        requests.push(req);
        return { at: now, decisions: [] };
      },
    });
    sim.at(200, (now) => fresh.restore(now, log));
    sim.run();
    expect(requests).toEqual([]);
    expect(startedArgs(sim.events, 'b')).toEqual({ k: 'b', v: 2 });
  });
});
