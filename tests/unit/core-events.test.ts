import { describe, expect, it } from 'vitest';
import { EVENT_PAYLOAD_SCHEMAS, InvalidEvent, checkEvent } from '../../src/core/event-schema.js';
import { EVENT_TYPES, withSeq, type CoreEvent } from '../../src/core/events.js';
import { Scheduler } from '../../src/core/scheduler.js';
import { RunProjection } from '../../src/core/view.js';
import { scenario, traces } from '../helpers/stream-golden.js';
import { DEFAULTS, catalogOf, limits, rig, tool } from '../helpers/sched.js';

/** Every event of 150 golden scenarios (streamed runs: reviews, retries, cancels, compensations), and a replan. */
function sampleEvents(): CoreEvent[] {
  const out: CoreEvent[] = [];
  for (let seed = 0; seed < 150; seed++) out.push(...traces(scenario(seed)).events);
  const r = rig({ tools: [tool('t', { idempotent: true })], defaultFailure: 'replan' });
  r.submit(0, {
    calls: [
      { id: 'a', tool: 't', args: { fail: 'always' } },
      { id: 'b', tool: 't', args: { x: '${a.output}' } },
    ],
  });
  r.sim.at(100, (now) => r.scheduler.replan(now, 'r1', [{ id: 'c', tool: 't', args: {} }]));
  r.run();
  out.push(...r.events);
  // A hook's decisions (DESIGN §14): a before_call rewrite and an after_call replacement.
  const h = rig({
    tools: [tool('t')],
    hooks: [
      { on: 'before_call', name: 'guard', match: {} },
      { on: 'after_call', name: 'redact', match: {} },
    ],
    hook: (req, now) => ({
      at: now + 1,
      decisions: [
        req.on === 'before_call'
          ? { hook: 'guard', decision: 'allow', startedAt: now, durationMs: 1, args: { x: 1 } }
          : { hook: 'redact', decision: 'replace', startedAt: now, durationMs: 1, output: 'hidden' },
      ],
    }),
  });
  h.submit(0, { calls: [{ id: 'a', tool: 't', args: {} }] });
  h.run();
  out.push(...h.events);
  // Waits explained (`call.waiting`): a tool limit, a rate and a lock.
  const w = rig({
    tools: [tool('t', { reads: [], writes: ['k:{a}'], rate: { tokens: 2, perMs: 1000 } })],
    limits: { tool: { t: 1 } },
    explainWaits: true,
  });
  w.submit(0, {
    calls: [
      { id: 'a', tool: 't', args: { a: 'x' } },
      { id: 'b', tool: 't', args: { a: 'y' } },
      { id: 'c', tool: 't', args: { a: 'z' } },
    ],
  });
  w.submit(1, { runId: 'r2', calls: [{ id: 'a', tool: 't', args: { a: 'x' } }] });
  w.run();
  out.push(...w.events);
  // A run taken back from its events while a call ran (`run.resumed`: a takeover, a restart).
  const k = rig({ tools: [tool('t', { idempotent: true })] });
  k.submit(0, { calls: [{ id: 'a', tool: 't', args: { ms: 50 } }] });
  k.run();
  const before = k.events.filter((e) => e.type !== 'call.succeeded' && e.type !== 'run.completed');
  const fresh = new Scheduler({
    catalog: catalogOf([tool('t', { idempotent: true })]),
    policy: { rules: [] },
    limits: limits(),
    defaults: DEFAULTS,
  });
  const resumed = fresh.restore(100, before).events;
  expect(resumed.map((e) => e.type)).toEqual(['run.resumed', 'call.ready', 'call.started']);
  out.push(...before, ...resumed);
  // A pause told from outside the run (`run.tool_paused`): another replica's 429 of its tool.
  const p = rig({ tools: [tool('t')] });
  p.submit(0, { calls: [{ id: 'a', tool: 't', args: { ms: 50 } }] });
  p.sim.at(10, (now) => p.scheduler.paused(now, { tool: 't', until: 200, status: 429 }));
  p.run();
  out.push(...p.events);
  return out;
}

