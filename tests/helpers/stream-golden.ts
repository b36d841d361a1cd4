/**
 * Golden traces of streamed runs (DESIGN §10): seeded random scenarios, and everything the core says
 * about each, serialized, so that a change meant to make streaming cheaper can be shown to change no
 * result (tests/unit/stream-golden.test.ts compares a hash per scenario with tests/fixtures/stream-golden.json).
 *
 * A scenario: a few tools (resources with wildcards and prefixes, unknown effects, pure; `after`,
 * `requires`, dangerous, fail-fast, retries, input schemas), policy rules (deny, review, after,
 * requires), and a batch whose calls refer to each other by id (earlier, later, themselves, ids that
 * never arrive), by tool name (used once, many times, never, not in the catalog), malformed, with
 * invalid args; some ids are tool names. The batch is split into random appends at random times, and
 * the run is sealed (or left for the open-run timeout, which may come before the last appends), in
 * partial, replan or fail-fast mode, sometimes cancelled on the way.
 *
 * For each scenario, four traces:
 * - `planner`: every `StreamStep` of a `StreamPlanner` fed the appends and the seal;
 * - `events`: the scheduler's whole event stream on the virtual clock (attempts end by their args);
 * - `restored`: a scheduler restored from a prefix of those events (the silent replay of appends and
 *   seal), its output, and then the rest of the appends and the seal;
 * - `errors`: what the scheduler refused (appends after the seal).
 */
import { createHash } from 'node:crypto';
import type { CallInput } from '../../src/core/calls.js';
import { callError } from '../../src/core/errors.js';
import type { CoreEvent } from '../../src/core/events.js';
import type { Plan, PlannedCall } from '../../src/core/plan.js';
import { rng } from '../../src/core/random.js';
import { Scheduler, type Output, type StartAttempt } from '../../src/core/scheduler.js';
import { Simulation, type SimulatedAttempt } from '../../src/core/simulation.js';
import { StreamPlanner, type StreamStep } from '../../src/core/stream-plan.js';
import type { FailureMode, Policy, PolicyRule, ToolManifest } from '../../src/core/tool.js';
import { catalogOf, DEFAULTS, limits, tool } from './sched.js';

export interface GoldenScenario {
  seed: number;
  tools: ToolManifest[];
  policy: Policy;
  chunks: CallInput[][];
  /** Arrival time of each chunk (non-decreasing). */
  at: number[];
  /** When the run is sealed; undefined: only the open-run timeout seals it. */
  sealAt: number | undefined;
  openRunTimeoutMs: number;
  cancelAt: number | undefined;
  failure: FailureMode;
  /** Where the restored trace cuts the event stream (a fraction of it). */
  cut: number;
}

const TEMPLATES = ['k:{a}', 'k:{a}:{b}', 'k:x', 'k:*', 'j:{a}', 'k', 'k:y', 'j:{b}/z', 'k:{a}/{b}'];
const VALUES = ['x', 'y', 'y/z', 'w', '*'];

