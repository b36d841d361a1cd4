/**
 * The scheduler's permit gate (several replicas, DESIGN §12), driven by hand with a virtual clock: a
 * call that local limits let start asks the cluster first, and starts only once granted; a refused call
 * waits until permits free; a call that ended while it asked gives its permit back. A refusal that says
 * why (several replicas, DESIGN §7) is the call's `waitingFor`, with a `call.waiting` when it changes.
 */
import { describe, expect, it } from 'vitest';
import { Scheduler, type Output } from '../../src/core/scheduler.js';
import { catalogOf, DEFAULTS, limits, tool } from '../helpers/sched.js';

function gated(toolLimit = 2, explainWaits = false): Scheduler {
  return new Scheduler({
    catalog: catalogOf([tool('t', { reads: [], writes: [] })]),
    policy: { rules: [] },
    limits: limits({ tool: { t: toolLimit } }),
    defaults: DEFAULTS,
    gated: true,
    explainWaits,
  });
}

/** What the cluster says refused a call of `t`: its limit of 2, full with calls of another replica's run. */
const refusedBy = (inUse: number) => [
  { kind: 'tool' as const, key: 't', limit: 2, inUse, holders: [{ runId: 'elsewhere', callId: 'e1', tenant: 'y', since: 0 }] },
];

const asked = (out: Output | undefined) => (out?.permits ?? []).map((p) => p.callId);
const started = (out: Output | undefined) => (out?.starts ?? []).map((s) => s.callId);
const types = (out: Output | undefined, callId: string) => (out?.events ?? []).filter((e) => e.callId === callId).map((e) => e.type);

