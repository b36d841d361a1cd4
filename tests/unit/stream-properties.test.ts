// Properties of streamed runs (DESIGN §10) over random batches, on the virtual clock.
//
// A batch is streamed in: its calls arrive at random sorted times (some together in one append, some
// in separate appends at the same instant), then the run is sealed. The same batch is also submitted at
// once to a fresh scheduler with the same config, and every attempt has the same outcome in both (its
// duration and result depend on the call's args and the attempt number only: the call id, `ms`, `fail`).
//
// - `stream ≡ batch` (strong): calls refer only to *earlier* calls by id (and to ids that never arrive);
//   there are plan-time failures (unknown tools, malformed arguments), runtime failures, retries and
//   limits, in `partial` and `replan` mode. Then the streamed run's graph and outcome equal the batch's:
//   every edge (kind and reason), and per call the status, attempts, output and error code.
// - `stream ≈ batch` (weaker): calls may also refer *forward* to later calls (and to themselves), by
//   tool name, and tools have `after` policies: what settles only at the seal or when a later call
//   arrives takes its place in the conflict order later than in a batch, so the graph may differ
//   (DESIGN §10: "the two differ only when a call refers forward…"). Outcomes still must not.
//
// `fail_fast` is left out of both: which calls a fail-fast cancels depends on which had started when the
// failure came, and streaming changes exactly that. So are reviews (a human's timing).
//
// On every streamed trace: legal state moves, no call gains a predecessor once started, no two calls
// whose plan-time resources conflict run at once, no call starts before its data and policy
// predecessors succeeded, and the run completes once, after its seal.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CallInput, Edge } from '../../src/core/calls.js';
import { callError } from '../../src/core/errors.js';
import type { CoreEvent } from '../../src/core/events.js';
import { buildPlan } from '../../src/core/plan.js';
import { anyOverlap, type Access } from '../../src/core/resources.js';
import { Scheduler } from '../../src/core/scheduler.js';
import { Simulation, type SimulatedAttempt } from '../../src/core/simulation.js';
import type { FailureMode, Limits, ToolManifest } from '../../src/core/tool.js';
import { RunProjection } from '../../src/core/view.js';
import { catalogOf, DEFAULTS, illegalMoves, limits as fullLimits, statusAfter, tool } from '../helpers/sched.js';
import type { StartAttempt } from '../../src/core/scheduler.js';

/** Runs per property; raise it to hunt (STREAM_PROP_RUNS=5000 npx vitest run tests/unit/stream-properties). */
const RUNS = Number(process.env.STREAM_PROP_RUNS ?? 300);
const TIMEOUT = Math.max(30_000, RUNS * 100);

const TEMPLATES = ['k:{a}', 'k:{a}:{b}', 'k:x', 'k:*', 'j:{a}', 'k', 'k:y'];
const VALUES = ['x', 'y', 'y/z', 'w'];

interface Scenario {
  tools: ToolManifest[];
  calls: CallInput[];
  /** Arrival time of each call (sorted). */
  arrivals: number[];
  /** Whether call i comes in its own append even when it arrives with the call before it. */
  split: boolean[];
  sealAt: number;
  failure: FailureMode;
  limits: Partial<Limits>;
}

// ---- scenarios -----------------------------------------------------------------------------------

function arbTools(withAfter: boolean): fc.Arbitrary<ToolManifest[]> {
  const one = fc.record({
    effects: fc.oneof(
      { weight: 1, arbitrary: fc.constant(undefined) },
      {
        weight: 6,
        arbitrary: fc.record({ reads: fc.subarray(TEMPLATES, { maxLength: 2 }), writes: fc.subarray(TEMPLATES, { maxLength: 2 }) }),
      },
    ),
    idempotent: fc.boolean(),
    retry: fc.option(
      fc.record({ attempts: fc.integer({ min: 1, max: 3 }), backoffMs: fc.integer({ min: 1, max: 40 }), maxBackoffMs: fc.constant(60) }),
      { freq: 2 },
    ),
    after: withAfter ? fc.option(fc.integer({ min: 0, max: 4 }), { freq: 3, nil: undefined }) : fc.constant(undefined),
  });
  return fc.array(one, { minLength: 2, maxLength: 5 }).map((specs) =>
    specs.map((s, i) =>
      tool(`t${i}`, {
        ...(s.effects ?? {}),
        idempotent: s.idempotent,
        ...(s.retry && s.idempotent ? { retry: s.retry } : {}),
        after: s.after !== undefined && s.after !== i && s.after < specs.length ? [`t${s.after}`] : [],
      }),
    ),
  );
}

