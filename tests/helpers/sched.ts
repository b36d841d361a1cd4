/**
 * Test helpers for the scheduler: a rig that drives a Scheduler with the virtual-clock Simulation and
 * scripted attempt outcomes, and readers that turn the event log into exact, comparable traces.
 *
 * Default attempt script (override with `script`): an attempt of a call takes `args.ms` ms (else 10),
 * fails when `args.fail` is `'always'` or a number ≥ the attempt number (retryable when
 * `args.retryable`, with `args.retryAfterMs` passed on), and otherwise succeeds with `args.out`
 * (else `{ id: callId }`). Compensations take 5 ms and succeed with `{ undone: args }`.
 */
import type { CallInput, CallStatus } from '../../src/core/calls.js';
import { callError } from '../../src/core/errors.js';
import type { CoreEvent, EventOf } from '../../src/core/events.js';
import { Scheduler, type AbortAttempt, type StartAttempt, type SubmitOptions } from '../../src/core/scheduler.js';
import { Simulation, type SimulatedAttempt, type SimulationHooks } from '../../src/core/simulation.js';
import type { HookMatcher } from '../../src/core/hooks.js';
import { transition } from '../../src/core/state.js';
import type { Defaults, FailureMode, Limits, Policy, ToolManifest } from '../../src/core/tool.js';
import { catalogOf } from './catalog.js';

export { catalogOf, tool } from './catalog.js';

export function limits(partial: Partial<Limits> = {}): Limits {
  return { tenant: {}, tool: {}, resource: {}, rate: { tenant: {} }, maxCallsPerRun: 1000, ...partial };
}

export const DEFAULTS: Defaults = { timeoutMs: 60_000, failure: 'partial', openRunTimeoutMs: 60_000 };

export type Script = (start: StartAttempt, now: number) => SimulatedAttempt;

export const defaultScript: Script = (s) => {
  const a = s.args as Record<string, unknown>;
  if (s.kind === 'compensation') return { durationMs: 5, result: { ok: true, output: { undone: a } } };
  const ms = typeof a.ms === 'number' ? a.ms : 10;
  const fail = a.fail === 'always' || (typeof a.fail === 'number' && s.attempt <= a.fail);
  if (fail) {
    return {
      durationMs: ms,
      result: {
        ok: false,
        error: callError('tool_error', `${s.callId} attempt ${s.attempt} failed`),
        ...(a.retryable === true ? { retryable: true } : {}),
        ...(typeof a.retryAfterMs === 'number' ? { retryAfterMs: a.retryAfterMs } : {}),
      },
    };
  }
  return { durationMs: ms, result: { ok: true, output: a.out ?? { id: s.callId } } };
};

export interface RigOptions {
  tools: ToolManifest[];
  limits?: Partial<Limits>;
  policy?: Policy;
  defaultFailure?: FailureMode;
  /** More of `defaults` (DESIGN §4: `queueTimeoutMs`). */
  defaults?: Partial<Defaults>;
  script?: Script;
  onEvent?: (e: CoreEvent, sim: Simulation) => void;
  /** Hooks (DESIGN §14): which calls wait for them, and how the test answers them. */
  hooks?: HookMatcher[];
  hook?: SimulationHooks['hook'];
  /** `SchedulerOptions.explainWaits`: `call.waiting` events. */
  explainWaits?: boolean;
}

export interface Rig {
  scheduler: Scheduler;
  sim: Simulation;
  events: CoreEvent[];
  /** Every abort the scheduler asked for, with the virtual time it asked. */
  aborts: (AbortAttempt & { at: number })[];
  /** Submits a run at virtual time `at` (the simulation runs it when `run()` is called). */
  submit(at: number, s: Partial<SubmitOptions> & { calls: CallInput[] }): void;
  run(): void;
}

export function rig(o: RigOptions): Rig {
  const scheduler = new Scheduler({
    catalog: catalogOf(o.tools),
    policy: o.policy ?? { rules: [] },
    limits: limits(o.limits),
    defaults: { ...DEFAULTS, failure: o.defaultFailure ?? 'partial', ...o.defaults },
    ...(o.hooks ? { hooks: o.hooks } : {}),
    ...(o.explainWaits ? { explainWaits: true } : {}),
  });
  const script = o.script ?? defaultScript;
  const sim = new Simulation(scheduler, {
    attempt: (s, now) => script(s, now),
    ...(o.onEvent ? { onEvent: o.onEvent } : {}),
    ...(o.hook ? { hook: o.hook } : {}),
  });
  const aborts: Rig['aborts'] = [];
  const apply = sim.apply.bind(sim);
  sim.apply = (out) => {
    for (const a of out.aborts) aborts.push({ ...a, at: sim.now });
    apply(out);
  };
  return {
    scheduler,
    sim,
    events: sim.events,
    aborts,
    submit(at, s) {
      sim.at(at, (now) => scheduler.submit(now, { runId: 'r1', tenant: 'acme', ...s }));
    },
    run() {
      sim.run();
    },
  };
}

// ---- reading the event log -----------------------------------------------------------------------

function label(e: CoreEvent, multiRun: boolean): string {
  return multiRun ? `${e.runId}/${e.callId}` : (e.callId as string);
}

function isMulti(events: CoreEvent[]): boolean {
  return new Set(events.map((e) => e.runId)).size > 1;
}

