/**
 * Replaying one recording (DESIGN §9): the recorded batch runs again through the same Scheduler, driven
 * by the virtual-clock Simulation, with every outside input taken from the recording:
 *
 * - each attempt takes its recorded duration and outcome, keyed by call id + attempt (a compensation's
 *   attempts separately); an attempt the recording lacks ends at once as a failure whose error says so
 *   (`details.replay: "not_recorded"`), so it is reported, never a crash;
 * - an attempt the recording shows aborted (cancel, fail-fast) has no known natural outcome: it runs
 *   until its recorded end plus a slack, and only if replay has not aborted it by then does it end as
 *   "not recorded";
 * - under a config whose timeout is lower than the recording's, a longer attempt ends as a `timeout`;
 * - timers fire as late as they fired: a retry that the recording shows becoming ready some time after
 *   its backoff ended (the engine's timer ran late) becomes ready that much later in replay too, so the
 *   real lag of one retry chain does not reorder it against another (a limit's wait is not a lag: the
 *   replay waits for the limit itself);
 * - hooks (DESIGN §14) are never called: a call that waits for its hooks gets their recorded decisions,
 *   at their recorded time or as soon as it waits if that is later, after their recorded durations; a
 *   call whose decisions the recording lacks goes on as if its hooks allowed it (and a note says so);
 * - reviews are decided at their recorded time, or as soon as the call awaits review if that is later;
 *   replans are applied at their recorded time once the run is `needs_replan`; a cancel at its time;
 * - the run keeps its id (retry jitter derives from it) and its recorded `estimates` (ranking).
 *
 * The replay's events fold into a `Recording` through `recordingOf`, so compare.ts compares two
 * documents of one shape.
 */
import type { Ajv } from 'ajv';
import type { CoreEvent } from '../core/events.js';
import { callError, type CallError } from '../core/errors.js';
import { Scheduler, type AttemptResult, type Output, type StartAttempt } from '../core/scheduler.js';
import { Simulation, type SimulatedAttempt } from '../core/simulation.js';
import type { Defaults } from '../core/tool.js';
import { createAjv, createCatalog } from '../config/catalog.js';
import type { RecordedAttempt, RecordedHook, Recording } from '../contract/recording.js';
import type { HookDecision } from '../core/hooks.js';
import { recordingOf, type RecordingConfig } from './recording.js';
import { internInputs } from './schema.js';

/** The `details.replay` of an attempt that replay had to end because the recording lacks it. */
export const NOT_RECORDED = 'not_recorded';

const DEFAULTS: Defaults = { timeoutMs: 60_000, failure: 'partial', openRunTimeoutMs: 30_000 };

export interface ReplayOptions {
  /** Replay under this config instead of the recording's own. */
  config?: RecordingConfig;
  /** Slack (ms) for an aborted attempt's unknown end and for timeouts. @default 5 */
  tolerance?: number;
  /** Compiles the recording's input schemas (share one across recordings: a cache). */
  ajv?: Ajv;
}

export interface ReplayRun {
  /** What replay did, in the recording's own shape (virtual times). */
  replayed: Recording;
  events: CoreEvent[];
  /** Recorded inputs (reviews, replans, cancel) that could not be applied, and why. */
  notes: string[];
  /** Virtual time when the run (last) completed, or when nothing was left to happen. */
  makespanMs: number;
}

/** The config a recording was made under, as the scheduler needs it (built with `createCatalog`). */
export function configOfRecording(rec: Recording, ajv: Ajv = createAjv()): RecordingConfig {
  const tools = internInputs(rec.config.tools, ajv);
  return {
    tools,
    catalog: createCatalog(tools, { ajv }),
    policy: rec.config.policy,
    limits: rec.config.limits,
    defaults: { ...DEFAULTS, ...rec.config.defaults },
    ...(rec.config.hooks ? { hooks: rec.config.hooks } : {}),
  };
}

/** The recorded decisions of one call's hooks of one event, as the scheduler takes them, due no earlier than `now`. */
function recordedDecisions(list: readonly RecordedHook[], now: number): { at: number; decisions: HookDecision[] } {
  const first = (list[0] as RecordedHook).atMs;
  const start = Math.max(now, first);
  let at = start;
  const decisions = list.map((h): HookDecision => {
    const startedAt = start + (h.atMs - first);
    at = Math.max(at, startedAt + h.durationMs);
    return {
      hook: h.hook,
      decision: h.decision,
      startedAt,
      durationMs: h.durationMs,
      ...(h.reason !== undefined ? { reason: h.reason } : {}),
      ...(h.args !== undefined ? { args: h.args } : {}),
      ...(Object.hasOwn(h, 'output') ? { output: h.output } : {}),
      ...(h.fail !== undefined ? { fail: h.fail } : {}),
      ...(h.error !== undefined ? { error: h.error } : {}),
    };
  });
  return { at, decisions };
}

const EMPTY: Output = { events: [], starts: [], aborts: [] };