export function scenario(seed: number): GoldenScenario {
  const r = rng(seed * 7919 + 17);
  const int = (lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;
  const chance = (p: number) => r() < p;

  const nTools = int(2, 6);
  const names = Array.from({ length: nTools }, (_, i) => `t${i}`);
  const tools = names.map((name, i) => {
    const effects = chance(0.12)
      ? {}
      : chance(0.1)
        ? { reads: [], writes: [] }
        : { reads: pickSome(TEMPLATES, int(0, 2), r), writes: pickSome(TEMPLATES, int(0, 2), r) };
    const idempotent = chance(0.5);
    const others = names.filter((n) => n !== name);
    const after = chance(0.15) ? [chance(0.2) ? 't*' : pick(others)] : [];
    const requires = chance(0.08) ? [chance(0.3) ? 'zz*' : pick(others)] : [];
    return tool(name, {
      ...effects,
      idempotent,
      ...(idempotent && chance(0.4) ? { retry: { attempts: int(1, 3), backoffMs: int(1, 30), maxBackoffMs: 50 } } : {}),
      after,
      requires,
      risk: chance(0.08) ? 'dangerous' : chance(0.5) ? 'read' : 'write',
      ...(chance(0.06) ? { failure: 'fail_fast' as const } : {}),
      ...(chance(0.15) ? { input: { type: 'object', properties: { b: { type: 'string' } }, required: ['b'] } } : {}),
      ...(chance(0.1) && i > 0 ? { scope: pick(['run', 'global'] as const) } : {}),
      ...(chance(0.08) ? { compensate: { tool: 't0', args: { undo: '${self.args.a}' } } } : {}),
    });
  });
  const rules: PolicyRule[] = [];
  for (let k = int(0, 2); k > 0; k--) {
    const match = chance(0.7) ? { tool: pick([...names, 't*']) } : { risk: pick(['read', 'write'] as const) };
    const kind = int(0, 5);
    if (kind === 0) rules.push({ match, deny: 'not here' });
    else if (kind === 1) rules.push({ match, review: true });
    else if (kind === 2) rules.push({ match, after: [pick(names)] });
    else if (kind === 3) rules.push({ match, requires: [pick([...names, 'zz'])] });
    else if (kind === 4) rules.push({ match, allow: true });
    else rules.push({ match, after: [pick(names)], review: false });
  }

  const n = chance(0.1) ? int(20, 60) : int(1, 16);
  // Some call ids are tool names (a reference to such a name names the call), one may be `nope`.
  const ids = Array.from({ length: n }, (_, i) => (chance(0.05) ? pick([...names, 'nope', `x.y${i}`]) : `c${i}`));
  const unique = new Set<string>();
  for (let i = 0; i < n; i++) {
    if (unique.has(ids[i] as string)) ids[i] = `c${i}`;
    unique.add(ids[i] as string);
  }
  // A third of the scenarios are tame: references name earlier calls, and plan-time errors are rare.
  const tame = chance(0.35);
  const forward = !tame && chance(0.6);
  const toolRefs = !tame && chance(0.5);
  const ref = (i: number): string => {
    const k = tame ? int(0, 8) : int(0, 19);
    const field = pick(['', '.v', '.a', '.id', '.id', '.list[0]', '.missing', '[0]']);
    let target: string;
    if (k < 9 && i > 0) target = ids[int(0, i - 1)] as string;
    else if (k < 12 && forward) target = ids[int(0, n - 1)] as string;
    else if (k === 12) target = ids[i] as string;
    else if (k === 13) target = chance(0.5) ? 'ghost' : 'self';
    else if (k < 17 && toolRefs) target = pick([...names, 'nope']);
    else if (k === 17) return chance(0.5) ? `\${${ids[0]}.outpt}` : `\${${ids[0]}.output.}`;
    else if (k === 18) return `$\${${ids[0]}.output}`;
    else target = i > 0 ? (ids[i - 1] as string) : 'ghost';
    return `\${${target}.output${field}}`;
  };
  const calls: CallInput[] = ids.map((id, i) => {
    const t = !tame && chance(0.03) ? 'nope' : pick(names);
    if (!tame && chance(0.02)) return { id, tool: t, args: {}, invalid: 'arguments are not valid JSON' };
    const args: Record<string, unknown> = { ms: int(0, 30), v: pick(VALUES) };
    args.a = chance(0.35) ? ref(i) : pick(VALUES);
    if (chance(0.95)) args.b = chance(0.3) ? `in ${ref(i)} and $\${lit}` : pick(VALUES);
    if (chance(0.3)) args.dep = { deep: [ref(i)] };
    if (chance(0.1)) args.fail = pick([1, 2, 'always']);
    if (chance(0.5)) args.retryable = true;
    return { id, tool: t, args };
  });

  const chunks: CallInput[][] = [];
  const at: number[] = [];
  let time = 0;
  for (let i = 0; i < n; ) {
    const size = chance(0.5) ? 1 : int(1, Math.min(6, n - i));
    chunks.push(calls.slice(i, i + size));
    time += chance(0.3) ? 0 : int(1, 25);
    at.push(time);
    i += size;
  }
  const timeoutOnly = chance(0.08);
  const openRunTimeoutMs = timeoutOnly && chance(0.5) ? int(1, Math.max(1, time)) : 1_000_000;
  return {
    seed,
    tools,
    policy: { rules },
    chunks,
    at,
    sealAt: timeoutOnly ? undefined : time + int(0, 30),
    openRunTimeoutMs,
    cancelAt: chance(0.06) ? int(0, time + 20) : undefined,
    failure: pick(['partial', 'partial', 'replan', 'fail_fast'] as const),
    cut: r(),
  };
}

function pickSome<T>(xs: readonly T[], k: number, r: () => number): T[] {
  const out: T[] = [];
  for (let j = 0; j < k; j++) {
    const x = xs[Math.floor(r() * xs.length)] as T;
    if (!out.includes(x)) out.push(x);
  }
  return out;
}

// ---- running a scenario --------------------------------------------------------------------------

function attempt(s: StartAttempt): SimulatedAttempt {
  const a = s.args as Record<string, unknown>;
  if (s.kind === 'compensation') return { durationMs: 3, result: { ok: true, output: { undone: a } } };
  const ms = typeof a.ms === 'number' ? a.ms : 10;
  const fail = a.fail === 'always' || (typeof a.fail === 'number' && s.attempt <= a.fail);
  if (fail)
    return {
      durationMs: ms,
      result: {
        ok: false,
        error: callError('tool_error', `${s.callId} attempt ${s.attempt} failed`),
        ...(a.retryable === true ? { retryable: true } : {}),
      },
    };
  return { durationMs: ms, result: { ok: true, output: { id: s.callId, v: a.v, a: a.a, attempt: s.attempt, list: [a.b] } } };
}

function newScheduler(sc: GoldenScenario, explainWaits: boolean): Scheduler {
  return new Scheduler({
    ...(explainWaits ? { explainWaits } : {}),
    catalog: catalogOf(sc.tools),
    policy: sc.policy,
    limits: limits({ global: 1 + (sc.seed % 4), maxCallsPerRun: 100_000 }),
    defaults: { ...DEFAULTS, failure: 'partial', openRunTimeoutMs: sc.openRunTimeoutMs },
  });
}

const EMPTY: Output = { events: [], starts: [], aborts: [] };

export interface GoldenTraces {
  planner: unknown[];
  events: CoreEvent[];
  restored: unknown;
  errors: string[];
}

/**
 * With `explainWaits` (issue #21), the scheduler adds `call.waiting` events; they are left out of the
 * traces, which must then be what they are without it: explaining waits changes no decision.
 */
export function traces(sc: GoldenScenario, explainWaits = false, waited?: (n: number) => void): GoldenTraces {
  // The planner alone.
  const planner: unknown[] = [];
  const p = new StreamPlanner('acme', catalogOf(sc.tools), sc.policy);
  for (const chunk of sc.chunks) planner.push(stepJson(p.add(chunk)));
  planner.push(stepJson(p.seal()));

  // The scheduler on the virtual clock.
  const errors: string[] = [];
  const s = newScheduler(sc, explainWaits);
  const guarded = (what: string, f: () => Output) => () => {
    try {
      return f();
    } catch (e) {
      errors.push(`${what}: ${(e as Error).message}`);
      return EMPTY;
    }
  };
  const sim = new Simulation(s, {
    attempt,
    onEvent: (e, simulation) => {
      if (e.type !== 'call.awaiting_review') return;
      const callId = e.callId as string;
      const decision = callId.length % 3 === 0 ? 'reject' : callId.length % 3 === 1 ? 'approve' : 'edit';
      simulation.at(
        simulation.now + 4,
        guarded(`review ${callId}`, () =>
          s.decideReview(simulation.now, {
            runId: 'r1',
            callId,
            decision,
            ...(decision === 'edit' ? { args: { b: 'edited', ms: 2 } } : {}),
          }),
        ),
      );
    },
  });
  sim.at(0, (now) => s.submit(now, { runId: 'r1', tenant: 'acme', calls: [], failure: sc.failure, open: true }));
  sc.chunks.forEach((chunk, k) => {
    sim.at(sc.at[k] as number, (now) => guarded(`append ${k}`, () => s.append(now, 'r1', chunk))());
  });
  if (sc.sealAt !== undefined) sim.at(sc.sealAt, (now) => guarded('seal', () => s.seal(now, 'r1'))());
  if (sc.cancelAt !== undefined) sim.at(sc.cancelAt, (now) => guarded('cancel', () => s.cancel(now, 'r1'))());
  sim.run();
  const events = explainWaits ? sim.events.filter((e) => e.type !== 'call.waiting') : sim.events;
  waited?.(sim.events.length - events.length);

  // Restored from a prefix of the events, then the rest of the stream.
  const cut = Math.max(1, Math.floor(sc.cut * events.length));
  const prefix = events.slice(0, cut);
  const last = prefix[prefix.length - 1] as CoreEvent;
  const r = newScheduler(sc, explainWaits);
  const restored: unknown[] = [];
  try {
    restored.push(outJson(r.restore(last.at, prefix)));
    const appended = prefix.filter((e) => e.type === 'run.calls_added').length;
    for (const chunk of sc.chunks.slice(appended)) {
      try {
        restored.push(outJson(r.append(last.at, 'r1', chunk)));
      } catch (e) {
        restored.push(`append: ${(e as Error).message}`);
      }
    }
    restored.push(outJson(r.seal(last.at, 'r1')));
  } catch (e) {
    restored.push(`restore: ${(e as Error).message}`);
  }
  return { planner, events, restored, errors };
}

/** A hash of everything a scenario's traces say. */
export function traceHash(t: GoldenTraces): string {
  return createHash('sha256').update(JSON.stringify(t)).digest('hex').slice(0, 16);
}

// ---- serializing ---------------------------------------------------------------------------------

function outJson(o: Output): unknown {
  // `run.resumed` (a restore says it took the run back, DESIGN §8) came after the traces were
  // recorded; the recordings test it (replay-takeover.test.ts). Nothing else of a restore changed.
  const events = o.events.filter((e) => e.type !== 'call.waiting' && e.type !== 'run.resumed');
  // `index` is a lookup hint added after the traces were recorded; what it must be is tested in
  // scheduler-internals.test.ts.
  return { events, starts: o.starts.map(({ index: _, ...s }) => ({ ...s, tool: s.tool.name })), aborts: o.aborts };
}

/**
 * A planned call as plain data. `blockedBy` of the calls in `planned` (the calls added by a step) is left
 * out: whether an arrived call lies on a cycle with other calls is only settled when it is (see
 * StreamStep.planned); the settled plans keep it.
 */
export function plannedJson(c: PlannedCall, withBlocked = true): unknown {
  return {
    index: c.index,
    id: c.id,
    tool: c.tool,
    args: c.args,
    manifest: c.manifest?.name ?? null,
    error: c.error ?? null,
    ...(withBlocked ? { blockedBy: c.blockedBy ?? null } : {}),
    review: c.review ?? null,
    targets: [...c.targets],
    refCalls: [...c.refCalls],
    hasRefs: c.hasRefs,
    access: { reads: c.access.reads.map((k) => k.text), writes: c.access.writes.map((k) => k.text) },
  };
}

function planJson(p: Plan): unknown {
  return {
    calls: p.calls.map((c) => plannedJson(c)),
    edges: p.edges,
    generations: p.generations,
    diagnostics: p.diagnostics,
    order: p.order,
    adjacency: { start: [...p.adjacency.start], list: [...p.adjacency.list] },
    edgeCalls: p.edgeCalls,
    byId: [...p.byId],
  };
}

export function stepJson(s: StreamStep): unknown {
  return {
    planned: s.planned.map((c) => plannedJson(c, false)),
    edges: s.edges,
    settled: s.settled,
    settledPlans: s.settledPlans.map((c) => plannedJson(c)),
    origin: [...s.origin],
    via: [...s.via],
    plan: s.plan ? planJson(s.plan) : null,
    diagnostics: s.diagnostics,
  };
}