/**
 * Reference targets for call i of n: earlier call ids (strong), or any call id, the call itself, and
 * tool names (weak). `ghost` never arrives.
 */
function targetsFor(i: number, n: number, nTools: number, forward: boolean): string[] {
  const ids = Array.from({ length: forward ? n : i }, (_, j) => `c${j}`);
  return forward ? [...ids, ...Array.from({ length: nTools }, (_, k) => `t${k}`)] : ids;
}

function arbCall(i: number, n: number, nTools: number, forward: boolean) {
  const targets = targetsFor(i, n, nTools, forward);
  const ref = (field: string) =>
    targets.length === 0 ? fc.constant(undefined) : fc.constantFrom(...targets).map((t) => `\${${t}.output.${field}}`);
  return fc
    .record({
      tool: fc.oneof({ weight: 12, arbitrary: fc.integer({ min: 0, max: nTools - 1 }) }, { weight: 1, arbitrary: fc.constant(-1) }),
      a:
        targets.length === 0
          ? fc.constantFrom(...VALUES)
          : fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...VALUES) }, { weight: 2, arbitrary: ref('v') as fc.Arbitrary<string> }),
      b: fc.constantFrom('p', 'q'),
      dep: fc.option(ref('id'), { freq: 3, nil: undefined }),
      ghost: fc.integer({ min: 0, max: 14 }).map((k) => k === 0),
      invalid: fc.integer({ min: 0, max: 19 }).map((k) => k === 0),
      ms: fc.integer({ min: 0, max: 30 }),
      fail: fc.oneof(
        { weight: 6, arbitrary: fc.constant(0) },
        { weight: 1, arbitrary: fc.constant(1) },
        { weight: 1, arbitrary: fc.constant(2) },
        { weight: 1, arbitrary: fc.constant('always') },
      ),
      retryable: fc.boolean(),
      v: fc.constantFrom(...VALUES),
    })
    .map((s): CallInput => {
      const id = `c${i}`;
      const tool = s.tool < 0 ? 'nope' : `t${s.tool}`;
      if (s.invalid) return { id, tool, args: {}, invalid: 'arguments are not valid JSON' };
      return {
        id,
        tool,
        args: {
          a: s.a,
          b: s.b,
          ms: s.ms,
          fail: s.fail,
          retryable: s.retryable,
          v: s.v,
          ...(s.dep !== undefined ? { dep: s.dep } : {}),
          ...(s.ghost ? { g: '${ghost.output}' } : {}),
        },
      };
    });
}

function arbScenario(forward: boolean): fc.Arbitrary<Scenario> {
  return arbTools(forward).chain((tools) =>
    fc.integer({ min: 1, max: 10 }).chain((n) =>
      fc
        .record({
          calls: fc.tuple(...Array.from({ length: n }, (_, i) => arbCall(i, n, tools.length, forward))),
          gaps: fc.array(fc.oneof({ weight: 2, arbitrary: fc.constant(0) }, { weight: 3, arbitrary: fc.integer({ min: 1, max: 40 }) }), {
            minLength: n,
            maxLength: n,
          }),
          split: fc.array(fc.boolean(), { minLength: n, maxLength: n }),
          sealAfter: fc.integer({ min: 0, max: 50 }),
          failure: fc.constantFrom<FailureMode>('partial', 'replan'),
          global: fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }),
          perRun: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
          toolLimits: fc.array(fc.option(fc.integer({ min: 1, max: 2 }), { nil: undefined }), {
            minLength: tools.length,
            maxLength: tools.length,
          }),
        })
        .map((g): Scenario => {
          const arrivals: number[] = [];
          let t = 0;
          for (const gap of g.gaps) arrivals.push((t += gap));
          return {
            tools,
            calls: g.calls,
            arrivals,
            split: g.split,
            sealAt: t + g.sealAfter,
            failure: g.failure,
            limits: {
              ...(g.global !== undefined ? { global: g.global } : {}),
              ...(g.perRun !== undefined ? { perRun: g.perRun } : {}),
              tool: Object.fromEntries(g.toolLimits.flatMap((l, i) => (l === undefined ? [] : [[`t${i}`, l]]))),
            },
          };
        }),
    ),
  );
}

