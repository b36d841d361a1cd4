// Streamed runs (DESIGN §10) on the virtual clock: `submit(open)`, `append` at each arrival, `seal`.
// Every time below is exact: attempts take `args.ms` ms (the default script of helpers/sched.ts), and
// nothing waits for real time.
import { describe, expect, it } from 'vitest';
import type { CallInput, Edge } from '../../src/core/calls.js';
import type { CoreEvent } from '../../src/core/events.js';
import { Scheduler, SchedulerError, type Output } from '../../src/core/scheduler.js';
import { Simulation } from '../../src/core/simulation.js';
import type { FailureMode, Policy, ToolManifest } from '../../src/core/tool.js';
import { RunProjection } from '../../src/core/view.js';
import { catalogOf, DEFAULTS, defaultScript, ends, limits, starts, timeline, tool } from '../helpers/sched.js';

const TOOLS: ToolManifest[] = [
  tool('read', { reads: ['file:{path}'], writes: [], risk: 'read' }),
  tool('write', { reads: [], writes: ['file:{path}'] }),
  tool('pure', { reads: [], writes: [], risk: 'read' }),
  tool('probe', { reads: [], writes: [], risk: 'read' }),
  tool('check', { reads: [], writes: [], risk: 'read' }),
  tool('deploy', { reads: [], writes: ['service:{name}'], after: ['check'] }),
];

interface StreamRig {
  scheduler: Scheduler;
  sim: Simulation;
  events: CoreEvent[];
  open(at: number, calls?: CallInput[], failure?: FailureMode): void;
  append(at: number, calls: CallInput[]): void;
  seal(at: number): void;
  cancel(at: number): void;
  run(): void;
  view(): ReturnType<typeof RunProjection.of>['view'];
}

function streamRig(o: { tools?: ToolManifest[]; policy?: Policy; openRunTimeoutMs?: number; runId?: string } = {}): StreamRig {
  const scheduler = new Scheduler({
    catalog: catalogOf(o.tools ?? TOOLS),
    policy: o.policy ?? { rules: [] },
    limits: limits(),
    defaults: { ...DEFAULTS, openRunTimeoutMs: o.openRunTimeoutMs ?? DEFAULTS.openRunTimeoutMs },
  });
  const sim = new Simulation(scheduler, { attempt: defaultScript });
  const runId = o.runId ?? 'r1';
  return {
    scheduler,
    sim,
    events: sim.events,
    open: (at, calls = [], failure) =>
      sim.at(at, (now) => scheduler.submit(now, { runId, tenant: 'acme', calls, open: true, ...(failure ? { failure } : {}) })),
    append: (at, calls) => sim.at(at, (now) => scheduler.append(now, runId, calls)),
    seal: (at) => sim.at(at, (now) => scheduler.seal(now, runId)),
    cancel: (at) => sim.at(at, (now) => scheduler.cancel(now, runId)),
    run: () => sim.run(),
    view: () => RunProjection.of(sim.events.filter((e) => e.runId === runId)).view,
  };
}

/** Every edge of the run as `from→to kind`, from run.started, run.calls_added and run.sealed. */
function edgesOf(events: CoreEvent[]): string[] {
  return events
    .filter((e) => e.type === 'run.started' || e.type === 'run.calls_added' || e.type === 'run.sealed')
    .flatMap((e) => (e.data.edges as Edge[]).map((x) => `${x.from}→${x.to} ${x.kind}`));
}

/**
 * Edges that name a call which had started already when the edge was announced (empty when none):
 * a call that is safe to start must never gain a predecessor later (DESIGN §10).
 */
function lateEdges(events: CoreEvent[]): string[] {
  const started = new Set<string>();
  const bad: string[] = [];
  events.forEach((e, i) => {
    if (e.type === 'call.started') started.add(`${e.runId}/${e.callId}`);
    if (e.type === 'run.started' || e.type === 'run.calls_added' || e.type === 'run.sealed') {
      for (const x of e.data.edges as Edge[])
        if (started.has(`${e.runId}/${x.to}`)) bad.push(`event ${i} (${e.type} at ${e.at}): ${x.from}→${x.to} ${x.kind}`);
    }
  });
  return bad;
}

