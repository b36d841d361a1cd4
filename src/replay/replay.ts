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
 *   replans are applied at their recorded time once the run is `needs_replan`; a cancel at its time
 *   (by a newer run of its concurrency key when the recording says `supersededBy`);
 * - a pause from outside the run (`pauses`: another run's 429, another replica's, a cluster refusal)
 *   pauses its tool at its recorded time, under any config; the run's own 429 pauses it from its attempt;
 * - the run keeps its id (retry jitter derives from it) and its recorded `estimates` (ranking).
 *
 * The replay's events fold into a `Recording` through `recordingOf`, so compare.ts compares two
 * documents of one shape.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Ajv } from 'ajv';
import type { CoreEvent } from '../core/events.js';
import { callError, type CallError } from '../core/errors.js';
import {
  Scheduler,
  type AttemptEnded,
  type AttemptResult,
  type Output,
  type SchedulerOptions,
  type StartAttempt,
} from '../core/scheduler.js';
import { Simulation, type Simulated, type SimulatedAttempt } from '../core/simulation.js';
import type { Defaults } from '../core/tool.js';
import { createAjv, createCatalog } from '../config/catalog.js';
import { RecordingSchema, type RecordedAttempt, type RecordedHook, type Recording } from '../contract/recording.js';
import type { HookAnswer, HookDecision } from '../core/hooks.js';
import { configSection, recordingOf, type RecordingConfig } from './recording.js';
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

/**
 * The recorded decisions of one call's hooks of one event, as the scheduler takes them, asked at `now`:
 * applied as long after the ask as they were (`askedMs` → `appliedMs`, the run's clock). An older
 * recording has neither: its decisions come no earlier than the first hook's call, after the hooks'
 * durations.
 */
