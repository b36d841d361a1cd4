// Limits (DESIGN §4) on the virtual clock. Every limit is proved both ways: never exceeded at any point
// of the event log, *and* reached (a scheduler that ran everything one at a time would fail these), with
// the exact start times and orders the limit implies.
import { describe, expect, it } from 'vitest';
import type { CoreEvent } from '../../src/core/events.js';
import { overlaps, parseKey } from '../../src/core/resources.js';
import { PURE, concurrency, illegalMoves, rig, runStatus, starts, tool, toolsOf } from '../helpers/sched.js';

const calls = (prefix: string, n: number, tool_ = 'pure', args: Record<string, unknown> = {}) =>
  Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i + 1}`, tool: tool_, args: { ...args } }));

const inRun = (runId: string) => (e: CoreEvent) => e.runId === runId;

describe('tool limit', () => {
  it('2 of 6 calls of one tool run at once, never 3; another tool is not held back', () => {
    const r = rig({ tools: [tool('t', PURE), tool('u', PURE)], limits: { tool: { t: 2 } } });
    r.submit(0, { calls: [...calls('t', 6, 't'), ...calls('u', 2, 'u')] });
    r.run();
    expect(starts(r.events)).toEqual(['0 t1', '0 t2', '0 u1', '0 u2', '10 t3', '10 t4', '20 t5', '20 t6']);
    const tools = toolsOf(r.events);
    expect(concurrency(r.events, (e) => tools.get(`${e.runId}/${e.callId}`) === 't').max).toBe(2);
    expect(concurrency(r.events).max).toBe(4);
    expect(runStatus(r.events)).toBe('succeeded');
  });

  it('counts calls of every run of every tenant', () => {
    const r = rig({ tools: [tool('t', PURE)], limits: { tool: { t: 2 } } });
    r.submit(0, { runId: 'r1', tenant: 'a', calls: calls('x', 2, 't', { ms: 10 }) });
    r.submit(0, { runId: 'r2', tenant: 'b', calls: calls('y', 2, 't', { ms: 10 }) });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/x1', '0 r1/x2', '10 r2/y1', '10 r2/y2']);
    expect(concurrency(r.events).max).toBe(2);
  });
});

describe('per-run limit', () => {
  it('holds one run to 3 at once while another run of the same tenant goes on', () => {
    const r = rig({ tools: [tool('pure', PURE)], limits: { perRun: 3 } });
    r.submit(0, { runId: 'r1', calls: calls('a', 7) });
    r.submit(0, { runId: 'r2', calls: calls('b', 2) });
    r.run();
    expect(starts(r.events)).toEqual([
      '0 r1/a1',
      '0 r1/a2',
      '0 r1/a3',
      '0 r2/b1',
      '0 r2/b2',
      '10 r1/a4',
      '10 r1/a5',
      '10 r1/a6',
      '20 r1/a7',
    ]);
    expect(concurrency(r.events, inRun('r1')).max).toBe(3);
    expect(concurrency(r.events, inRun('r2')).max).toBe(2);
    expect(concurrency(r.events).max).toBe(5);
  });
});

describe('tenant limit', () => {
  it('caps two runs of one tenant together; another tenant is not held back', () => {
    const r = rig({ tools: [tool('pure', PURE)], limits: { tenant: { acme: 2 } } });
    r.submit(0, { runId: 'r1', tenant: 'acme', calls: calls('a', 3) });
    r.submit(0, { runId: 'r2', tenant: 'acme', calls: calls('b', 3) });
    r.submit(0, { runId: 'r3', tenant: 'other', calls: calls('c', 3) });
    r.run();
    expect(starts(r.events)).toEqual([
      '0 r1/a1',
      '0 r1/a2',
      '0 r3/c1',
      '0 r3/c2',
      '0 r3/c3',
      '10 r1/a3',
      '10 r2/b1',
      '20 r2/b2',
      '20 r2/b3',
    ]);
    const acme = (e: CoreEvent) => e.runId === 'r1' || e.runId === 'r2';
    expect(concurrency(r.events, acme).max).toBe(2);
    expect(concurrency(r.events, inRun('r3')).max).toBe(3);
  });

  it('`default` applies to every tenant not named, each on its own', () => {
    const r = rig({ tools: [tool('pure', PURE)], limits: { tenant: { default: 1, big: 3 } } });
    r.submit(0, { runId: 'r1', tenant: 'x', calls: calls('a', 2) });
    r.submit(0, { runId: 'r2', tenant: 'y', calls: calls('b', 2) });
    r.submit(0, { runId: 'r3', tenant: 'big', calls: calls('c', 4) });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/a1', '0 r2/b1', '0 r3/c1', '0 r3/c2', '0 r3/c3', '10 r1/a2', '10 r2/b2', '10 r3/c4']);
    expect(concurrency(r.events, inRun('r1')).max).toBe(1);
    expect(concurrency(r.events, inRun('r2')).max).toBe(1);
    expect(concurrency(r.events, inRun('r3')).max).toBe(3);
  });
});

describe('global limit and fairness', () => {
  it('caps calls across tenants at 3, and reaches it; tenants take turns round robin', () => {
    const r = rig({ tools: [tool('pure', PURE)], limits: { global: 3 } });
    r.submit(0, { runId: 'r1', tenant: 'A', calls: calls('a', 4) });
    r.submit(0, { runId: 'r2', tenant: 'B', calls: calls('b', 4) });
    r.run();
    // A took the first three slots; when they free up, B (not served yet) goes first, then A, then B.
    expect(starts(r.events)).toEqual(['0 r1/a1', '0 r1/a2', '0 r1/a3', '10 r2/b1', '10 r1/a4', '10 r2/b2', '20 r2/b3', '20 r2/b4']);
    expect(concurrency(r.events).max).toBe(3);
  });

  it('a big run of tenant A does not starve a small run of tenant B submitted after it', () => {
    const r = rig({ tools: [tool('pure', PURE)], limits: { global: 2 } });
    r.submit(0, { runId: 'big', tenant: 'A', calls: calls('a', 50) });
    r.submit(0, { runId: 'small', tenant: 'B', calls: calls('b', 2) });
    r.run();
    const s = starts(r.events);
    expect(s.slice(0, 6)).toEqual(['0 big/a1', '0 big/a2', '10 small/b1', '10 big/a3', '20 small/b2', '20 big/a4']);
    expect(s).toHaveLength(52);
    expect(concurrency(r.events).max).toBe(2);
    const done = (runId: string) => r.events.find((e) => e.type === 'run.completed' && e.runId === runId)?.at;
    expect(done('small')).toBe(30);
    expect(done('big')).toBe(260);
  });

  it('three tenants share the slots round robin', () => {
    const r = rig({ tools: [tool('pure', PURE)], limits: { global: 1 } });
    r.submit(0, { runId: 'r1', tenant: 'A', calls: calls('a', 3) });
    r.submit(0, { runId: 'r2', tenant: 'B', calls: calls('b', 3) });
    r.submit(0, { runId: 'r3', tenant: 'C', calls: calls('c', 3) });
    r.run();
    expect(starts(r.events).map((s) => s.split(' ')[1])).toEqual([
      'r1/a1',
      'r2/b1',
      'r3/c1',
      'r1/a2',
      'r2/b2',
      'r3/c2',
      'r1/a3',
      'r2/b3',
      'r3/c3',
    ]);
  });

  it('within a tenant, runs go by arrival', () => {
    const r = rig({ tools: [tool('pure', PURE)], limits: { global: 2 } });
    r.submit(0, { runId: 'r1', calls: calls('a', 3) });
    r.submit(0, { runId: 'r2', calls: calls('b', 2) });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/a1', '0 r1/a2', '10 r1/a3', '10 r2/b1', '20 r2/b2']);
  });
});

describe('resource limit', () => {
  it('counts every running call whose resources overlap the key, across runs and whatever the scope', () => {
    const q = tool('q', { reads: ['db:{name}'], writes: [], scope: 'run' });
    const r = rig({ tools: [q], limits: { resource: { 'db:main': 2 } } });
    r.submit(0, {
      runId: 'r1',
      calls: [
        { id: 'a', tool: 'q', args: { name: 'main' } },
        { id: 'b', tool: 'q', args: { name: 'main/t1' } }, // a segment below db:main: overlaps
        { id: 'c', tool: 'q', args: { name: 'main' } },
      ],
    });
    r.submit(0, {
      runId: 'r2',
      calls: [
        { id: 'a', tool: 'q', args: { name: 'main' } },
        { id: 'b', tool: 'q', args: { name: 'main' } },
        { id: 'o', tool: 'q', args: { name: 'other' } },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/a', '0 r1/b', '0 r2/o', '10 r1/c', '10 r2/a', '20 r2/b']);
    const main = parseKey('db:main');
    const touchesMain = (e: CoreEvent) => e.type === 'call.started' && overlaps(parseKey(`db:${String(e.data.args.name)}`), main);
    expect(concurrency(r.events, touchesMain).max).toBe(2);
    expect(concurrency(r.events).max).toBe(3);
  });
});

describe('reader–writer locks across runs', () => {
  const rw = (scope: 'run' | 'tenant' | 'global') => [
    tool('read', { reads: ['file:{path}'], writes: [], scope }),
    tool('write', { reads: [], writes: ['file:{path}'], scope }),
  ];

  it('scope tenant: a run waits for another run of its tenant that writes what it reads', () => {
    const r = rig({ tools: rw('tenant') });
    r.submit(0, { runId: 'r1', calls: [{ id: 'w', tool: 'write', args: { path: '/a', ms: 30 } }] });
    r.submit(0, {
      runId: 'r2',
      calls: [
        { id: 'ra', tool: 'read', args: { path: '/a', ms: 10 } },
        { id: 'rb', tool: 'read', args: { path: '/b', ms: 10 } },
        { id: 'wa', tool: 'write', args: { path: '/a', ms: 10 } },
      ],
    });
    r.submit(0, { runId: 'r3', tenant: 'other', calls: [{ id: 'ra', tool: 'read', args: { path: '/a', ms: 10 } }] });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/w', '0 r2/rb', '0 r3/ra', '30 r2/ra', '40 r2/wa']);
  });

  it('scope global: runs of different tenants lock each other', () => {
    const r = rig({ tools: rw('global') });
    r.submit(0, { runId: 'r1', tenant: 'A', calls: [{ id: 'w', tool: 'write', args: { path: '/a', ms: 30 } }] });
    r.submit(0, { runId: 'r2', tenant: 'B', calls: [{ id: 'r', tool: 'read', args: { path: '/a', ms: 10 } }] });
    r.submit(0, { runId: 'r3', tenant: 'C', calls: [{ id: 'w', tool: 'write', args: { path: '/a/x', ms: 10 } }] });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/w', '30 r2/r', '40 r3/w']);
    expect(concurrency(r.events).max).toBe(1);
  });

  it('scope global: two readers share the lock', () => {
    const r = rig({ tools: rw('global') });
    r.submit(0, { runId: 'r1', tenant: 'A', calls: [{ id: 'r', tool: 'read', args: { path: '/a', ms: 30 } }] });
    r.submit(0, { runId: 'r2', tenant: 'B', calls: [{ id: 'r', tool: 'read', args: { path: '/a', ms: 10 } }] });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/r', '0 r2/r']);
  });

  it('scope run: never locked across runs, even of one tenant', () => {
    const r = rig({ tools: rw('run') });
    r.submit(0, { runId: 'r1', calls: [{ id: 'w', tool: 'write', args: { path: '/a', ms: 30 } }] });
    r.submit(0, { runId: 'r2', calls: [{ id: 'w', tool: 'write', args: { path: '/a', ms: 10 } }] });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/w', '0 r2/w']);
    expect(concurrency(r.events).max).toBe(2);
  });

  it('first come, first served: a writer is not starved by readers that arrive after it', () => {
    const r = rig({ tools: rw('tenant') });
    r.submit(0, { runId: 'r1', calls: [{ id: 'r', tool: 'read', args: { path: '/a', ms: 20 } }] });
    r.submit(5, { runId: 'r2', calls: [{ id: 'w', tool: 'write', args: { path: '/a', ms: 10 } }] });
    r.submit(10, { runId: 'r3', calls: [{ id: 'r', tool: 'read', args: { path: '/a', ms: 10 } }] });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/r', '20 r2/w', '30 r3/r']);
  });

  it('the lock uses the resolved args: a reference that resolves to another file does not wait', () => {
    const r = rig({ tools: [...rw('tenant'), tool('pure', PURE)] });
    r.submit(0, { runId: 'r1', calls: [{ id: 'w', tool: 'write', args: { path: '/a', ms: 30 } }] });
    r.submit(0, {
      runId: 'r2',
      calls: [
        { id: 'p', tool: 'pure', args: { ms: 5, out: { path: '/b' } } },
        { id: 'r', tool: 'read', args: { path: '${p.output.path}', ms: 5 } },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/w', '0 r2/p', '5 r2/r']);
  });
});

describe('rate limits (token bucket, starting full)', () => {
  it('2 per second: starts at 0, 0, 500, 1000, 1500', () => {
    const r = rig({ tools: [tool('t', { ...PURE, rate: { tokens: 2, perMs: 1000 } })] });
    r.submit(0, { calls: calls('c', 5, 't') });
    r.run();
    expect(starts(r.events)).toEqual(['0 c1', '0 c2', '500 c3', '1000 c4', '1500 c5']);
  });

  it('3 per second: a token every 333⅓ ms, each start at the first whole ms it is there', () => {
    // Tokens earned by t: 3 + 3t/1000. The k-th extra start is at ceil(k·1000/3): 334, 667, 1000, …
    const r = rig({ tools: [tool('t', { ...PURE, rate: { tokens: 3, perMs: 1000 } })] });
    r.submit(0, { calls: calls('c', 9, 't', { ms: 7 }) });
    r.run();
    expect(starts(r.events).map((s) => Number(s.split(' ')[0]))).toEqual([0, 0, 0, 334, 667, 1000, 1334, 1667, 2000]);
  });

  it('the bucket refills while idle, up to its size and no more', () => {
    const r = rig({ tools: [tool('t', { ...PURE, rate: { tokens: 2, perMs: 1000 } })] });
    r.submit(0, { runId: 'r1', calls: calls('a', 2, 't') });
    r.submit(5000, { runId: 'r2', calls: calls('b', 3, 't') });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/a1', '0 r1/a2', '5000 r2/b1', '5000 r2/b2', '5500 r2/b3']);
  });

  it('a tenant rate holds every tool of that tenant and no other tenant', () => {
    const r = rig({
      tools: [tool('t', PURE), tool('u', PURE)],
      limits: { rate: { tenant: { acme: { tokens: 1, perMs: 100 } } } },
    });
    r.submit(0, { runId: 'r1', tenant: 'acme', calls: [...calls('t', 2, 't'), ...calls('u', 1, 'u')] });
    r.submit(0, { runId: 'r2', tenant: 'other', calls: calls('o', 2, 't') });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/t1', '0 r2/o1', '0 r2/o2', '100 r1/t2', '200 r1/u1']);
  });

  it('a rate-limited call does not hold back other ready calls', () => {
    const r = rig({ tools: [tool('t', { ...PURE, rate: { tokens: 1, perMs: 1000 } }), tool('u', PURE)], limits: { perRun: 2 } });
    r.submit(0, { calls: [...calls('t', 2, 't'), ...calls('u', 2, 'u', { ms: 100 })] });
    r.run();
    expect(starts(r.events)).toEqual(['0 t1', '0 u1', '10 u2', '1000 t2']);
    expect(illegalMoves(r.events)).toEqual([]);
  });
});
