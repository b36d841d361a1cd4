// Why a ready call waits (DESIGN §7, issue #21): `call.waiting` names the limit or lock that refused
// it, with its key, ceiling, use and holders, on the virtual clock, at exact times. And explaining
// waits changes no decision: the golden streamed scenarios give the same traces with it on.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { CoreEvent, EventOf } from '../../src/core/events.js';
import { RunProjection } from '../../src/core/view.js';
import { scenario, traceHash, traces } from '../helpers/stream-golden.js';
import { PURE, concurrency, rig, starts, tool } from '../helpers/sched.js';

type Waiting = EventOf<'call.waiting'>;
const waits = (events: CoreEvent[]) =>
  events
    .filter((e): e is Waiting => e.type === 'call.waiting')
    .map((e) => ({ at: e.at, run: e.runId, call: e.callId, waitingFor: e.data.waitingFor }));

const TOOLS = [
  tool('run_tests', { reads: ['file:*'], writes: [] }),
  tool('write_file', { reads: [], writes: ['file:{path}'] }),
  tool('deploy', { ...PURE, rate: { tokens: 1, perMs: 60_000 } }),
  tool('build', PURE),
  tool('pure', PURE),
];

describe('call.waiting', () => {
  it('a lock wait names the holder (run, call, since), and the wait is gone once the call starts', () => {
    const r = rig({ tools: TOOLS, explainWaits: true });
    r.submit(0, { runId: 'A', tenant: 'acme', calls: [{ id: 'tests', tool: 'run_tests', args: { ms: 4000 } }] });
    r.submit(900, { runId: 'B', tenant: 'acme', calls: [{ id: 'write', tool: 'write_file', args: { path: '/repo/a.ts', ms: 5 } }] });
    r.run();
    expect(waits(r.events)).toEqual([
      {
        at: 900,
        run: 'B',
        call: 'write',
        waitingFor: [
          { kind: 'lock', key: 'file:*', domain: 'tenant:acme', holders: [{ runId: 'A', callId: 'tests', tenant: 'acme', since: 0 }] },
        ],
      },
    ]);
    expect(starts(r.events)).toEqual(['0 A/tests', '4000 B/write']);
    // The run's view: waiting while A holds the lock, and not once the call started.
    const b = r.events.filter((e) => e.runId === 'B');
    const during = RunProjection.of(
      b.slice(
        0,
        b.findIndex((e) => e.type === 'call.started'),
      ),
    ).call('write');
    expect(during?.status).toBe('ready');
    expect(during?.waitingFor).toEqual([
      {
        kind: 'lock',
        key: 'file:*',
        domain: 'tenant:acme',
        holders: [{ runId: 'A', callId: 'tests', tenant: 'acme', since: '1970-01-01T00:00:00.000Z' }],
      },
    ]);
    const after = RunProjection.of(b).call('write');
    expect(after?.status).toBe('succeeded');
    expect(after).not.toHaveProperty('waitingFor');
  });

  it('a tool-limit wait names its holders with limit and inUse; a short queue follows the holders as they change', () => {
    const r = rig({ tools: TOOLS, limits: { tool: { build: 2 } }, explainWaits: true });
    r.submit(0, { runId: 'r1', calls: ['b1', 'b2', 'b3', 'b4'].map((id, i) => ({ id, tool: 'build', args: { ms: 10 * (i + 1) } })) });
    r.run();
    const holder = (callId: string, since: number) => ({ runId: 'r1', callId, tenant: 'acme', since });
    expect(waits(r.events)).toEqual([
      {
        at: 0,
        run: 'r1',
        call: 'b3',
        waitingFor: [{ kind: 'tool', key: 'build', limit: 2, inUse: 2, holders: [holder('b1', 0), holder('b2', 0)] }],
      },
      {
        at: 0,
        run: 'r1',
        call: 'b4',
        waitingFor: [{ kind: 'tool', key: 'build', limit: 2, inUse: 2, holders: [holder('b1', 0), holder('b2', 0)] }],
      },
      // b1 ends at 10 and b3 takes its place: b4 now waits for b2 and b3.
      {
        at: 10,
        run: 'r1',
        call: 'b4',
        waitingFor: [{ kind: 'tool', key: 'build', limit: 2, inUse: 2, holders: [holder('b2', 0), holder('b3', 10)] }],
      },
    ]);
    expect(starts(r.events)).toEqual(['0 b1', '0 b2', '10 b3', '20 b4']);
    expect(concurrency(r.events).max).toBe(2);
  });

  it('a rate wait gives retryAt: when the bucket has a token again', () => {
    const r = rig({ tools: TOOLS, explainWaits: true });
    r.submit(1000, {
      calls: [
        { id: 'd1', tool: 'deploy', args: { ms: 5 } },
        { id: 'd2', tool: 'deploy', args: { ms: 5 } },
      ],
    });
    r.run();
    expect(waits(r.events)).toEqual([
      {
        at: 1000,
        run: 'r1',
        call: 'd2',
        waitingFor: [{ kind: 'rate', key: 'tool:deploy', limit: 1, perMs: 60_000, retryAt: 61_000, holders: [] }],
      },
    ]);
    expect(starts(r.events)).toEqual(['1000 d1', '61000 d2']);
  });

  it('names the first limit in dispatch order, and what it waits for next when that one has room', () => {
    // perRun 1 refuses b2 first; when b1 ends, the tool limit (held by another run) is what is left.
    const r = rig({ tools: TOOLS, limits: { perRun: 1, tool: { build: 1 } }, explainWaits: true });
    r.submit(0, {
      runId: 'r1',
      calls: [
        { id: 'b1', tool: 'pure', args: { ms: 10 } },
        { id: 'b2', tool: 'build', args: { ms: 10 } },
      ],
    });
    r.submit(0, { runId: 'r2', calls: [{ id: 'x', tool: 'build', args: { ms: 30 } }] });
    r.run();
    expect(
      waits(r.events).map(
        (w) =>
          `${w.at} ${w.run}/${w.call} ${w.waitingFor.map((f) => `${f.kind}:${f.key} ${f.inUse}/${f.limit} by ${f.holders.map((h) => `${h.runId}/${h.callId}`)}`)}`,
      ),
    ).toEqual([
      // The per-run limit names no holders: they are the run's own running calls.
      '0 r1/b2 perRun:r1 1/1 by ',
      '10 r1/b2 tool:build 1/1 by r2/x',
    ]);
    expect(starts(r.events)).toEqual(['0 r1/b1', '0 r2/x', '30 r1/b2']);
  });

  it('a global wait names the global limit; a lock wait queued behind an earlier waiter names it', () => {
    const r = rig({ tools: TOOLS, limits: { global: 1 }, explainWaits: true });
    r.submit(0, { runId: 'A', calls: [{ id: 'tests', tool: 'run_tests', args: { ms: 50 } }] });
    r.submit(1, { runId: 'B', calls: [{ id: 'p', tool: 'pure', args: { ms: 5 } }] });
    r.run();
    expect(waits(r.events)).toEqual([
      {
        at: 1,
        run: 'B',
        call: 'p',
        waitingFor: [{ kind: 'global', limit: 1, inUse: 1, holders: [{ runId: 'A', callId: 'tests', tenant: 'acme', since: 0 }] }],
      },
    ]);

    const q = rig({ tools: TOOLS, explainWaits: true });
    q.submit(0, { runId: 'A', calls: [{ id: 'w', tool: 'write_file', args: { path: '/x', ms: 50 } }] });
    q.submit(1, { runId: 'B', calls: [{ id: 'w', tool: 'write_file', args: { path: '/x', ms: 5 } }] });
    q.submit(2, { runId: 'C', calls: [{ id: 'w', tool: 'write_file', args: { path: '/x', ms: 5 } }] });
    q.run();
    expect(waits(q.events).map((w) => `${w.at} ${w.run} ${JSON.stringify(w.waitingFor)}`)).toEqual([
      `1 B [{"kind":"lock","key":"file:/x","domain":"tenant:acme","holders":[{"runId":"A","callId":"w","tenant":"acme","since":0}]}]`,
      `2 C [{"kind":"lock","key":"file:/x","domain":"tenant:acme","holders":[{"runId":"A","callId":"w","tenant":"acme","since":0}]}]`,
      // A ends at 50, B starts: C now waits for B.
      `50 C [{"kind":"lock","key":"file:/x","domain":"tenant:acme","holders":[{"runId":"B","callId":"w","tenant":"acme","since":50}]}]`,
    ]);
    expect(starts(q.events)).toEqual(['0 A/w', '50 B/w', '55 C/w']);
  });

  it('limitsInUse: every limit and lock in use, with holders, waiters and the longest wait', () => {
    const r = rig({ tools: TOOLS, limits: { tool: { build: 1 } }, explainWaits: true });
    r.submit(0, {
      runId: 'A',
      calls: [
        { id: 'tests', tool: 'run_tests', args: { ms: 100 } },
        { id: 'b', tool: 'build', args: { ms: 100 } },
      ],
    });
    r.submit(10, {
      runId: 'B',
      calls: [
        { id: 'write', tool: 'write_file', args: { path: '/a', ms: 1 } },
        { id: 'b', tool: 'build', args: { ms: 1 } },
      ],
    });
    let seen: unknown;
    r.sim.at(40, () => {
      seen = r.scheduler.limitsInUse(40);
      return { events: [], starts: [], aborts: [] };
    });
    r.run();
    const holder = (callId: string) => ({ runId: 'A', callId, tenant: 'acme', since: 0 });
    expect(seen).toEqual([
      { kind: 'tool', key: 'build', limit: 1, inUse: 1, waiting: 1, longestWaitMs: 30, holders: [holder('b')] },
      { kind: 'lock', key: 'file:*', domain: 'tenant:acme', inUse: 1, waiting: 1, longestWaitMs: 30, holders: [holder('tests')] },
    ]);
    expect(r.scheduler.limitsInUse(1000)).toEqual([]);
  });
});

describe('explaining waits changes no decision', () => {
  it('400 golden streamed scenarios give their recorded traces with explainWaits on (its events left out)', () => {
    const golden = JSON.parse(readFileSync(new URL('../fixtures/stream-golden.json', import.meta.url), 'utf8')) as { hashes: string[] };
    const differ: number[] = [];
    let waited = 0;
    for (let seed = 0; seed < 400; seed++) {
      if (traceHash(traces(scenario(seed), true, (n) => (waited += n > 0 ? 1 : 0))) !== golden.hashes[seed]) differ.push(seed);
    }
    expect(differ).toEqual([]);
    // Some scenarios wait (a global limit of 1 to 4; most calls are ordered by hazards anyway): the
    // events were there, and changed nothing.
    expect(waited).toBeGreaterThan(20);
  }, 120_000);
});