describe('the permit gate', () => {
  it('asks for permits within local limits, starts a call only once granted, and asks again for a refused one when permits free', () => {
    const s = gated(2);
    const calls = ['a', 'b', 'c'].map((id) => ({ id, tool: 't', args: {} }));
    const out = s.submit(0, { runId: 'r', tenant: 'x', calls });
    // The local tool limit (2) holds the third back; nothing starts before the cluster answers.
    expect(asked(out)).toEqual(['a', 'b']);
    expect(started(out)).toEqual([]);
    expect(out.events.some((e) => e.type === 'call.started')).toBe(false);

    const a = s.permitGranted(1, 'r', 'a');
    expect(started(a)).toEqual(['a']);
    expect(types(a, 'a')).toEqual(['call.started']);
    expect(a?.starts[0]?.attempt).toBe(1);

    // b is refused: its local slot frees, so c may ask; b waits for permits to free.
    const b = s.permitRefused(2, 'r', 'b');
    expect(started(b)).toEqual([]);
    expect(asked(b)).toEqual(['c']);
    expect(s.permitRefused(3, 'r', 'c').permits ?? []).toEqual([]);
    // An attempt's end frees a local slot, but a refused call does not ask again before permits free.
    expect(asked(s.attemptEnded(4, { runId: 'r', callId: 'a', attempt: 1, result: { ok: true, output: 1 } }))).toEqual([]);
    // Permits freed: b and c ask again, best first, within the local limit.
    expect(asked(s.permitsFreed(5))).toEqual(['b', 'c']);
    expect(started(s.permitGranted(6, 'r', 'b'))).toEqual(['b']);
    expect(started(s.permitGranted(7, 'r', 'c'))).toEqual(['c']);
  });

  it('a call cancelled while it asks gives a late grant back (undefined), and frees its local slot', () => {
    const s = gated(1);
    const out = s.submit(0, { runId: 'r', tenant: 'x', calls: [{ id: 'a', tool: 't', args: {} }] });
    expect(asked(out)).toEqual(['a']);
    const cancelled = s.cancel(1, 'r');
    expect(types(cancelled, 'a')).toEqual(['call.cancelled']);
    expect(s.permitGranted(2, 'r', 'a')).toBeUndefined();
    // The slot is free: another run's call asks at once.
    expect(asked(s.submit(3, { runId: 'r2', tenant: 'x', calls: [{ id: 'b', tool: 't', args: {} }] }))).toEqual(['b']);
  });

  it('a call that no shared limit or lock applies to starts at once, asking nothing; a granted one holds its permit', () => {
    const s = new Scheduler({
      catalog: catalogOf([
        tool('t', { reads: [], writes: [] }),
        tool('free', { reads: [], writes: [] }),
        tool('w', { reads: [], writes: ['file:{path}'] }),
      ]),
      policy: { rules: [] },
      limits: limits({ tool: { t: 2 } }),
      defaults: DEFAULTS,
      gated: true,
    });
    const out = s.submit(0, {
      runId: 'r',
      tenant: 'x',
      calls: [
        { id: 'f', tool: 'free', args: {} },
        { id: 'l', tool: 't', args: {} },
        { id: 'k', tool: 'w', args: { path: '/a' } },
      ],
    });
    // `free` has no limit and no resources; `t` has a tool limit; `w` writes a resource in its tenant's lock domain.
    expect(started(out)).toEqual(['f']);
    expect(out.starts[0]?.permit).toBeUndefined();
    expect(asked(out)).toEqual(['l', 'k']);
    expect(s.permitGranted(1, 'r', 'l')?.starts[0]?.permit).toBe(true);
  });

  it("a refusal that says why is the call's wait: one call.waiting per change, none once it starts; counted among the waiters once", () => {
    const s = gated(1, true);
    const out = s.submit(10, { runId: 'r', tenant: 'x', calls: ['a', 'b'].map((id) => ({ id, tool: 't', args: {} })) });
    expect(asked(out)).toEqual(['a']);
    // b waits here for the local tool limit, held by a while it asks.
    expect(
      out.events
        .filter((e) => e.type === 'call.waiting')
        .map((e) => [e.callId, e.data.waitingFor[0]?.kind, e.data.waitingFor[0]?.holders.map((h) => h.callId)]),
    ).toEqual([['b', 'tool', ['a']]]);

    // The cluster refuses a, saying why: that is a's wait now; the local slot frees, so b asks.
    const r1 = s.permitRefused(11, 'r', 'a', refusedBy(2));
    expect(r1.events.map((e) => [e.type, e.callId])).toEqual([['call.waiting', 'a']]);
    expect(r1.events[0]?.data).toEqual({ waitingFor: refusedBy(2) });
    expect(asked(r1)).toEqual(['b']);
    // Counted once, under the limit the cluster named, since it was refused (b asks: it waits for nothing here).
    expect([...s.waitCounts()]).toEqual([['tool\u0000t', { n: 1, since: 11 }]]);

    // The same answer again: no event. Another (one fewer in use, still full for it): an event.
    expect(types(s.permitRefused(12, 'r', 'b'), 'b')).toEqual([]);
    expect(asked(s.permitsFreed(13))).toEqual(['a']);
    const r2 = s.permitRefused(14, 'r', 'a', refusedBy(2));
    expect(types(r2, 'a')).toEqual([]);
    expect(asked(r2)).toEqual(['b']);
    expect(types(s.permitRefused(14, 'r', 'b'), 'b')).toEqual([]);
    expect(asked(s.permitsFreed(15))).toEqual(['a']);
    const r3 = s.permitRefused(16, 'r', 'a', refusedBy(1));
    expect(r3.events.map((e) => [e.type, e.callId, e.data])).toEqual([['call.waiting', 'a', { waitingFor: refusedBy(1) }]]);
    expect(asked(r3)).toEqual(['b']);
    expect(types(s.permitRefused(16, 'r', 'b'), 'b')).toEqual([]);
    expect([...s.waitCounts()]).toEqual([['tool\u0000t', { n: 1, since: 11 }]]);

    // Granted: it starts, and waits for nothing any more.
    expect(asked(s.permitsFreed(17))).toEqual(['a']);
    const go = s.permitGranted(18, 'r', 'a');
    expect(types(go, 'a')).toEqual(['call.started']);
    expect([...s.waitCounts()]).toEqual([]);
  });

  it("a retry's refusal for the same reason as the attempt before is news: its wait was told no more once it started", () => {
    const s = new Scheduler({
      catalog: catalogOf([tool('t', { reads: [], writes: [], idempotent: true, retry: { attempts: 2, backoffMs: 10, maxBackoffMs: 10 } })]),
      policy: { rules: [] },
      limits: limits({ tool: { t: 2 } }),
      defaults: DEFAULTS,
      gated: true,
      explainWaits: true,
    });
    expect(asked(s.submit(0, { runId: 'r', tenant: 'x', calls: [{ id: 'a', tool: 't', args: {} }] }))).toEqual(['a']);
    expect(types(s.permitRefused(1, 'r', 'a', refusedBy(2)), 'a')).toEqual(['call.waiting']);
    expect(asked(s.permitsFreed(2))).toEqual(['a']);
    expect(types(s.permitGranted(3, 'r', 'a'), 'a')).toEqual(['call.started']);
    const failed = s.attemptEnded(4, {
      runId: 'r',
      callId: 'a',
      attempt: 1,
      result: { ok: false, error: { code: 'tool_error', message: 'flaky' }, retryable: true },
    });
    expect(types(failed, 'a')).toEqual(['call.retry_scheduled']);
    const again = s.tick(14);
    expect(types(again, 'a')).toEqual(['call.ready']);
    expect(asked(again)).toEqual(['a']);
    const r2 = s.permitRefused(15, 'r', 'a', refusedBy(2));
    expect(r2.events.map((e) => [e.type, e.callId, e.data])).toEqual([['call.waiting', 'a', { waitingFor: refusedBy(2) }]]);
    expect([...s.waitCounts()]).toEqual([['tool\u0000t', { n: 1, since: 15 }]]);
  });

  it('without the gate nothing changes: calls start at once and no permit is asked', () => {
    const s = new Scheduler({
      catalog: catalogOf([tool('t', { reads: [], writes: [] })]),
      policy: { rules: [] },
      limits: limits({ tool: { t: 2 } }),
      defaults: DEFAULTS,
    });
    const out = s.submit(0, { runId: 'r', tenant: 'x', calls: ['a', 'b', 'c'].map((id) => ({ id, tool: 't', args: {} })) });
    expect(started(out)).toEqual(['a', 'b']);
    expect(out.permits).toBeUndefined();
  });
});

