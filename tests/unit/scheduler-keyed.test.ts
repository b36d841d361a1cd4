// Keyed limits (DESIGN §4 Flow control) on the virtual clock: a tool's `concurrency: { limit, per }` and
// `limits.each`. Each is proved both ways: never exceeded at any point of the event log, and reached
// (two keys run at once), with the exact start order the limit implies; `waitingFor` names the key.
import { describe, expect, it } from 'vitest';
import type { CoreEvent, EventOf } from '../../src/core/events.js';
import { limitsBody } from '../../src/api/waiting.js';
import { Scheduler } from '../../src/core/scheduler.js';
import { DEFAULTS, PURE, catalogOf, concurrency, illegalMoves, limits, rig, runStatus, starts, tool } from '../helpers/sched.js';

/** Most calls running at once whose started args satisfy `pred`. */
function most(events: CoreEvent[], pred: (args: Record<string, unknown>) => boolean): number {
  return concurrency(events, (e) => e.type === 'call.started' && pred((e as EventOf<'call.started'>).data.args)).max;
}

describe("a tool's keyed concurrency", () => {
  const push = tool('push', { ...PURE, keyedConcurrency: { limit: 1, per: '{owner}/{repo}' } });

  it('two repos run at once, never two calls of one repo', () => {
    const r = rig({ tools: [push] });
    r.submit(0, {
      calls: [
        { id: 'a1', tool: 'push', args: { owner: 'acme', repo: 'web' } },
        { id: 'a2', tool: 'push', args: { owner: 'acme', repo: 'web' } },
        { id: 'b1', tool: 'push', args: { owner: 'acme', repo: 'api' } },
        { id: 'a3', tool: 'push', args: { owner: 'acme', repo: 'web' } },
        { id: 'b2', tool: 'push', args: { owner: 'acme', repo: 'api' } },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 a1', '0 b1', '10 a2', '10 b2', '20 a3']);
    expect(most(r.events, (a) => a.repo === 'web')).toBe(1);
    expect(most(r.events, (a) => a.repo === 'api')).toBe(1);
    expect(concurrency(r.events).max).toBe(2); // reached: two keys at once
    expect(runStatus(r.events)).toBe('succeeded');
    expect(illegalMoves(r.events)).toEqual([]);
  });

  it('counts across runs and tenants; a missing arg expands to the empty string (one shared key)', () => {
    const r = rig({ tools: [tool('push', { ...PURE, keyedConcurrency: { limit: 2, per: 'repo {repo}' } })] });
    r.submit(0, { runId: 'r1', tenant: 'a', calls: [1, 2].map((i) => ({ id: `x${i}`, tool: 'push', args: { repo: 'web' } })) });
    r.submit(0, { runId: 'r2', tenant: 'b', calls: [1, 2].map((i) => ({ id: `y${i}`, tool: 'push', args: { repo: 'web' } })) });
    r.submit(0, { runId: 'r3', tenant: 'b', calls: [1, 2, 3].map((i) => ({ id: `z${i}`, tool: 'push', args: {} })) });
    r.run();
    expect(most(r.events, (a) => a.repo === 'web')).toBe(2);
    expect(most(r.events, (a) => a.repo === undefined)).toBe(2);
    expect(concurrency(r.events).max).toBe(4);
    expect(starts(r.events)).toEqual(['0 r1/x1', '0 r1/x2', '0 r3/z1', '0 r3/z2', '10 r2/y1', '10 r2/y2', '10 r3/z3']);
  });

  it('a waiting call says which key holds it, the pattern and the tool', () => {
    const r = rig({ tools: [push], explainWaits: true });
    r.submit(0, {
      calls: [
        { id: 'a1', tool: 'push', args: { owner: 'acme', repo: 'web' } },
        { id: 'a2', tool: 'push', args: { owner: 'acme', repo: 'web' } },
      ],
    });
    r.run();
    const waiting = r.events.find((e): e is EventOf<'call.waiting'> => e.type === 'call.waiting' && e.callId === 'a2');
    expect(waiting?.data.waitingFor).toEqual([
      {
        kind: 'key',
        key: 'acme/web',
        pattern: '{owner}/{repo}',
        tool: 'push',
        limit: 1,
        inUse: 1,
        holders: [{ runId: 'r1', callId: 'a1', tenant: 'acme', since: 0 }],
      },
    ]);
  });
});

describe('limits.each', () => {
  const edit = tool('edit', { reads: [], writes: ['repo:{repo}/{path}'], scope: 'run' });
  const read = tool('read', { reads: ['repo:{repo}/{path}'], writes: [], scope: 'run' });

  it('at most N running calls overlap each key under the pattern; two keys run at once', () => {
    const r = rig({ tools: [edit, read], limits: { each: { 'repo:*': 2 } } });
    const call = (id: string, t: string, repo: string, path: string) => ({ id, tool: t, args: { repo, path } });
    r.submit(0, {
      runId: 'r1',
      calls: [call('a', 'edit', 'acme', 'a.ts'), call('b', 'read', 'acme', 'b.ts'), call('c', 'edit', 'acme', 'c.ts')],
    });
    r.submit(0, {
      runId: 'r2',
      calls: [
        call('d', 'read', 'acme', 'x/d.ts'),
        call('e', 'edit', 'beta', 'e.ts'),
        call('f', 'edit', 'beta', 'f.ts'),
        call('g', 'edit', 'beta', 'g.ts'),
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1/a', '0 r1/b', '0 r2/e', '0 r2/f', '10 r1/c', '10 r2/d', '10 r2/g']);
    expect(most(r.events, (a) => a.repo === 'acme')).toBe(2);
    expect(most(r.events, (a) => a.repo === 'beta')).toBe(2);
    expect(concurrency(r.events).max).toBe(4); // reached on both keys at once
  });

  it("names K cut to the pattern's length in waitingFor", () => {
    const r = rig({ tools: [edit], limits: { each: { 'repo:*': 1 } }, explainWaits: true });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 'edit', args: { repo: 'acme', path: 'web/a.ts' } },
        { id: 'b', tool: 'edit', args: { repo: 'acme', path: 'api/b.ts' } },
      ],
    });
    r.run();
    const waiting = r.events.find((e): e is EventOf<'call.waiting'> => e.type === 'call.waiting' && e.callId === 'b');
    expect(waiting?.data.waitingFor[0]).toMatchObject({ kind: 'key', key: 'repo:acme', pattern: 'repo:*', limit: 1, inUse: 1 });
    expect(waiting?.data.waitingFor[0]?.tool).toBeUndefined();
  });

  it('a call naming one key twice counts once; keys outside the pattern are not limited', () => {
    const two = tool('two', { reads: ['repo:{repo}/a'], writes: ['repo:{repo}/b', 'other:{repo}'], scope: 'run' });
    const r = rig({ tools: [two], limits: { each: { 'repo:*': 1 } } });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 'two', args: { repo: 'x' } },
        { id: 'b', tool: 'two', args: { repo: 'y' } },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 a', '0 b']);
  });
});

describe('GET /v1/limits on one process', () => {
  it('lists each busy key (with its waiters) and each paused tool', () => {
    const push = tool('push', { ...PURE, keyedConcurrency: { limit: 1, per: '{repo}' } });
    const s = new Scheduler({
      catalog: catalogOf([push, tool('api', PURE)]),
      policy: { rules: [] },
      limits: limits({ each: { 'repo:*': 2 } }),
      defaults: DEFAULTS,
      explainWaits: true,
    });
    s.submit(0, {
      runId: 'r1',
      tenant: 'acme',
      calls: [
        { id: 'a', tool: 'push', args: { repo: 'web' } },
        { id: 'b', tool: 'push', args: { repo: 'web' } },
      ],
    });
    s.paused(5, { tool: 'api', until: 2000, status: 429 });
    const items = s.limitsInUse(10);
    expect(items.filter((i) => i.kind === 'key')).toEqual([
      {
        kind: 'key',
        key: 'web',
        pattern: '{repo}',
        tool: 'push',
        limit: 1,
        inUse: 1,
        waiting: 1,
        longestWaitMs: 10,
        holders: [{ runId: 'r1', callId: 'a', tenant: 'acme', since: 0 }],
      },
    ]);
    const body = limitsBody(items);
    expect(body.keys).toEqual([{ pattern: '{repo}', tool: 'push', key: 'web', limit: 1, inUse: 1 }]);
    expect(body.paused).toEqual([{ tool: 'api', until: new Date(2000).toISOString(), status: 429 }]);
  });
});