// ---- running a scenario both ways ----------------------------------------------------------------

/** An attempt's duration and outcome, from the call's args and the attempt number alone. */
function attempt(s: StartAttempt): SimulatedAttempt {
  const a = s.args as Record<string, unknown>;
  const ms = typeof a.ms === 'number' ? a.ms : 10;
  const fail = a.fail === 'always' || (typeof a.fail === 'number' && s.attempt <= a.fail);
  if (fail) {
    return {
      durationMs: ms,
      result: {
        ok: false,
        error: callError('tool_error', `${s.callId} attempt ${s.attempt} failed`),
        ...(a.retryable === true ? { retryable: true } : {}),
      },
    };
  }
  // The output carries what the references resolved to, so equal outputs mean equal data flow.
  return { durationMs: ms, result: { ok: true, output: { id: s.callId, v: a.v, a: a.a, attempt: s.attempt } } };
}

function scheduler(sc: Scenario): Scheduler {
  return new Scheduler({
    catalog: catalogOf(sc.tools),
    policy: { rules: [] },
    limits: fullLimits(sc.limits),
    defaults: { ...DEFAULTS, openRunTimeoutMs: 1_000_000 },
  });
}

function runBatch(sc: Scenario): CoreEvent[] {
  const s = scheduler(sc);
  const sim = new Simulation(s, { attempt });
  sim.at(0, (now) => s.submit(now, { runId: 'r1', tenant: 'acme', calls: sc.calls, failure: sc.failure }));
  sim.run();
  return sim.events;
}

function runStreamed(sc: Scenario): CoreEvent[] {
  const s = scheduler(sc);
  const sim = new Simulation(s, { attempt });
  sim.at(0, (now) => s.submit(now, { runId: 'r1', tenant: 'acme', calls: [], failure: sc.failure, open: true }));
  let group: CallInput[] = [];
  const flush = (at: number) => {
    const calls = group;
    group = [];
    if (calls.length > 0) sim.at(at, (now) => s.append(now, 'r1', calls));
  };
  sc.calls.forEach((c, i) => {
    const at = sc.arrivals[i] as number;
    if (i > 0 && (at !== sc.arrivals[i - 1] || sc.split[i])) flush(sc.arrivals[i - 1] as number);
    group.push(c);
  });
  flush(sc.arrivals[sc.calls.length - 1] as number);
  sim.at(sc.sealAt, (now) => s.seal(now, 'r1'));
  sim.run();
  return sim.events;
}

function outcome(events: CoreEvent[]) {
  const v = RunProjection.of(events).view;
  return {
    status: v.status,
    calls: v.calls.map((c) => ({
      id: c.id,
      status: c.status,
      attempts: c.attempts,
      output: c.output,
      code: (c.error ?? c.blockedBy)?.code ?? null,
    })),
  };
}

function graph(events: CoreEvent[]): string[] {
  return events
    .filter((e) => e.type === 'run.started' || e.type === 'run.calls_added' || e.type === 'run.sealed')
    .flatMap((e) => (e.data.edges as Edge[]).map((x) => `${x.from}→${x.to} ${x.kind} (${x.reason})`))
    .sort();
}

// ---- the checks on a streamed trace ----------------------------------------------------------------

const conflicting = (p: Access, q: Access) =>
  anyOverlap(p.writes, q.writes) || anyOverlap(p.writes, q.reads) || anyOverlap(p.reads, q.writes);

