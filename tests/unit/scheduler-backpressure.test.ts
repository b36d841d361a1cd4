// Backpressure (DESIGN §4) on the virtual clock: an attempt whose answer asks to be left alone (a 429,
// a 503 with Retry-After, an MCP `_meta.retryAfterMs`) pauses its tool, or its keyed group: no call of
// it starts until then, the waiting calls keep their attempt count (they never started), and the call
// that got it runs again if its tool is idempotent.
import { describe, expect, it } from 'vitest';
import { callError } from '../../src/core/errors.js';
import type { EventOf } from '../../src/core/events.js';
import { PURE, rig, runStatus, starts, tool, type Script, defaultScript } from '../helpers/sched.js';

/** Attempt 1 of a call with `args.pause` answers a 429 asking for `args.pause` ms. */
const script: Script = (s, now) => {
  const a = s.args as Record<string, unknown>;
  if (typeof a.pause === 'number' && s.attempt === 1)
    return {
      durationMs: 10,
      result: { ok: false, error: callError('tool_error', 'HTTP 429'), retryable: true, pauseMs: a.pause, pauseStatus: 429 },
    };
  return defaultScript(s, now);
};

const calls = (n: number, t = 'api', args: Record<string, unknown> = {}) =>
  Array.from({ length: n }, (_, i) => ({ id: `a${i + 1}`, tool: t, args: { ...args } }));

describe('backpressure', () => {
  it('after a 429 asking for 1 s, no call of the tool starts for 1 s; waiting calls keep their attempt count', () => {
    const api = tool('api', { ...PURE, idempotent: true });
    const r = rig({ tools: [api, tool('other', PURE)], limits: { tool: { api: 2 } }, script, explainWaits: true });
    const list = calls(4);
    (list[0] as { args: Record<string, unknown> }).args.pause = 1000;
    r.submit(0, { calls: [...list, { id: 'o1', tool: 'other', args: { ms: 500 } }, { id: 'o2', tool: 'other', args: { ms: 500 } }] });
    r.run();
    // a1 got the 429 at 10: nothing of api starts before 1010; another tool is not held back.
    expect(starts(r.events)).toEqual(['0 a1', '0 a2', '0 o1', '0 o2', '1010 a1', '1010 a3', '1020 a4']);
    const started = r.events.filter((e): e is EventOf<'call.started'> => e.type === 'call.started');
    // The waiting calls never started meanwhile: their first attempt is attempt 1.
    expect(started.filter((e) => e.callId === 'a3' || e.callId === 'a4').map((e) => e.data.attempt)).toEqual([1, 1]);
    // The call that got it ran again (idempotent), after the pause, as attempt 2.
    expect(started.filter((e) => e.callId === 'a1').map((e) => [e.at, e.data.attempt])).toEqual([
      [0, 1],
      [1010, 2],
    ]);
    const retry = r.events.find((e): e is EventOf<'call.retry_scheduled'> => e.type === 'call.retry_scheduled');
    expect(retry?.data).toMatchObject({ attempt: 2, at: 1010, pauseMs: 1000, pauseStatus: 429 });
    // The waiting calls say why, and until when.
    const waits = r.events.filter((e): e is EventOf<'call.waiting'> => e.type === 'call.waiting' && e.callId === 'a3');
    expect(waits.at(-1)?.data.waitingFor).toEqual([{ kind: 'backoff', key: 'api', tool: 'api', until: 1010, status: 429, holders: [] }]);
    expect(runStatus(r.events)).toBe('succeeded');
  });

  it('pauses only the keyed group of a tool with keyed concurrency', () => {
    const push = tool('push', { ...PURE, idempotent: true, keyedConcurrency: { limit: 1, per: '{repo}' } });
    const r = rig({ tools: [push], script });
    r.submit(0, {
      calls: [
        { id: 'w1', tool: 'push', args: { repo: 'web', pause: 500 } },
        { id: 'w2', tool: 'push', args: { repo: 'web' } },
        { id: 'p1', tool: 'push', args: { repo: 'api' } },
        { id: 'p2', tool: 'push', args: { repo: 'api' } },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 w1', '0 p1', '10 p2', '510 w1', '520 w2']);
  });

  it('a non-idempotent call that got it fails (not run again); the tool still pauses', () => {
    const once = tool('once', PURE);
    const r = rig({ tools: [once], limits: { tool: { once: 1 } }, script });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 'once', args: { pause: 300 } },
        { id: 'b', tool: 'once', args: {} },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 a', '310 b']);
    const failed = r.events.find((e): e is EventOf<'call.failed'> => e.type === 'call.failed');
    expect(failed?.data).toMatchObject({ attempt: 1, pauseMs: 300, pauseStatus: 429 });
    expect(runStatus(r.events)).toBe('partial');
  });

  it('a pause told from outside (another replica) holds the tool back until it ends', () => {
    const api = tool('api', { ...PURE, idempotent: true });
    const r = rig({ tools: [api] });
    r.sim.at(0, (now) => r.scheduler.paused(now, { tool: 'api', until: 250, status: 503 }));
    r.submit(5, { calls: calls(2) });
    r.run();
    expect(starts(r.events)).toEqual(['250 a1', '250 a2']);
  });
});