const indexOf = (events: CoreEvent[], pred: (e: CoreEvent) => boolean) => events.findIndex(pred);
const addedIndex = (events: CoreEvent[], id: string) =>
  indexOf(events, (e) => e.type === 'run.calls_added' && (e.data.calls as CallInput[]).some((c) => c.id === id));
const startedIndex = (events: CoreEvent[], id: string) => indexOf(events, (e) => e.type === 'call.started' && e.callId === id);

describe('eager dispatch', () => {
  it('starts a read that arrives first before the second call arrives', () => {
    const r = streamRig();
    r.open(0, [{ id: 'a', tool: 'read', args: { path: '/x', ms: 300 } }]);
    r.append(200, [{ id: 'b', tool: 'read', args: { path: '/x', ms: 300 } }]);
    r.seal(250);
    r.run();
    expect(starts(r.events)).toEqual(['0 a', '200 b']);
    expect(ends(r.events)).toEqual(['300 a ok', '500 b ok']);
    // a was running before b was even known.
    expect(startedIndex(r.events, 'a')).toBeLessThan(addedIndex(r.events, 'b'));
    expect(edgesOf(r.events)).toEqual([]);
    expect(timeline(r.events, ['run.sealed', 'run.completed'])).toEqual(['250 run.sealed', '500 run.completed']);
    expect(r.view().status).toBe('succeeded');
    expect(lateEdges(r.events)).toEqual([]);
  });

  it('starts calls handed in with the open request at once, and the run does not end before the seal', () => {
    const r = streamRig();
    r.open(0, [
      { id: 'a', tool: 'pure', args: { ms: 10 } },
      { id: 'b', tool: 'pure', args: { ms: 20 } },
    ]);
    r.seal(100);
    r.run();
    expect(starts(r.events)).toEqual(['0 a', '0 b']);
    expect(timeline(r.events, ['call.succeeded', 'run.sealed', 'run.completed'])).toEqual([
      '10 call.succeeded a',
      '20 call.succeeded b',
      '100 run.sealed',
      '100 run.completed',
    ]);
  });

  it('makes a later write wait only for the earlier calls it conflicts with', () => {
    const r = streamRig();
    r.open(0, [
      { id: 'a', tool: 'read', args: { path: '/x', ms: 300 } },
      { id: 'b', tool: 'read', args: { path: '/y', ms: 500 } },
    ]);
    r.append(100, [{ id: 'c', tool: 'write', args: { path: '/x', content: 'new', ms: 50 } }]);
    r.append(150, [{ id: 'd', tool: 'write', args: { path: '/z', content: 'new', ms: 50 } }]);
    r.append(160, [{ id: 'e', tool: 'read', args: { path: '/x', ms: 10 } }]);
    r.seal(170);
    r.run();
    // c waits for a (write-after-read on /x), not for b (/y); d conflicts with nothing; e reads what c writes.
    expect(starts(r.events)).toEqual(['0 a', '0 b', '150 d', '300 c', '350 e']);
    expect(edgesOf(r.events)).toEqual(['a→c conflict', 'c→e conflict']);
    const cEdge = r.events.flatMap((e) => (e.type === 'run.calls_added' ? (e.data.edges as Edge[]) : [])).find((x) => x.to === 'c');
    expect(cEdge?.reason).toBe('write-after-read on file:/x');
    expect(lateEdges(r.events)).toEqual([]);
  });

  it('orders conflicting calls by arrival', () => {
    const r = streamRig();
    r.open(0, [{ id: 'w1', tool: 'write', args: { path: '/x', content: '1', ms: 100 } }]);
    r.append(10, [{ id: 'r1', tool: 'read', args: { path: '/x', ms: 100 } }]);
    r.append(20, [{ id: 'w2', tool: 'write', args: { path: '/x', content: '2', ms: 100 } }]);
    r.seal(30);
    r.run();
    expect(starts(r.events)).toEqual(['0 w1', '100 r1', '200 w2']);
    expect(edgesOf(r.events)).toEqual(['w1→r1 conflict', 'r1→w2 conflict']);
  });
});