describe('typed events and their schema', () => {
  const events = sampleEvents();

  it('has one payload schema per event type, and the list names every type once', () => {
    expect(Object.keys(EVENT_PAYLOAD_SCHEMAS).sort()).toEqual([...EVENT_TYPES].sort());
    expect(new Set(EVENT_TYPES).size).toBe(EVENT_TYPES.length);
  });

  it('accepts every event the scheduler emits, of every type', () => {
    expect(new Set(events.map((e) => e.type))).toEqual(new Set(EVENT_TYPES));
    for (const e of events) expect(checkEvent(e)).toBe(e);
    // Numbered (as the engine stores them) too.
    expect(checkEvent(withSeq(events[0] as CoreEvent, 1))).toMatchObject({ seq: 1 });
  });

  it('refuses an event that is not what its type says, naming the field', () => {
    const bad = (e: unknown) => {
      try {
        checkEvent(e);
      } catch (err) {
        expect(err).toBeInstanceOf(InvalidEvent);
        return (err as InvalidEvent).problems;
      }
      return [];
    };
    const base = { runId: 'r1', at: 5 };
    expect(bad({ ...base, type: 'call.started', callId: 'c', data: { attempt: 0, args: {} } })).toEqual([
      expect.stringMatching(/^call\.started data\.attempt: /),
    ]);
    expect(bad({ ...base, type: 'call.failed', callId: 'c', data: { error: { code: 'no_such_code', message: 'x' } } })).toEqual([
      expect.stringMatching(/^call\.failed data\.error\.code: /),
    ]);
    expect(bad({ ...base, type: 'run.completed', data: { status: 'done' } })).toEqual([
      expect.stringMatching(/^run\.completed data\.status: /),
    ]);
    expect(bad({ ...base, type: 'run.exploded', data: {} })).toEqual([expect.stringMatching(/^type: /)]);
    expect(bad({ type: 'call.ready', at: 1, data: {} })).toEqual([expect.stringMatching(/^runId: /)]);
    expect(bad({ ...base, type: 'call.ready', callId: 'c', data: { extra: 1 } })).toEqual([
      expect.stringMatching(/^call\.ready data\.extra: /),
    ]);
  });

  it('makes restore refuse a log that does not match, before it believes any of it', () => {
    const r = rig({ tools: [tool('t')] });
    r.submit(0, { calls: [{ id: 'a', tool: 't' }] });
    r.run();
    const log = r.events.map((e) => (e.type === 'call.succeeded' ? { ...e, data: { ...e.data, attempt: 'one' } } : e)) as CoreEvent[];
    const fresh = new Scheduler({ catalog: catalogOf([tool('t')]), policy: { rules: [] }, limits: limits(), defaults: DEFAULTS });
    expect(() => fresh.restore(100, log)).toThrow(/event \d+ of the log: call\.succeeded data\.attempt: /);
    expect(fresh.runStatus('r1')).toBeUndefined();
    expect(fresh.restore(100, r.events).events).toEqual([]);
    expect(fresh.runStatus('r1')).toBe('succeeded');
  });

  it('folds every sample run into a view whose calls end as their last events say', () => {
    const byRun = new Map<string, CoreEvent[]>();
    let k = 0;
    for (const e of events) {
      if (e.type === 'run.created') byRun.set(`${k++}`, []);
      byRun.get(`${k - 1}`)?.push(e);
    }
    for (const log of byRun.values()) {
      const view = RunProjection.of(log).view;
      const last = log.filter((e) => e.type === 'run.completed').at(-1);
      if (last?.type === 'run.completed') expect(view.status).toBe(last.data.status);
      const listed = log.flatMap((e) =>
        e.type === 'run.created' || e.type === 'run.calls_added' || e.type === 'run.replanned' ? e.data.calls.map((c) => c.id) : [],
      );
      expect(view.calls.map((c) => c.id)).toEqual(listed);
    }
  });
});
