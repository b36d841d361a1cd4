/**
 * Runs a batch with toolgraph, two ways:
 * - `runEngine`: the live engine (real clock, real timers, the builtin `sleep`), timed by wall clock
 *   around submit → wait, like the baselines; run intervals come from the engine's own events
 *   (`call.started` → the call's end event), for the violation check;
 * - `runVirtual`: the same scheduler on the virtual clock (core/simulation.ts), each call taking exactly
 *   its `args.ms`: the schedule's makespan without timer jitter or shell overhead.
 * A fresh engine or scheduler per batch, so no run learns durations from the one before.
 */
import type { CallInput } from '../core/calls.js';
import type { CoreEvent, RunEvent } from '../core/events.js';
import { Scheduler, type StartAttempt } from '../core/scheduler.js';
import { Simulation } from '../core/simulation.js';
import type { Config } from '../config/types.js';
import { Engine } from '../engine/engine.js';
import type { Executor } from '../executors/types.js';
import type { Execution } from './baselines.js';
import type { Interval } from './instance.js';

const ENDS = new Set(['call.succeeded', 'call.failed', 'call.blocked', 'call.cancelled']);

/** Call intervals from a run's events, in ms from the first start; throws unless every call succeeded. */
export function intervalsFromEvents(calls: readonly CallInput[], events: readonly CoreEvent[]): { runs: Interval[]; spanMs: number } {
  const index = new Map(calls.map((c, i) => [c.id, i]));
  const runs: Interval[] = calls.map(() => ({ start: NaN, end: NaN }));
  let first = Infinity;
  let last = -Infinity;
  for (const e of events) {
    if (e.callId === undefined) continue;
    const r = runs[index.get(e.callId) as number] as Interval;
    if (e.type === 'call.started') {
      r.start = e.at;
      first = Math.min(first, e.at);
    } else if (ENDS.has(e.type)) {
      if (e.type !== 'call.succeeded') throw new Error(`${e.callId} ended ${e.type}: ${JSON.stringify(e.data)}`);
      r.end = e.at;
      last = Math.max(last, e.at);
    }
  }
  for (const r of runs) {
    r.start -= first;
    r.end -= first;
  }
  return { runs, spanMs: last - first };
}

export interface EngineExecution extends Execution {
  /** First `call.started` to the last end, from the events (ms resolution). */
  eventSpanMs: number;
}

export async function runEngine(calls: readonly CallInput[], config: Config, executor: Executor): Promise<EngineExecution> {
  const events: RunEvent[] = [];
  const engine = new Engine({ config, executor, sink: { append: (es) => void events.push(...es) } });
  try {
    const t0 = performance.now();
    const { id } = await engine.submit({ calls, tenant: 'bench' });
    const view = await engine.wait(id);
    const makespanMs = performance.now() - t0;
    if (view?.status !== 'succeeded') throw new Error(`toolgraph run ended ${view?.status}`);
    const { runs, spanMs } = intervalsFromEvents(calls, events);
    return { makespanMs, runs, eventSpanMs: spanMs };
  } finally {
    await engine.close();
  }
}

export interface VirtualExecution extends Execution {
  events: CoreEvent[];
}

/** The scheduler alone on the virtual clock: every call takes exactly `args.ms`. */
export function runVirtual(calls: readonly CallInput[], config: Config): VirtualExecution {
  const scheduler = new Scheduler({ catalog: config.catalog, policy: config.policy, limits: config.limits, defaults: config.defaults });
  const sim = new Simulation(scheduler, {
    attempt: (s: StartAttempt) => {
      const ms = Number((s.args as { ms?: unknown }).ms ?? 0);
      return { durationMs: ms, result: { ok: true, output: { ms } } };
    },
  });
  sim.at(0, (now) => scheduler.submit(now, { runId: 'virtual', tenant: 'bench', calls }));
  sim.run();
  const { runs } = intervalsFromEvents(calls, sim.events);
  return { makespanMs: Math.max(0, ...runs.map((r) => r.end)), runs, events: sim.events };
}