/** Every violation of the streaming invariants found in the trace (empty when there is none). */
function violations(sc: Scenario, events: CoreEvent[]): string[] {
  const bad = illegalMoves(events);
  const plan = buildPlan({ calls: sc.calls, tenant: 'acme', catalog: catalogOf(sc.tools), policy: { rules: [] } });
  const access = new Map(plan.calls.map((p) => [p.id, p.access]));
  const preds = new Map<string, string[]>();
  for (const e of plan.edges) if (e.kind !== 'conflict') preds.set(e.to, [...(preds.get(e.to) ?? []), e.from]);

  const started = new Set<string>();
  const succeeded = new Set<string>();
  const running = new Set<string>();
  let sealedAt = -1;
  let completed = 0;
  events.forEach((e, n) => {
    const where = `event ${n} (${e.at} ${e.type} ${e.callId ?? ''})`;
    if (e.type === 'run.sealed') sealedAt = n;
    if (e.type === 'run.completed') {
      completed++;
      if (sealedAt < 0) bad.push(`${where}: the run completed before its seal`);
    }
    if (e.type === 'run.started' || e.type === 'run.calls_added' || e.type === 'run.sealed') {
      for (const x of e.data.edges as Edge[])
        if (started.has(x.to)) bad.push(`${where}: ${x.to} gained the predecessor ${x.from} (${x.kind}) after it started`);
    }
    if (e.callId === undefined) return;
    const s = statusAfter(e);
    if (s === 'succeeded') succeeded.add(e.callId);
    if (s !== undefined && s !== 'running') running.delete(e.callId);
    if (e.type !== 'call.started') return;
    started.add(e.callId);
    for (const p of preds.get(e.callId) ?? []) if (!succeeded.has(p)) bad.push(`${where}: started before its predecessor ${p} succeeded`);
    const mine = access.get(e.callId) as Access;
    for (const o of running) if (conflicting(mine, access.get(o) as Access)) bad.push(`${where}: runs at once with the conflicting ${o}`);
    running.add(e.callId);
  });
  if (completed !== 1) bad.push(`run.completed ${completed} times`);
  const view = RunProjection.of(events).view;
  for (const c of view.calls)
    if (!['succeeded', 'failed', 'blocked', 'cancelled'].includes(c.status)) bad.push(`${c.id} ended ${c.status}`);
  return bad;
}

// ---- properties ----------------------------------------------------------------------------------

