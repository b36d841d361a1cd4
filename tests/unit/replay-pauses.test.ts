// Flow control replays exactly (DESIGN §4, §8; #32 item 7): runs share one scheduler on the virtual
// clock, as on one process, with keyed limits, priorities, a held run, a 429 pause, a pause told from
// outside (another replica's, `Scheduler.paused`) and queue timeouts. Each run's recording, made from
// its own events as the server makes it, replays alone with 0 divergences at the default tolerance;
// dropping the recorded pauses (or the queue-timeout rule) makes them diverge, so the checks can fail.
import { describe, expect, it } from 'vitest';
import type { Recording } from '../../src/contract/recording.js';
import { callError } from '../../src/core/errors.js';
import type { CoreEvent } from '../../src/core/events.js';
import type { Limits, ToolManifest } from '../../src/core/tool.js';
import { checkRecording } from '../../src/replay/check.js';
import { recordingOf } from '../../src/replay/recording.js';
import { replayRecording } from '../../src/replay/replay.js';
import { DEFAULTS, PURE, catalogOf, defaultScript, limits, rig, tool, type Script } from '../helpers/sched.js';

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

/** Each run's recording, from its own events (as `GET /v1/runs/{id}/recording` makes it). */
function recordings(events: readonly CoreEvent[], tools: ToolManifest[], lim: Partial<Limits>): Recording[] {
  const config = { tools, catalog: catalogOf(tools), policy: { rules: [] }, limits: limits(lim), defaults: DEFAULTS };
  const ids = [...new Set(events.map((e) => e.runId))];
  return ids.map((id) =>
    recordingOf(
      events.filter((e) => e.runId === id),
      config,
    ),
  );
}

/** What `toolgraph replay` calls a divergence (default tolerance), and every start not at its recorded time. */
function divergences(recs: readonly Recording[]): string[] {
  return recs.flatMap((r) => {
    const res = checkRecording(r, r.run.id);
    const out = res.ok ? [] : [`${r.run.id}: ${JSON.stringify(res.divergences).slice(0, 300)}`];
    const replayed = new Map(replayRecording(r).replayed.attempts.map((a) => [`${a.compensation === true}/${a.callId}/${a.attempt}`, a]));
    for (const a of r.attempts) {
      const b = replayed.get(`${a.compensation === true}/${a.callId}/${a.attempt}`);
      if (b?.startMs !== a.startMs)
        out.push(`${r.run.id}: ${a.callId} attempt ${a.attempt} started at ${b?.startMs}, recorded at ${a.startMs}`);
    }
    return out;
  });
}

const api = tool('api', { ...PURE, idempotent: true });

