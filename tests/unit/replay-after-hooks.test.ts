// An attempt with after_call hooks ends, for its recording, when the scheduler asked for the hooks: its
// places are given back then, and a call waiting for them starts at that time. The hook itself is called
// later (after the commit that holds the end), so a recording that ended the attempt when the first hook
// was called had the waiting call start before the end that let it go, and replay started it late.
import { describe, expect, it } from 'vitest';
import type { HookMatcher } from '../../src/core/hooks.js';
import { recordingOf } from '../../src/replay/recording.js';
import { replayRecording } from '../../src/replay/replay.js';
import { DEFAULTS, PURE, catalogOf, limits, rig, tool } from '../helpers/sched.js';

describe('after_call hooks in recordings', () => {
  it('the attempt ends when its hooks were asked for, so the call its end let go replays at its recorded start', () => {
    const x = tool('x', { ...PURE, idempotent: true });
    const audit: HookMatcher = { on: 'after_call', name: 'audit', match: { tool: 'x' } };
    const lim = { tool: { x: 1 } };
    // Each hook is called 1 ms after it was asked for (the commit before it), and answers after 5 ms.
    const r = rig({
      tools: [x],
      hooks: [audit],
      limits: lim,
      hook: (_req, now) => ({ at: now + 6, decisions: [{ hook: 'audit', startedAt: now + 1, durationMs: 5, decision: 'allow' }] }),
    });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 'x', args: { ms: 10 } },
        { id: 'b', tool: 'x', args: { ms: 10 } },
      ],
    });
    r.run();
    const config = { tools: [x], catalog: catalogOf([x]), policy: { rules: [] }, limits: limits(lim), defaults: DEFAULTS, hooks: [audit] };
    const rec = recordingOf(r.events, config);
    const at = (id: string) => rec.attempts.find((a) => a.callId === id);
    // a's place went back as it ended at 10, and b started then; a's hook was called at 11.
    expect(at('a')?.endMs).toBe(10);
    expect(at('b')?.startMs).toBe(10);
    expect(rec.hooks?.find((h) => h.callId === 'a')?.atMs).toBe(11);
    const replayed = replayRecording(rec).replayed.attempts.find((a) => a.callId === 'b');
    expect(replayed?.startMs).toBe(10);
  });
});