function notRecorded(s: StartAttempt, why: string): AttemptResult {
  const which = `${s.kind === 'compensation' ? 'compensation ' : ''}attempt ${s.attempt} of ${s.callId}`;
  return {
    ok: false,
    error: callError('tool_error', `not in the recording: ${which} (${why})`, { details: { replay: NOT_RECORDED } }),
    retryable: false,
  };
}

/**
 * The scheduler with its timers firing as late as the recording shows (a retry became ready after its
 * backoff by the lag of the live engine's timer). The engine has one timer: when it fires, everything
 * due by then is handled at that moment, as here.
 */
class LaggedTimers extends Scheduler {
  /** Due time of a timer → when it fired in the recording. */
  private readonly fired = new Map<number, number>();

  /** A timer due at `at` fired `lagMs` late in the recording. */
  lag(at: number, lagMs: number): void {
    if (lagMs > 0) this.fired.set(at, Math.max(at + lagMs, this.fired.get(at) ?? 0));
  }

  override nextWakeAt(): number | undefined {
    const at = super.nextWakeAt();
    return at === undefined ? undefined : (this.fired.get(at) ?? at);
  }

  override tick(now: number): Output {
    for (const at of this.fired.keys()) if (at <= now) this.fired.delete(at);
    return super.tick(now);
  }
}

function keyOf(kind: 'call' | 'compensation', callId: string, attempt: number): string {
  return `${kind}/${callId}/${attempt}`;
}