describe('references in a streamed run', () => {
  it('waits for a call that has not arrived, and resolves when it arrives and succeeds', () => {
    const r = streamRig();
    r.open(0, [{ id: 'a', tool: 'write', args: { path: '/out', content: '${b.output.v}', ms: 10 } }]);
    r.append(100, [{ id: 'b', tool: 'pure', args: { ms: 50, out: { v: 'hello' } } }]);
    r.seal(120);
    r.run();
    expect(starts(r.events)).toEqual(['100 b', '150 a']);
    expect(r.view().calls.map((c) => [c.id, c.status, c.resolvedArgs])).toEqual([
      ['a', 'succeeded', { path: '/out', content: 'hello', ms: 10 }],
      ['b', 'succeeded', { ms: 50, out: { v: 'hello' } }],
    ]);
    // The data edge is announced with b's arrival, before a (its target) could start.
    const added = r.events
      .filter((e) => e.type === 'run.calls_added')
      .map((e) => [e.at, (e.data.edges as Edge[]).map((x) => `${x.from}→${x.to} ${x.kind}`)]);
    expect(added).toEqual([
      [0, []],
      [100, ['b→a data']],
    ]);
    expect(timeline(r.events, ['run.sealed', 'run.completed'])).toEqual(['120 run.sealed', '160 run.completed']);
    expect(lateEdges(r.events)).toEqual([]);
  });

  it('resolves a chain of forward references when its last link arrives', () => {
    const r = streamRig();
    r.open(0, [{ id: 'a', tool: 'pure', args: { x: '${b.output.v}', ms: 10 } }]);
    r.append(50, [{ id: 'b', tool: 'pure', args: { y: '${c.output.v}', ms: 10, out: { v: 'from-b' } } }]);
    r.append(80, [{ id: 'c', tool: 'pure', args: { ms: 10, out: { v: 'from-c' } } }]);
    r.seal(200);
    r.run();
    expect(starts(r.events)).toEqual(['80 c', '90 b', '100 a']);
    expect(r.view().calls.map((c) => c.resolvedArgs)).toEqual([
      { x: 'from-b', ms: 10 },
      { y: 'from-c', ms: 10, out: { v: 'from-b' } },
      { ms: 10, out: { v: 'from-c' } },
    ]);
  });

  it('fails a reference to a call that never arrives with unresolved_reference at the seal', () => {
    const r = streamRig();
    r.open(0, [{ id: 'a', tool: 'pure', args: { x: '${ghost.output}', ms: 10 } }]);
    r.append(50, [{ id: 'b', tool: 'pure', args: { ms: 10 } }]);
    r.seal(300);
    r.run();
    expect(starts(r.events)).toEqual(['50 b']);
    expect(timeline(r.events, ['call.failed', 'call.succeeded', 'run.sealed', 'run.completed'])).toEqual([
      '60 call.succeeded b',
      '300 run.sealed',
      '300 call.failed a',
      '300 run.completed',
    ]);
    const a = r.view().calls[0];
    expect(a?.error?.code).toBe('unresolved_reference');
    expect(r.view().status).toBe('partial');
    const sealed = r.events.find((e) => e.type === 'run.sealed');
    expect(((sealed?.data.diagnostics ?? []) as { code: string; callId: string }[]).map((d) => `${d.callId} ${d.code}`)).toEqual([
      'a unresolved_reference',
    ]);
  });

  it('blocks what refers to a call that never arrives, at the seal', () => {
    const r = streamRig();
    r.open(0, [
      { id: 'a', tool: 'pure', args: { x: '${ghost.output}' } },
      { id: 'b', tool: 'pure', args: { x: '${a.output}' } },
    ]);
    r.seal(40);
    r.run();
    expect(starts(r.events)).toEqual([]);
    expect(ends(r.events)).toEqual(['40 a failed', '40 b blocked']);
    expect(r.view().calls.map((c) => (c.error ?? c.blockedBy)?.code)).toEqual(['unresolved_reference', 'dependency_failed']);
  });

  it('makes a reference by tool name wait for the seal (a later call of that tool could make it ambiguous)', () => {
    const r = streamRig();
    r.open(0, [
      { id: 'p', tool: 'probe', args: { ms: 10, out: { v: 42 } } },
      { id: 'u', tool: 'pure', args: { n: '${probe.output.v}', ms: 10 } },
    ]);
    r.seal(300);
    r.run();
    // p ended at 10; u waits for the seal all the same.
    expect(starts(r.events)).toEqual(['0 p', '300 u']);
    expect(r.view().calls[1]?.resolvedArgs).toEqual({ n: 42, ms: 10 });
    expect(edgesOf(r.events)).toEqual(['p→u data']);
    expect(lateEdges(r.events)).toEqual([]);
  });

  it('fails a reference by tool name with ambiguous_reference when a second call of that tool arrives', () => {
    const r = streamRig();
    r.open(0, [
      { id: 'p', tool: 'probe', args: { ms: 10 } },
      { id: 'u', tool: 'pure', args: { n: '${probe.output.v}', ms: 10 } },
    ]);
    r.append(100, [{ id: 'q', tool: 'probe', args: { ms: 10 } }]);
    r.seal(300);
    r.run();
    expect(starts(r.events)).toEqual(['0 p', '100 q']);
    expect(timeline(r.events, ['call.failed'])).toEqual(['300 call.failed u']);
    expect(r.view().calls[1]?.error?.code).toBe('ambiguous_reference');
  });

  it('blocks a call that arrives after the call it refers to has failed, naming the failed call', () => {
    const r = streamRig();
    r.open(0, [{ id: 'a', tool: 'pure', args: { fail: 'always', ms: 5 } }]);
    r.append(10, [{ id: 'b', tool: 'pure', args: { x: '${a.output}' } }]);
    r.append(20, [{ id: 'c', tool: 'pure', args: { x: '${b.output}' } }]);
    r.seal(30);
    r.run();
    expect(ends(r.events)).toEqual(['5 a failed', '10 b blocked', '20 c blocked']);
    // As in a batch: every descendant of the failed call names that call.
    expect(r.view().calls.map((c) => [c.id, c.blockedBy?.code ?? c.error?.code, c.blockedBy?.callId])).toEqual([
      ['a', 'tool_error', undefined],
      ['b', 'dependency_failed', 'a'],
      ['c', 'dependency_failed', 'a'],
    ]);
  });

  it('in replan mode, a call that arrives after its predecessor failed waits for the replan', () => {
    const r = streamRig();
    r.open(0, [{ id: 'a', tool: 'pure', args: { fail: 'always', ms: 5 } }], 'replan');
    r.append(10, [{ id: 'b', tool: 'pure', args: { x: '${a.output}' } }]);
    r.append(20, [{ id: 'c', tool: 'pure', args: { x: '${b.output}' } }]);
    r.seal(30);
    r.run();
    expect(r.view().status).toBe('needs_replan');
    expect(r.view().calls.map((c) => [c.id, c.blockedBy?.code, c.blockedBy?.callId])).toEqual([
      ['a', undefined, undefined],
      ['b', 'awaiting_replan', 'a'],
      ['c', 'awaiting_replan', 'a'],
    ]);
    expect(r.view().replanContext?.waiting).toEqual(['b', 'c']);
  });

  it('blocks a call that refers to a call on a cycle with dependency_blocked, as a batch does', () => {
    const r = streamRig();
    r.open(0, [{ id: 's', tool: 'pure', args: { me: '${s.output}' } }]);
    r.append(10, [{ id: 't', tool: 'pure', args: { x: '${s.output}' } }]);
    r.seal(20);
    r.run();
    expect(ends(r.events)).toEqual(['0 s blocked', '10 t blocked']);
    expect(r.view().calls.map((c) => [c.id, c.blockedBy?.code])).toEqual([
      ['s', 'cycle'],
      ['t', 'dependency_blocked'],
    ]);
    expect(r.view().status).toBe('deadlocked');
  });

  it('finds a cycle among forward references at the seal', () => {
    const r = streamRig();
    r.open(0, [{ id: 'a', tool: 'pure', args: { x: '${b.output}' } }]);
    r.append(10, [{ id: 'b', tool: 'pure', args: { x: '${a.output}' } }]);
    r.append(20, [{ id: 'c', tool: 'pure', args: { ms: 5 } }]);
    r.seal(50);
    r.run();
    expect(timeline(r.events, ['call.started', 'call.succeeded', 'call.blocked', 'run.completed'])).toEqual([
      '20 call.started c',
      '25 call.succeeded c',
      '50 call.blocked a',
      '50 call.blocked b',
      '50 run.completed',
    ]);
    expect(r.view().status).toBe('deadlocked');
    const sealed = r.events.find((e) => e.type === 'run.sealed');
    expect(sealed?.data.diagnostics).toEqual([expect.objectContaining({ code: 'cycle', callIds: ['a', 'b', 'a'] })]);
  });
});