describe('pauses replay as outside inputs', () => {
  it("another run's 429 on the same process: the waiting run records the pause and replays it", () => {
    // Not idempotent: a1 is not retried after its 429, so nothing else tells b1's start it waited.
    const once = tool('api', PURE);
    const other = tool('other', PURE);
    const r = rig({ tools: [once, other], script });
    r.submit(0, { calls: [{ id: 'a1', tool: 'api', args: { pause: 1000 } }] });
    r.submit(20, {
      runId: 'r2',
      calls: [
        { id: 'b1', tool: 'api', args: {} },
        { id: 'p1', tool: 'other', args: { ms: 100 } },
        { id: 'o1', tool: 'other', args: { x: '${p1.output}' } },
      ],
    });
    r.run();
    const [r1, r2] = recordings(r.events, [once, other], {}) as [Recording, Recording];
    // r2 learned the pause as it arrived; r1's own 429 is in its attempt, not a recorded pause.
    expect(r2.pauses).toEqual([{ atMs: 0, tool: 'api', untilMs: 990, status: 429 }]);
    expect(r1.pauses).toBeUndefined();
    expect(r2.attempts.map((a) => [a.callId, a.startMs, a.waits])).toEqual([
      ['p1', 0, undefined],
      ['o1', 100, undefined],
      ['b1', 990, undefined],
    ]);
    expect(divergences([r1, r2])).toEqual([]);
    // Without the recorded pause, b1 starts as soon as it is ready, before o1: `toolgraph replay` says so.
    const { pauses: _, ...dropped } = r2;
    expect(checkRecording(dropped, 'r2').divergences).toMatchObject([
      { kind: 'order', before: { callId: 'o1', recordedMs: 100, replayMs: 100 }, after: { callId: 'b1', recordedMs: 990, replayMs: 0 } },
    ]);
  });

  it('a pause told from outside (another replica): its queue timeout and its later start replay exactly', () => {
    const slow = tool('slow', { ...PURE, queueTimeoutMs: 300 });
    const r = rig({ tools: [slow, api], script });
    r.submit(0, {
      calls: [
        { id: 'c1', tool: 'api', args: { ms: 50 } },
        { id: 'c2', tool: 'slow', args: { x: '${c1.output}' } },
        { id: 'c3', tool: 'api', args: { x: '${c1.output}' } },
      ],
    });
    r.sim.at(5, (now) => r.scheduler.paused(now, { tool: 'slow', until: 1000, status: 429 }));
    r.sim.at(6, (now) => r.scheduler.paused(now, { tool: 'api', until: 500 }));
    r.run();
    const [rec] = recordings(r.events, [slow, api], {}) as [Recording];
    expect(rec.pauses).toEqual([
      { atMs: 5, tool: 'slow', untilMs: 1000, status: 429 },
      { atMs: 6, tool: 'api', untilMs: 500 },
    ]);
    expect(rec.result.calls.map((c) => [c.id, c.status, c.error?.code])).toEqual([
      ['c1', 'succeeded', undefined],
      ['c2', 'failed', 'queue_timeout'],
      ['c3', 'succeeded', undefined],
    ]);
    expect(rec.attempts.map((a) => [a.callId, a.startMs])).toEqual([
      ['c1', 0],
      ['c3', 500],
    ]);
    expect(divergences([rec])).toEqual([]);
    // c3's start also says it waited outside its run (outside.ts), and c2's queue timeout holds it
    // back in replay: with the pause dropped it still matches, and only with both records gone not.
    const { pauses: _, ...dropped } = rec;
    expect(divergences([dropped])).toEqual([]);
    const bare = { ...dropped, attempts: dropped.attempts.map(({ waits: _w, ...a }) => a) };
    expect(divergences([bare])).toHaveLength(1);
  });

  it('keyed limits, priorities and a held run over several runs: every recording replays with 0 divergences', () => {
    const repo = tool('repo', { ...PURE, keyedConcurrency: { limit: 1, per: '{repo}' }, queueTimeoutMs: 100 });
    const edit = tool('edit', { ...PURE, reads: [], writes: ['repo:{repo}/{file}'] });
    const lim: Partial<Limits> = { each: { 'repo:*': 1 }, global: 3 };
    const r = rig({ tools: [repo, edit, api], limits: lim, script });
    const batch = (p: string, n: number) => [
      { id: `${p}1`, tool: 'repo', args: { repo: 'web', ms: 60 } },
      { id: `${p}2`, tool: 'repo', args: { repo: 'api', ms: 40 } },
      { id: `${p}3`, tool: 'edit', args: { repo: 'web', file: `f${n}`, ms: 30 } },
      { id: `${p}4`, tool: 'edit', args: { repo: 'web', file: `g${n}`, ms: 30 } },
      { id: `${p}5`, tool: 'api', args: { ms: 20, ...(n === 2 ? { pause: 200 } : {}) } },
    ];
    r.submit(0, { runId: 'bg', priority: 5, calls: batch('b', 1) });
    r.submit(5, { runId: 'urgent', priority: 1, calls: batch('u', 2) });
    r.submit(10, { runId: 'mid', calls: batch('m', 3) });
    // One run per key, queued (DESIGN §4): held until `bg` ends, then released.
    r.submit(12, { runId: 'next', held: true, meta: { concurrencyKey: 'chat' }, calls: batch('n', 4) });
    r.sim.at(400, (now) => r.scheduler.release(now, 'next'));
    r.run();
    const recs = recordings(r.events, [repo, edit, api], lim);
    expect(recs.map((x) => x.run.id)).toEqual(['bg', 'urgent', 'mid', 'next']);
    // The workload had all of it: waits for other runs, a queue timeout, a pause, a release.
    const all = recs.flatMap((x) => x.result.calls);
    // m1 timed out behind the other runs' calls of repo web (its keyed group): replay, running `mid`
    // alone, holds it back under its own config until its queue timeout ends it, as it did.
    expect(all.filter((c) => c.error?.code === 'queue_timeout').map((c) => c.id)).toEqual(['m1']);
    expect(recs.map((x) => (x.pauses ?? []).length)).toEqual([1, 0, 1, 1]); // urgent's own u5 got the 429
    expect(recs.flatMap((x) => x.attempts).some((a) => a.waits?.some((w) => w.kind === 'turn' && w.toMs > w.fromMs))).toBe(true);
    expect(recs.find((x) => x.run.id === 'next')?.releasedAtMs).toBe(388);
    expect(divergences(recs)).toEqual([]);
  });
});

describe('a command from another replica', () => {
  it('cancel_running: a run superseded by a newer run of its key replays superseded, as recorded', () => {
    const work = tool('work', { ...PURE, idempotent: true });
    const r = rig({ tools: [work] });
    r.submit(0, {
      meta: { concurrencyKey: 'chat' },
      calls: [
        { id: 'a', tool: 'work', args: { ms: 100 } },
        { id: 'b', tool: 'work', args: { x: '${a.output}' } },
      ],
    });
    r.sim.at(40, (now) => r.scheduler.cancel(now, 'r1', 'run_new'));
    r.run();
    const [rec] = recordings(r.events, [work], {}) as [Recording];
    expect(rec.supersededBy).toBe('run_new');
    expect(rec.result.calls.map((c) => [c.id, c.status, c.error?.code])).toEqual([
      ['a', 'cancelled', 'superseded'], // aborted while it ran
      ['b', 'cancelled', 'superseded'],
    ]);
    expect(divergences([rec])).toEqual([]);
    // Replayed as a plain cancel, its calls would say `cancelled`: the check can fail.
    const { supersededBy: _, ...plain } = rec;
    expect(checkRecording(plain, 'plain').ok).toBe(false);
  });
});