/** `"<at> <call>"` for every `call.started`, in event order (`run/call` when several runs). */
export function starts(events: CoreEvent[]): string[] {
  const multi = isMulti(events);
  return events.filter((e) => e.type === 'call.started').map((e) => `${e.at} ${label(e, multi)}`);
}

const END_WORD: Partial<Record<CoreEvent['type'], string>> = {
  'call.succeeded': 'ok',
  'call.failed': 'failed',
  'call.cancelled': 'cancelled',
  'call.blocked': 'blocked',
  'call.retry_scheduled': 'retry',
};

/** `"<at> <call> <ok|failed|cancelled|blocked|retry>"` for every end of a call or attempt, in order. */
export function ends(events: CoreEvent[]): string[] {
  const multi = isMulti(events);
  return events.filter((e) => END_WORD[e.type] !== undefined).map((e) => `${e.at} ${label(e, multi)} ${END_WORD[e.type]}`);
}

/** `"<at> <type> <call>"` lines for the given types (all call.* and run.* when none given). */
export function timeline(events: CoreEvent[], types?: CoreEvent['type'][]): string[] {
  const multi = isMulti(events);
  return events
    .filter((e) => !types || types.includes(e.type))
    .map((e) => `${e.at} ${e.type}${e.callId !== undefined ? ` ${label(e, multi)}` : multi ? ` ${e.runId}` : ''}`);
}

/** The last status of every call of a run, from its events. */
export function finalStatuses(events: CoreEvent[], runId = 'r1'): Record<string, CallStatus> {
  const out: Record<string, CallStatus> = {};
  const calls = events.find((e): e is EventOf<'run.created'> => e.type === 'run.created' && e.runId === runId)?.data.calls ?? [];
  for (const c of calls) out[c.id] = 'pending';
  for (const e of events) {
    if (e.runId !== runId) continue;
    if (e.type === 'run.replanned') for (const c of e.data.calls) out[c.id] = 'pending';
    const s = statusAfter(e);
    if (s !== undefined && e.callId !== undefined) out[e.callId] = s;
  }
  return out;
}

/** The run's status from its (last) run.completed event. */
export function runStatus(events: CoreEvent[], runId = 'r1'): string | undefined {
  const done = events.filter((e): e is EventOf<'run.completed'> => e.type === 'run.completed' && e.runId === runId);
  return done.at(-1)?.data.status;
}

/** The status a call event moves its call to (undefined for events that do not move it). */
export function statusAfter(e: CoreEvent): CallStatus | undefined {
  switch (e.type) {
    case 'call.ready':
      return 'ready';
    case 'call.started':
      return 'running';
    case 'call.retry_scheduled':
      return 'pending';
    case 'call.succeeded':
      return 'succeeded';
    case 'call.failed':
      return 'failed';
    case 'call.blocked':
      return 'blocked';
    case 'call.cancelled':
      return 'cancelled';
    case 'call.awaiting_review':
      return 'awaiting_review';
    case 'review.decided':
      return e.data.decision === 'reject' ? undefined : 'pending';
    default:
      return undefined;
  }
}

/**
 * Replays every call's events through the state machine of state.ts (starting at `pending`); returns
 * the illegal moves found (empty when all are legal). A `call.compensated` is legal only after
 * `succeeded`, and a `review.decided` only in `awaiting_review`.
 */
export function illegalMoves(events: CoreEvent[]): string[] {
  const calls = new Map<string, { id: string; status: CallStatus }>();
  const bad: string[] = [];
  for (const e of events) {
    if (e.callId === undefined) continue;
    const k = `${e.runId}/${e.callId}`;
    let c = calls.get(k);
    if (!c) calls.set(k, (c = { id: k, status: 'pending' }));
    if (e.type === 'call.compensated') {
      if (c.status !== 'succeeded') bad.push(`${k}: compensated while ${c.status}`);
      continue;
    }
    if (e.type === 'review.decided' && c.status !== 'awaiting_review') bad.push(`${k}: review decided while ${c.status}`);
    const to = statusAfter(e);
    if (to === undefined) continue;
    try {
      transition(c, to);
    } catch (err) {
      bad.push(`${k}: ${(err as Error).message} at ${e.type}`);
    }
  }
  return bad;
}

export interface Concurrency {
  /** The most calls running at once, in event order. */
  max: number;
  /** The first event index at which `max` was reached. */
  at: number;
}

/** The most attempts matching `pred` that run at once, counted along the event log. */
export function concurrency(events: CoreEvent[], pred: (e: CoreEvent) => boolean = () => true): Concurrency {
  const running = new Set<string>();
  let max = 0;
  let at = -1;
  events.forEach((e, i) => {
    if (e.callId === undefined) return;
    const k = `${e.runId}/${e.callId}`;
    if (e.type === 'call.started' && pred(e)) {
      running.add(k);
      if (running.size > max) {
        max = running.size;
        at = i;
      }
    } else if (END_WORD[e.type] !== undefined) running.delete(k);
  });
  return { max, at };
}

/** The tool of each call, from run.created / run.replanned events: `run/call` → tool. */
export function toolsOf(events: CoreEvent[]): Map<string, string> {
  const m = new Map<string, string>();
  for (const e of events) {
    if (e.type !== 'run.created' && e.type !== 'run.replanned') continue;
    for (const c of e.data.calls as CallInput[]) m.set(`${e.runId}/${c.id}`, c.tool);
  }
  return m;
}

/** Pure tool manifests: `reads: []`, `writes: []` (nothing shared). */
export const PURE = { reads: [] as string[], writes: [] as string[] };