describe('conflicts and data edges together', () => {
  it('lets a conflict successor of a referring call run once that call has run', () => {
    // b refers to a and writes k:/y; c writes /y as well: c runs after b. (A streamed call's data
    // predecessors once left it unreleasable, and c waited forever: the run ended deadlocked.)
    const r = streamRig();
    r.open(0, [{ id: 'a', tool: 'write', args: { path: '/x', content: '1', ms: 10, out: { path: '/x' } } }]);
    r.append(5, [{ id: 'b', tool: 'write', args: { path: '/y', content: '${a.output.path}', ms: 10 } }]);
    r.append(6, [{ id: 'c', tool: 'write', args: { path: '/y', content: '2', ms: 10 } }]);
    r.seal(7);
    r.run();
    // b's path is a literal: its static write is file:/y, so c waits for b.
    expect(edgesOf(r.events)).toEqual(['a→b data', 'b→c conflict']);
    expect(starts(r.events)).toEqual(['0 a', '10 b', '20 c']);
    expect(r.view().status).toBe('succeeded');
  });

  it('keeps a blocked writer in line: the next writer still waits for the one it was behind', () => {
    // b refers to a (a long write of /x) and to d (which fails fast): b is blocked at 1. Its hazard on
    // /x against a is carried by the data edge a→b alone, so c (the next writer of /x) must not start
    // before a ends.
    const r = streamRig();
    r.open(0, [
      { id: 'a', tool: 'write', args: { path: '/x', content: '1', ms: 100 } },
      { id: 'd', tool: 'pure', args: { ms: 1, fail: 'always' } },
      { id: 'b', tool: 'write', args: { path: '/x', content: '${a.output}', other: '${d.output}' } },
    ]);
    r.append(0, [{ id: 'c', tool: 'write', args: { path: '/x', content: '3', ms: 5 } }]);
    r.seal(0);
    r.run();
    expect(edgesOf(r.events)).toEqual(['a→b data', 'd→b data', 'b→c conflict']);
    expect(timeline(r.events, ['call.started', 'call.succeeded', 'call.failed', 'call.blocked', 'run.completed'])).toEqual([
      '0 call.started a',
      '0 call.started d',
      '1 call.failed d',
      '1 call.blocked b',
      '100 call.succeeded a',
      '100 call.started c',
      '105 call.succeeded c',
      '105 run.completed',
    ]);
    expect(r.view().status).toBe('partial');
  });

  it('gives a call that depends on a plan-time failure no place in the conflict order (as in a batch)', () => {
    const r = streamRig();
    r.open(0, [{ id: 'x', tool: 'no_such_tool', args: {} }]);
    r.append(10, [{ id: 'b', tool: 'write', args: { path: '/x', content: '${x.output}' } }]);
    r.append(20, [{ id: 'c', tool: 'write', args: { path: '/x', content: '1', ms: 5 } }]);
    r.seal(30);
    r.run();
    // b never runs, so c does not wait for it: no b→c edge, as in the batch's graph.
    expect(edgesOf(r.events)).toEqual(['x→b data']);
    expect(starts(r.events)).toEqual(['20 c']);
    expect(r.view().calls.map((c) => [c.id, c.status, (c.error ?? c.blockedBy)?.code])).toEqual([
      ['x', 'failed', 'unknown_tool'],
      ['b', 'blocked', 'dependency_failed'],
      ['c', 'succeeded', undefined],
    ]);
  });
});