describe('a streamed run against the same batch submitted at once', () => {
  it(
    'has the same graph and outcome when calls refer only to earlier calls',
    () => {
      fc.assert(
        fc.property(arbScenario(false), (sc) => {
          const batch = runBatch(sc);
          const streamed = runStreamed(sc);
          expect(violations(sc, streamed)).toEqual([]);
          expect(outcome(streamed)).toEqual(outcome(batch));
          expect(graph(streamed)).toEqual(graph(batch));
        }),
        { numRuns: RUNS },
      );
    },
    TIMEOUT,
  );

  it(
    'has the same outcome with forward references, references by tool name and `after` policies',
    () => {
      fc.assert(
        fc.property(arbScenario(true), (sc) => {
          const batch = runBatch(sc);
          const streamed = runStreamed(sc);
          expect(violations(sc, streamed)).toEqual([]);
          expect(outcome(streamed)).toEqual(outcome(batch));
          // Data and policy edges are the same; only the conflict order may differ.
          const noConflicts = (g: string[]) => g.filter((x) => !x.includes(' conflict ('));
          expect(noConflicts(graph(streamed))).toEqual(noConflicts(graph(batch)));
        }),
        { numRuns: RUNS },
      );
    },
    TIMEOUT,
  );

  it('blocks a call through the predecessor that a failure reaches first, not through a cycle partner (found by the property above)', () => {
    // c0 fails at plan time; c5 (refers to c0) and c7 refer to each other; c4 refers to c1 (after the
    // self-cycle c8, through a tool name) and c5. A batch blocks c5, c7 and c4 through c0's failure
    // first; the stream once named c7 as c5's way to c0, so c4 was blocked through c8 instead.
    const sc = {
      tools: [
        {
          name: 't0',
          scope: 'tenant',
          risk: 'write',
          idempotent: false,
          timeoutMs: 60000,
          after: [],
          requires: [],
          executor: { kind: 'builtin', name: 'echo' },
          reads: [],
          writes: ['k:y'],
        },
        {
          name: 't1',
          scope: 'tenant',
          risk: 'write',
          idempotent: true,
          timeoutMs: 60000,
          after: [],
          requires: [],
          executor: { kind: 'builtin', name: 'echo' },
          reads: ['k:*'],
          writes: ['k:{a}:{b}', 'k:x'],
        },
        {
          name: 't2',
          scope: 'tenant',
          risk: 'write',
          idempotent: false,
          timeoutMs: 60000,
          after: [],
          requires: [],
          executor: { kind: 'builtin', name: 'echo' },
        },
      ],
      calls: [
        { id: 'c0', tool: 't0', args: {}, invalid: 'arguments are not valid JSON' },
        { id: 'c1', tool: 't0', args: { a: '${t2.output.v}', b: 'p', ms: 0, fail: 0, retryable: false, v: 'x' } },
        { id: 'c2', tool: 't0', args: {}, invalid: 'arguments are not valid JSON' },
        { id: 'c3', tool: 't0', args: {}, invalid: 'arguments are not valid JSON' },
        {
          id: 'c4',
          tool: 't0',
          args: { a: '${c1.output.v}', b: 'p', ms: 0, fail: 1, retryable: false, v: 'x', dep: '${c5.output.id}', g: '${ghost.output}' },
        },
        {
          id: 'c5',
          tool: 'nope',
          args: { a: '${c7.output.v}', b: 'p', ms: 0, fail: 0, retryable: false, v: 'x', dep: '${c0.output.id}', g: '${ghost.output}' },
        },
        { id: 'c6', tool: 't0', args: {}, invalid: 'arguments are not valid JSON' },
        {
          id: 'c7',
          tool: 't0',
          args: { a: '${t1.output.v}', b: 'p', ms: 0, fail: 0, retryable: false, v: 'x', dep: '${c5.output.id}', g: '${ghost.output}' },
        },
        { id: 'c8', tool: 't2', args: { a: '${c0.output.v}', b: 'p', ms: 0, fail: 0, retryable: false, v: 'x', dep: '${c8.output.id}' } },
      ],
      arrivals: [0, 0, 1, 1, 2, 3, 4, 4, 5],
      split: [false, false, false, false, false, false, false, false, false],
      sealAt: 5,
      failure: 'partial',
      limits: { tool: {} },
    } as Scenario;
    const streamed = runStreamed(sc);
    expect(outcome(streamed)).toEqual(outcome(runBatch(sc)));
    expect(outcome(streamed).calls.find((c) => c.id === 'c4')?.code).toBe('dependency_failed');
  });

  it('sees the conflict order differ from a batch only with a later-settled call (the documented exception)', () => {
    // u refers to p by tool name, so u settles at the seal; w (which arrived after u and writes what u
    // reads) settles on arrival. In a batch u comes first (original order); streamed, w does.
    const tools = [
      tool('probe', { reads: [], writes: [] }),
      tool('rd', { reads: ['k:{a}'], writes: [] }),
      tool('wr', { reads: [], writes: ['k:{a}'] }),
    ];
    const calls: CallInput[] = [
      { id: 'p', tool: 'probe', args: { ms: 5, v: 'x' } },
      { id: 'u', tool: 'rd', args: { a: 'x', n: '${probe.output.v}', ms: 5 } },
      { id: 'w', tool: 'wr', args: { a: 'x', ms: 5 } },
    ];
    const sc: Scenario = { tools, calls, arrivals: [0, 0, 0], split: [false, true, true], sealAt: 20, failure: 'partial', limits: {} };
    const batch = runBatch(sc);
    const streamed = runStreamed(sc);
    expect(graph(batch)).toEqual(['p→u data (u uses ${probe.output})', 'u→w conflict (write-after-read on k:x)']);
    expect(graph(streamed)).toEqual(['p→u data (u uses ${probe.output})', 'w→u conflict (read-after-write on k:x)']);
    expect(outcome(streamed)).toEqual(outcome(batch));
    expect(violations(sc, streamed)).toEqual([]);
  });
});