/** Replays a recording on a virtual clock. Never throws for anything a recording can contain. */
export function replayRecording(rec: Recording, opts: ReplayOptions = {}): ReplayRun {
  const config = opts.config ?? configOfRecording(rec, opts.ajv);
  const slack = Math.max(1, opts.tolerance ?? 5);
  const runId = rec.run.id;
  const byKey = new Map<string, RecordedAttempt>();
  const counts = new Map<string, number>();
  for (const a of rec.attempts) {
    const kind = a.compensation ? 'compensation' : 'call';
    byKey.set(keyOf(kind, a.callId, a.attempt), a);
    counts.set(`${kind}/${a.callId}`, (counts.get(`${kind}/${a.callId}`) ?? 0) + 1);
  }
  const recordedTimeouts = new Map(rec.config.tools.map((t) => [t.name, t.timeoutMs]));
  const notes: string[] = [];
  const scheduler = new LaggedTimers({
    catalog: config.catalog,
    policy: config.policy,
    limits: config.limits,
    defaults: config.defaults,
    ...(config.hooks ? { hooks: config.hooks } : {}),
  });
  const hooks = new Map<string, RecordedHook[]>();
  for (const h of rec.hooks ?? []) hooks.set(`${h.on}/${h.callId}`, [...(hooks.get(`${h.on}/${h.callId}`) ?? []), h]);

  const attempt = (s: StartAttempt): SimulatedAttempt => {
    const a = byKey.get(keyOf(s.kind, s.callId, s.attempt));
    if (!a) {
      const n = counts.get(`${s.kind}/${s.callId}`) ?? 0;
      return { durationMs: 0, result: notRecorded(s, n === 0 ? 'the recording never started it' : `the recording has ${n}`) };
    }
    const took = a.endMs - a.startMs;
    let sim: SimulatedAttempt;
    if (!a.ok && a.error?.code === 'cancelled') {
      sim = { durationMs: took + slack, result: notRecorded(s, `the recording aborted it after ${took} ms`) };
    } else {
      const result: AttemptResult = a.ok
        ? { ok: true, output: a.output }
        : {
            ok: false,
            error: a.error as CallError,
            ...(a.retryable !== undefined ? { retryable: a.retryable } : {}),
            ...(a.retryAfterMs !== undefined ? { retryAfterMs: a.retryAfterMs } : {}),
            // Backpressure (DESIGN §4): the recorded answer paused its tool; replay pauses it the same.
            ...(a.pauseMs !== undefined ? { pauseMs: a.pauseMs } : {}),
            ...(a.pauseStatus !== undefined ? { pauseStatus: a.pauseStatus } : {}),
          };
      sim = { durationMs: took, result };
    }
    // Only a timeout lowered since the recording can cut an attempt short (a recorded one has its outcome).
    const recordedTimeout = recordedTimeouts.get(s.tool.name) ?? Infinity;
    if (s.timeoutMs < recordedTimeout && sim.durationMs > s.timeoutMs && a.error?.code !== 'timeout') {
      sim = {
        durationMs: s.timeoutMs,
        result: { ok: false, error: callError('timeout', `timed out after ${s.timeoutMs} ms`), retryable: true },
      };
    }
    return sim;
  };

  // Inputs from outside the run, applied when both their recorded time has come and the run is ready.
  const safely = (what: string, f: (now: number) => Output) => (now: number) => {
    try {
      return f(now);
    } catch (e) {
      notes.push(`${what} could not be applied at ${now} ms: ${(e as Error).message}`);
      return EMPTY;
    }
  };
  const awaiting = new Set<string>();
  const reviewDue = new Map<string, Recording['reviews'][number]>();
  const decide = (r: Recording['reviews'][number]) =>
    safely(`the ${r.decision} review of ${r.callId}`, (now) => {
      reviewDue.delete(r.callId);
      return scheduler.decideReview(now, {
        runId,
        callId: r.callId,
        decision: r.decision,
        ...(r.args ? { args: r.args } : {}),
        ...(r.comment !== undefined ? { comment: r.comment } : {}),
      });
    });
  // Replans apply in order, each once its recorded time has come and the run is `needs_replan`.
  const replans = [...rec.replans];
  const due = new Set<Recording['replans'][number]>();
  const replanIfDue = safely('a replan', (now) => {
    const next = replans[0];
    if (!next || !due.has(next) || scheduler.runStatus(runId) !== 'needs_replan') return EMPTY;
    replans.shift();
    return scheduler.replan(now, runId, next.calls);
  });

  const sim = new Simulation(scheduler, {
    attempt,
    hook(req, now) {
      const list = hooks.get(`${req.on}/${req.callId}`);
      if (list) return recordedDecisions(list, now);
      notes.push(`the ${req.on} hooks of ${req.callId} (at ${now} ms) are not in the recording: it went on as if they allowed it`);
      return { at: now, decisions: [] };
    },
    onEvent(e, s) {
      if (e.type === 'call.retry_scheduled' && e.callId !== undefined) {
        const failed = byKey.get(keyOf('call', e.callId, e.data.attempt - 1));
        const next = byKey.get(keyOf('call', e.callId, e.data.attempt));
        if (failed?.retryAtMs !== undefined && next?.readyMs !== undefined) scheduler.lag(e.data.at, next.readyMs - failed.retryAtMs);
      }
      if (e.type === 'call.awaiting_review' && e.callId !== undefined) {
        awaiting.add(e.callId);
        const due = reviewDue.get(e.callId);
        if (due) s.at(s.now, decide(due));
      } else if (e.callId !== undefined && e.type !== 'call.ready') awaiting.delete(e.callId);
      if (e.type === 'run.completed' && e.data.status === 'needs_replan') s.at(s.now, replanIfDue);
    },
  });
  const callInput = (c: Recording['calls'][number]) => ({
    id: c.id,
    tool: c.tool,
    ...(c.args ? { args: c.args } : {}),
    ...(c.invalid !== undefined ? { invalid: c.invalid } : {}),
  });
  // A streamed run (its calls carry arrival times) is replayed as it arrived: open, appends, seal.
  const streamed = rec.sealedAtMs !== undefined || rec.calls.some((c) => c.atMs !== undefined);
  sim.at(
    0,
    safely('the batch', (now) =>
      scheduler.submit(now, {
        runId,
        tenant: rec.run.tenant,
        calls: streamed ? [] : rec.calls.map(callInput),
        failure: rec.run.failure,
        tags: rec.run.tags,
        estimates: rec.estimates ?? {},
        ...(streamed ? { open: true } : {}),
      }),
    ),
  );
  if (streamed) {
    const arrivals = new Map<number, Recording['calls']>();
    for (const c of rec.calls) arrivals.set(c.atMs ?? 0, [...(arrivals.get(c.atMs ?? 0) ?? []), c]);
    for (const [atMs, calls] of [...arrivals].sort(([a], [b]) => a - b)) {
      sim.at(
        atMs,
        safely('appended calls', (now) => scheduler.append(now, runId, calls.map(callInput))),
      );
    }
    if (rec.sealedAtMs !== undefined)
      sim.at(
        rec.sealedAtMs,
        safely('the seal', (now) => scheduler.seal(now, runId)),
      );
  }
  for (const r of rec.reviews) {
    sim.at(r.atMs, (now) => {
      if (awaiting.has(r.callId)) return decide(r)(now);
      reviewDue.set(r.callId, r); // decided as soon as the call awaits review
      return EMPTY;
    });
  }
  for (const p of rec.replans) {
    sim.at(p.atMs, (now) => {
      due.add(p);
      return replanIfDue(now);
    });
  }
  if (rec.cancelledAtMs !== undefined)
    sim.at(
      rec.cancelledAtMs,
      safely('the cancel', (now) => scheduler.cancel(now, runId)),
    );
  sim.run();

  for (const r of reviewDue.values())
    notes.push(
      `the ${r.decision} review of ${r.callId} (recorded at ${r.atMs} ms) was never applied: the call did not await review then or later`,
    );
  if (replans.length > 0) {
    notes.push(
      `${replans.length} replan(s) (the first recorded at ${(replans[0] as { atMs: number }).atMs} ms) could not be applied: the run ended ${scheduler.runStatus(runId) ?? 'without starting'}, not needs_replan`,
    );
  }
  const events = sim.events;
  if (events.length === 0) {
    const replayed: Recording = { ...rec, attempts: [], reviews: [], replans: [], result: { status: 'queued', calls: [] } };
    return { replayed, events, notes, makespanMs: 0 };
  }
  const replayed = recordingOf(events, config);
  return { replayed, events, notes, makespanMs: replayed.result.endMs ?? sim.now };
}