describe('policy in a streamed run', () => {
  it('makes a call with `after` wait for the seal, then for the matching calls', () => {
    const r = streamRig();
    r.open(0, [{ id: 'dep', tool: 'deploy', args: { name: 'web', ms: 10 } }]);
    r.append(50, [{ id: 'chk', tool: 'check', args: { ms: 100 } }]);
    r.seal(120);
    r.run();
    expect(starts(r.events)).toEqual(['50 chk', '150 dep']);
    expect(edgesOf(r.events)).toEqual(['chk→dep policy']);
    // The edge is announced at the seal, when deploy is settled; check had started long before.
    expect(r.events.find((e) => e.type === 'run.sealed')?.at).toBe(120);
    expect(lateEdges(r.events)).toEqual([]);
  });

  it('starts a call with `after` at the seal when its matching calls ended before it', () => {
    const r = streamRig();
    r.open(0, [{ id: 'chk', tool: 'check', args: { ms: 10 } }]);
    r.append(20, [{ id: 'dep', tool: 'deploy', args: { name: 'web', ms: 10 } }]);
    r.seal(200);
    r.run();
    expect(starts(r.events)).toEqual(['0 chk', '200 dep']);
  });

  it('starts a call with `after` at the seal when the run has no matching call', () => {
    const r = streamRig();
    r.open(0, [{ id: 'dep', tool: 'deploy', args: { name: 'web', ms: 10 } }]);
    r.seal(80);
    r.run();
    expect(starts(r.events)).toEqual(['80 dep']);
    expect(r.view().status).toBe('succeeded');
  });

  it('applies a policy rule `after` the same way', () => {
    const r = streamRig({ policy: { rules: [{ match: { tool: 'write' }, after: ['check'] }] } });
    r.open(0, [{ id: 'w', tool: 'write', args: { path: '/x', content: '1', ms: 10 } }]);
    r.append(30, [{ id: 'chk', tool: 'check', args: { ms: 100 } }]);
    r.seal(40);
    r.run();
    expect(starts(r.events)).toEqual(['30 chk', '130 w']);
  });
});