describe('a pause told by the cluster (backpressure, DESIGN §4)', () => {
  it("a refusal for a pause holds the tool's other calls back here until it ends, without asking", () => {
    const s = gated(5);
    const calls = ['a', 'b', 'c'].map((id) => ({ id, tool: 't', args: {} }));
    expect(asked(s.submit(0, { runId: 'r', tenant: 'x', calls }))).toEqual(['a', 'b', 'c']);
    const pause = [{ kind: 'backoff' as const, key: 't', tool: 't', until: 1000, status: 429, holders: [] }];
    s.permitRefused(1, 'r', 'a', pause);
    s.permitRefused(1, 'r', 'b', pause);
    s.permitRefused(1, 'r', 'c', pause);
    // Permits free meanwhile, but the tool is paused: nobody asks before 1000.
    expect(asked(s.permitsFreed(500))).toEqual([]);
    expect(s.nextWakeAt()).toBe(1000);
    expect(asked(s.tick(1000))).toEqual(['a', 'b', 'c']);
  });

  it('a call ready while a pause told from outside lasted says its start waited outside its run (replay holds it so)', () => {
    const s = gated(5);
    s.paused(100, { tool: 't', until: 1000, status: 429 });
    // Ready at 200, within the pause: it asks only at 1000, and its start says it waited outside.
    expect(asked(s.submit(200, { runId: 'r', tenant: 'x', calls: [{ id: 'a', tool: 't', args: {} }] }))).toEqual([]);
    expect(asked(s.tick(1000))).toEqual(['a']);
    const a = s.permitGranted(1005, 'r', 'a');
    const e = a?.events.find((x) => x.type === 'call.started');
    expect(e?.data).toMatchObject({ attempt: 1, waited: { since: 200, asked: 1000, outside: true } });
    // A call ready after the pause ended waited for nothing outside: no such mark.
    expect(asked(s.submit(2000, { runId: 'r2', tenant: 'x', calls: [{ id: 'b', tool: 't', args: {} }] }))).toEqual(['b']);
    const b = s.permitGranted(2000, 'r2', 'b')?.events.find((x) => x.type === 'call.started');
    expect(b?.data).toBeDefined();
    expect(b?.data).not.toHaveProperty('waited.outside');
  });
});