function recordedDecisions(list: readonly RecordedHook[], now: number): { at: number; decisions: HookDecision[] } {
  const head = list[0] as RecordedHook;
  const first = head.atMs;
  const timed = head.appliedMs !== undefined;
  const start = timed && head.askedMs !== undefined ? now + Math.max(0, first - head.askedMs) : Math.max(now, first);
  let at = timed
    ? head.askedMs !== undefined
      ? now + Math.max(0, (head.appliedMs as number) - head.askedMs)
      : Math.max(now, head.appliedMs as number)
    : start;
  const decisions = list.map((h): HookDecision => {
    const startedAt = start + (h.atMs - first);
    if (!timed) at = Math.max(at, startedAt + h.durationMs);
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
 * The scheduler as replay drives it. Its timers fire as late as the recording shows (a retry became
 * ready after its backoff by the lag of the live engine's timer; the engine has one timer: when it
 * fires, everything due by then is handled at that moment, as here). And a run taken back from its
 * events (`resumes`: another replica took it over, or a restart) is taken back here too: from the last
 * thing the old owner recorded until the resume nothing reaches the old scheduler (it had stopped),
 * then a new scheduler restores the run from the replay's own events, as the new owner did.
 */
class ReplayScheduler implements Simulated {
  private inner: Scheduler;
  /** Due time of a timer → when it fired in the recording. */
  private readonly fired = new Map<number, number>();
  /** The resumes still to come, in order: the scheduler is stopped after the first one's `lastMs`. */
  private readonly resumes: { atMs: number; lastMs: number }[];
  private now = 0;

  constructor(
    private readonly opts: SchedulerOptions,
    resumes: readonly { atMs: number; lastMs: number }[],
  ) {
    this.inner = new Scheduler(opts);
    this.resumes = [...resumes].sort((a, b) => a.atMs - b.atMs);
  }

  /** A timer due at `at` fired `lagMs` late in the recording. */
  lag(at: number, lagMs: number): void {
    if (lagMs > 0) this.fired.set(at, Math.max(at + lagMs, this.fired.get(at) ?? 0));
  }

  /** Whether the owner had stopped at `now` (between its last record and the resume). */
  private stopped(now: number): boolean {
    this.now = Math.max(this.now, now);
    const next = this.resumes[0];
    return next !== undefined && this.now > next.lastMs;
  }

  /** The run taken back at `now` from `events` (its own so far) by a new scheduler. */
  resume(now: number, events: readonly CoreEvent[]): Output {
    this.resumes.shift();
    this.inner = new Scheduler(this.opts);
    this.now = now;
    return this.inner.restore(now, events);
  }

  nextWakeAt(): number | undefined {
    if (this.stopped(this.now)) return undefined;
    const at = this.inner.nextWakeAt();
    return at === undefined ? undefined : (this.fired.get(at) ?? at);
  }

  tick(now: number): Output {
    if (this.stopped(now)) return EMPTY;
    for (const at of this.fired.keys()) if (at <= now) this.fired.delete(at);
    return this.inner.tick(now);
  }

  attemptEnded(now: number, e: AttemptEnded): Output {
    return this.stopped(now) ? EMPTY : this.inner.attemptEnded(now, e);
  }

  hookDecided(now: number, a: HookAnswer): Output {
    return this.stopped(now) ? EMPTY : this.inner.hookDecided(now, a);
  }

  permitGranted(now: number, runId: string, callId: string): Output | undefined {
    return this.stopped(now) ? undefined : this.inner.permitGranted(now, runId, callId);
  }

  wake(now: number): Output {
    return this.stopped(now) ? EMPTY : this.inner.wake(now);
  }

  /** The recorded inputs (a batch, reviews, replans, a cancel…) go to the scheduler of the moment. */
  get current(): Scheduler {
    return this.inner;
  }
}

function keyOf(kind: 'call' | 'compensation', callId: string, attempt: number): string {
  return `${kind}/${callId}/${attempt}`;
}

/** What replay takes from the recorded outside waits (`RecordedWait`), by attempt key. */
interface OutsideWaits {
  /** Whether the run was gated (some start waited for a cluster permit): replay is gated too. */
  gated: boolean;
  /** Permit waits (ms from ask to grant): kept under any config, as the cluster's latency. */
  permits: Map<string, number>;
  /**
   * Under the recording's own config: when each held start may go at the earliest (`turn`); never
   * (infinite) for the attempt a queue timeout stopped.
   */
  holds: Map<string, number>;
}

function outsideWaits(rec: Recording, own: boolean): OutsideWaits {
  const out: OutsideWaits = { gated: false, permits: new Map(), holds: new Map() };
  for (const a of rec.attempts) {
    if (!a.waits || a.compensation) continue;
    const key = keyOf('call', a.callId, a.attempt);
    for (const w of a.waits) {
      if (w.kind === 'permit') {
        out.gated = true;
        out.permits.set(key, Math.max(0, w.toMs - w.fromMs));
      } else if (w.kind === 'turn' && own) out.holds.set(key, Math.max(out.holds.get(key) ?? 0, w.toMs));
      // A kind this version does not know changes nothing.
    }
  }
  if (!own) return out;
  // A call that timed out in the queue (DESIGN §4) may have waited for other runs (their limits, locks,
  // keys), which replay does not run: under its own config its next attempt never starts, and its queue
  // timeout ends it at its recorded time as it did (a wait of its own run ends it the same way).
  const tried = new Map<string, number>();
  for (const a of rec.attempts) if (!a.compensation) tried.set(a.callId, Math.max(tried.get(a.callId) ?? 0, a.attempt));
  for (const c of rec.result.calls)
    if (c.error?.code === 'queue_timeout') out.holds.set(keyOf('call', c.id, (tried.get(c.id) ?? 0) + 1), Number.POSITIVE_INFINITY);
  return out;
}

/**
 * Whether `config` decides the recorded run as the recording's own config did (the same manifests of
 * its tools but for where they run, policy, limits, defaults and hooks): replaying under it is not a
 * what-if (a CI job that replays a corpus under the config it was recorded with).
 */
export function sameConfig(rec: Recording, config: RecordingConfig): boolean {
  const section = RecordingSchema.shape.config;
  const calls = [...rec.calls, ...rec.replans.flatMap((p) => p.calls)];
  const plain = (c: Recording['config']) => ({ ...c, tools: c.tools.map(({ executor: _, ...t }) => t) });
  try {
    return isDeepStrictEqual(plain(section.parse(rec.config)), plain(section.parse(configSection(config, calls))));
  } catch {
    return false;
  }
}

/** Replays a recording on a virtual clock. Never throws for anything a recording can contain. */
export function replayRecording(rec: Recording, opts: ReplayOptions = {}): ReplayRun {
  const config = opts.config ?? configOfRecording(rec, opts.ajv);
  // Under its own config a replay reproduces every outside wait; under another (what-if), the run's
  // own limits are recomputed and only the cluster's latency is kept.
  const own = opts.config === undefined || sameConfig(rec, opts.config);
  const outside = outsideWaits(rec, own);
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
  const front = new ReplayScheduler(
    {
      catalog: config.catalog,
      policy: config.policy,
      limits: config.limits,
      defaults: config.defaults,
      ...(config.hooks ? { hooks: config.hooks } : {}),
      ...(outside.gated ? { gated: true, localRates: true } : {}),
      ...(outside.holds.size > 0
        ? { holds: (_run: string, callId: string, n: number) => outside.holds.get(keyOf('call', callId, n)) }
        : {}),
    },
    rec.resumes ?? [],
  );
  // Starts seen per call: a permit asked for now is for the next attempt.
  const startsSeen = new Map<string, number>();
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
    if (a.lost) {
      // Lost with its owner: it runs until the run is taken back (then its end is nobody's business).
      sim = { durationMs: took + slack, result: notRecorded(s, `it was lost when the run was taken back at ${a.endMs} ms`) };
    } else if (!a.ok && (a.error?.code === 'cancelled' || a.error?.code === 'superseded')) {
      // Aborted by a cancel (a newer run of its concurrency key's, too): no natural outcome.
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
      return front.current.decideReview(now, {
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
    if (!next || !due.has(next) || front.current.runStatus(runId) !== 'needs_replan') return EMPTY;
    replans.shift();
    return front.current.replan(now, runId, next.calls);
  });

  const sim = new Simulation(front, {
    attempt,
    permit(req, now) {
      const n = (startsSeen.get(req.callId) ?? 0) + 1;
      return now + (outside.permits.get(keyOf('call', req.callId, n)) ?? 0);
    },
    hook(req, now) {
      const list = hooks.get(`${req.on}/${req.callId}`);
      if (list) return recordedDecisions(list, now);
      notes.push(`the ${req.on} hooks of ${req.callId} (at ${now} ms) are not in the recording: it went on as if they allowed it`);
      return { at: now, decisions: [] };
    },
    onEvent(e, s) {
      if (e.type === 'call.started' && e.callId !== undefined) startsSeen.set(e.callId, e.data.attempt);
      if (e.type === 'call.retry_scheduled' && e.callId !== undefined) {
        const failed = byKey.get(keyOf('call', e.callId, e.data.attempt - 1));
        const next = byKey.get(keyOf('call', e.callId, e.data.attempt));
        if (failed?.retryAtMs !== undefined && next?.readyMs !== undefined) front.lag(e.data.at, next.readyMs - failed.retryAtMs);
      }
      if (e.type === 'call.awaiting_review' && e.callId !== undefined) {
        awaiting.add(e.callId);
        const due = reviewDue.get(e.callId);
        if (due) s.at(s.now, decide(due));
      } else if (e.callId !== undefined && e.type !== 'call.ready') awaiting.delete(e.callId);
      if (e.type === 'run.completed' && e.data.status === 'needs_replan') s.at(s.now, replanIfDue);
    },
  });
  // Pauses from outside the run (DESIGN §4, §8), kept under any config like a permit's wait: each at its
  // recorded time, before anything else of that instant (one told as the run arrived came before it),
  // but after a resume of that instant (the new owner learned it then).
  const resumedAt = new Set((rec.resumes ?? []).map((r) => r.atMs));
  const pause = (p: NonNullable<Recording['pauses']>[number]) =>
    safely(`the pause of ${p.tool}`, (now) =>
      front.current.paused(now, {
        tool: p.tool,
        ...(p.key !== undefined ? { key: p.key } : {}),
        until: p.untilMs,
        ...(p.status !== undefined ? { status: p.status } : {}),
      }),
    );
  for (const p of rec.pauses ?? []) if (!resumedAt.has(p.atMs)) sim.at(p.atMs, pause(p));
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
      front.current.submit(now, {
        runId,
        tenant: rec.run.tenant,
        calls: streamed ? [] : rec.calls.map(callInput),
        failure: rec.run.failure,
        tags: rec.run.tags,
        estimates: rec.estimates ?? {},
        ...(streamed ? { open: true } : {}),
        // Held behind an earlier run of its concurrency key (DESIGN §4), until its recorded release.
        ...(rec.releasedAtMs !== undefined && !streamed ? { held: true } : {}),
      }),
    ),
  );
  // A start held back until its recorded turn may go then: the scheduler is woken (no timer of its own).
  for (const at of new Set(outside.holds.values())) if (Number.isFinite(at)) sim.at(at, (now) => front.wake(now));
  // Taken back at its recorded time, before any other input of that instant (the new owner's).
  for (const r of rec.resumes ?? [])
    sim.at(
      r.atMs,
      safely('the resume', (now) => front.resume(now, sim.events)),
    );
  for (const p of rec.pauses ?? []) if (resumedAt.has(p.atMs)) sim.at(p.atMs, pause(p));
  if (rec.releasedAtMs !== undefined && !streamed)
    sim.at(
      rec.releasedAtMs,
      safely('the release', (now) => front.current.release(now, runId)),
    );
  if (streamed) {
    const arrivals = new Map<number, Recording['calls']>();
    for (const c of rec.calls) arrivals.set(c.atMs ?? 0, [...(arrivals.get(c.atMs ?? 0) ?? []), c]);
    for (const [atMs, calls] of [...arrivals].sort(([a], [b]) => a - b)) {
      sim.at(
        atMs,
        safely('appended calls', (now) => front.current.append(now, runId, calls.map(callInput))),
      );
    }
    // Sealed by its open-run timeout, when the engine's timer fired (late, on a loaded machine).
    const timeout = config.defaults.openRunTimeoutMs;
    if (own && rec.sealedAtMs !== undefined && rec.sealedAtMs > timeout) front.lag(timeout, rec.sealedAtMs - timeout);
    if (rec.sealedAtMs !== undefined)
      sim.at(
        rec.sealedAtMs,
        safely('the seal', (now) => front.current.seal(now, runId)),
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
      safely('the cancel', (now) => front.current.cancel(now, runId, rec.supersededBy)),
    );
  sim.run();

  for (const r of reviewDue.values())
    notes.push(
      `the ${r.decision} review of ${r.callId} (recorded at ${r.atMs} ms) was never applied: the call did not await review then or later`,
    );
  if (replans.length > 0) {
    notes.push(
      `${replans.length} replan(s) (the first recorded at ${(replans[0] as { atMs: number }).atMs} ms) could not be applied: the run ended ${front.current.runStatus(runId) ?? 'without starting'}, not needs_replan`,
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