describe('sealing, appending, cancelling', () => {
  it('refuses calls after the seal with a conflict', () => {
    const r = streamRig();
    r.open(0, [{ id: 'a', tool: 'pure', args: { ms: 100 } }]);
    r.seal(10);
    let err: unknown;
    r.sim.at(20, (now) => {
      try {
        return r.scheduler.append(now, 'r1', [{ id: 'b', tool: 'pure' }]);
      } catch (e) {
        err = e;
        return { events: [], starts: [], aborts: [] };
      }
    });
    r.run();
    expect(err).toBeInstanceOf(SchedulerError);
    expect((err as SchedulerError).code).toBe('conflict');
    expect(r.view().calls.map((c) => c.id)).toEqual(['a']);
    // A second seal is a no-op, not an error.
    expect(r.scheduler.seal(200, 'r1').events).toEqual([]);
  });

  it('refuses calls to a run that ended, to a run that is not open, duplicate ids, and unknown runs', () => {
    const r = streamRig();
    r.open(0, [{ id: 'a', tool: 'pure', args: { ms: 1 } }]);
    r.seal(1);
    r.sim.at(2, (now) => r.scheduler.submit(now, { runId: 'batch', tenant: 'acme', calls: [{ id: 'x', tool: 'pure' }] }));
    r.sim.at(3, (now) =>
      r.scheduler.submit(now, { runId: 'r2', tenant: 'acme', calls: [{ id: 'y', tool: 'pure', args: { ms: 50 } }], open: true }),
    );
    r.run();
    const codeOf = (f: () => Output) => {
      try {
        f();
        return 'ok';
      } catch (e) {
        return e instanceof SchedulerError ? e.code : String(e);
      }
    };
    const now = r.sim.now;
    expect(codeOf(() => r.scheduler.append(now, 'r1', [{ id: 'b', tool: 'pure' }]))).toBe('conflict');
    expect(codeOf(() => r.scheduler.append(now, 'batch', [{ id: 'b', tool: 'pure' }]))).toBe('conflict');
    expect(codeOf(() => r.scheduler.seal(now, 'batch'))).toBe('conflict');
    expect(codeOf(() => r.scheduler.append(now, 'r2', [{ id: 'y', tool: 'pure' }]))).toBe('conflict');
    expect(
      codeOf(() =>
        r.scheduler.append(now, 'r2', [
          { id: 'z', tool: 'pure' },
          { id: 'z', tool: 'pure' },
        ]),
      ),
    ).toBe('conflict');
    expect(codeOf(() => r.scheduler.append(now, 'nope', [{ id: 'z', tool: 'pure' }]))).toBe('run_not_found');
    // None of the refused appends left a call behind.
    expect(RunProjection.of(r.events.filter((e) => e.runId === 'r2')).view.calls.map((c) => c.id)).toEqual(['y']);
  });

  it('seals a run that is not sealed within openRunTimeoutMs', () => {
    const r = streamRig({ openRunTimeoutMs: 1000 });
    r.open(500, [{ id: 'a', tool: 'pure', args: { ms: 50 } }]);
    r.append(700, [{ id: 'b', tool: 'pure', args: { x: '${ghost.output}' } }]);
    r.run();
    expect(timeline(r.events, ['call.started', 'call.succeeded', 'call.failed', 'run.sealed', 'run.completed'])).toEqual([
      '500 call.started a',
      '550 call.succeeded a',
      '1500 run.sealed',
      '1500 call.failed b',
      '1500 run.completed',
    ]);
    expect(r.events.find((e) => e.type === 'run.sealed')?.data.reason).toBe('openRunTimeoutMs');
    expect(r.view().stream).toBe('sealed');
    expect(r.view().status).toBe('partial');
    let err: unknown;
    try {
      r.scheduler.append(2000, 'r1', [{ id: 'late', tool: 'pure' }]);
    } catch (e) {
      err = e;
    }
    expect((err as SchedulerError).code).toBe('conflict');
  });

  it('does not seal again at the timeout a run that was sealed in time', () => {
    const r = streamRig({ openRunTimeoutMs: 1000 });
    r.open(0, [{ id: 'a', tool: 'pure', args: { ms: 50 } }]);
    r.seal(100);
    r.run();
    expect(timeline(r.events, ['run.sealed', 'run.completed'])).toEqual(['100 run.sealed', '100 run.completed']);
    expect(r.events.filter((e) => e.type === 'run.sealed')[0]?.data.reason).toBeUndefined();
  });

  it('ends a cancelled open run `cancelled`: running calls aborted, waiting ones cancelled', () => {
    const r = streamRig();
    r.open(0, [
      { id: 'a', tool: 'pure', args: { ms: 500 } },
      { id: 'b', tool: 'pure', args: { x: '${later.output}' } },
    ]);
    r.cancel(100);
    r.run();
    expect(timeline(r.events, ['call.started', 'call.cancelled', 'run.completed'])).toEqual([
      '0 call.started a',
      '100 call.cancelled b',
      '100 call.cancelled a',
      '100 run.completed',
    ]);
    expect(r.view().status).toBe('cancelled');
    expect(r.view().calls.map((c) => c.error?.code)).toEqual(['cancelled', 'cancelled']);
    // No seal ever happened, and none is needed; the open-run timeout finds the run over.
    expect(r.events.some((e) => e.type === 'run.sealed')).toBe(false);
    let err: unknown;
    try {
      r.scheduler.append(200, 'r1', [{ id: 'late', tool: 'pure' }]);
    } catch (e) {
      err = e;
    }
    expect((err as SchedulerError).code).toBe('conflict');
  });

  it('ends a cancelled open run with nothing running at once', () => {
    const r = streamRig();
    r.open(0, []);
    r.cancel(30);
    r.run();
    expect(timeline(r.events, ['run.completed'])).toEqual(['30 run.completed']);
    expect(r.view().status).toBe('cancelled');
  });

  it('cancels the calls that arrive while a cancelled run waits for its aborted calls to end', () => {
    // Driven by hand: the shell's abort takes time, and the model may still stream calls meanwhile.
    const s = new Scheduler({ catalog: catalogOf(TOOLS), policy: { rules: [] }, limits: limits(), defaults: DEFAULTS });
    const events: CoreEvent[] = [];
    const take = (o: Output) => {
      events.push(...o.events);
      return o;
    };
    expect(
      take(s.submit(0, { runId: 'r1', tenant: 'acme', calls: [{ id: 'a', tool: 'pure', args: { ms: 500 } }], open: true })).starts.map(
        (x) => x.callId,
      ),
    ).toEqual(['a']);
    expect(take(s.cancel(100, 'r1')).aborts.map((x) => x.callId)).toEqual(['a']);
    const late = take(s.append(110, 'r1', [{ id: 'b', tool: 'pure', args: { ms: 10 } }]));
    expect(late.starts).toEqual([]);
    take(
      s.attemptEnded(120, {
        runId: 'r1',
        callId: 'a',
        attempt: 1,
        result: { ok: false, error: { code: 'cancelled', message: 'aborted' } },
      }),
    );
    expect(timeline(events, ['call.cancelled', 'run.completed'])).toEqual([
      '110 call.cancelled b',
      '120 call.cancelled a',
      '120 run.completed',
    ]);
    const view = RunProjection.of(events).view;
    expect(view.status).toBe('cancelled');
    expect(view.calls.map((c) => [c.id, c.status, c.error?.code])).toEqual([
      ['a', 'cancelled', 'cancelled'],
      ['b', 'cancelled', 'cancelled'],
    ]);
    expect(view.diagnostics).toEqual([]);
  });
});

describe('the run view of a streamed run', () => {
  it('shows calls in arrival order with their dependsOn, and stream open → sealed', () => {
    const r = streamRig();
    r.open(0, [{ id: 'a', tool: 'read', args: { path: '/x', ms: 10, out: { path: '/x' } } }]);
    r.append(5, [{ id: 'b', tool: 'write', args: { path: '/x', content: '${a.output.path}', ms: 10 } }]);
    let mid: string | undefined;
    r.sim.at(6, () => {
      mid = r.view().stream;
      return { events: [], starts: [], aborts: [] };
    });
    r.seal(7);
    r.run();
    expect(mid).toBe('open');
    const v = r.view();
    expect(v.stream).toBe('sealed');
    expect(v.calls.map((c) => [c.id, c.dependsOn])).toEqual([
      ['a', []],
      ['b', ['a']],
    ]);
    expect(starts(r.events)).toEqual(['0 a', '10 b']);
  });
});
