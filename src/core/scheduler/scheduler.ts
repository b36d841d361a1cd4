/**
 * The ready-set scheduler (DESIGN §4, §6): pure, deterministic, and shared by the live engine, the CLI
 * and replay. `Scheduler` is the front: it holds the state and takes the inputs; each concern lives in
 * a module of its own, and they import one another in this order only (no cycles):
 *
 *   api.ts           what the scheduler takes and gives; `SchedulerError`
 *   records.ts       the state: runs and calls as kept, `SchedulerState`, emit, lookups
 *   ../state.ts      the call and run state machines: every status change goes through them
 *   hook-requests.ts asking the shell to run a call's hooks (DESIGN §14)
 *   dispatch.ts      ready sets, and starting ready calls under every limit (`perRun` included)
 *   progress.ts      how a call moves on: armed, ready, succeeded/failed/blocked/cancelled, retries,
 *                    the failure modes, releasing conflict successors
 *   hooking.ts       what the hooks' decisions do to the call
 *   compensation.ts  undoing succeeded calls after a fail-fast, newest first
 *   ending.ts        when and how a run ends (its final status, deadlocks)
 *   planning.ts      building a run from its plan, and a replan's calls
 *   streamed.ts      streamed runs: calls appended step by step, the seal
 *   restore.ts       a run taken back from its events after a restart, through the same transitions
 *
 * Inputs are method calls that carry the time (`now`): a run submitted, an attempt ended, a timer due,
 * a review decided, a cancel, a replan. Outputs are what the shell must do: events to persist and
 * stream, attempts to start, attempts to abort, and `nextWakeAt()` for the next timer. There is no
 * clock, no timer and no I/O in here, so the same inputs always give the same outputs.
 *
 * A call is *armed* when its data and policy predecessors have succeeded (its args are then resolved
 * and checked, and a review is asked for if policy wants one); it is *ready* when it is armed, reviewed,
 * and its conflict predecessors are *released* (progress.ts). Among ready calls the order is: tenants
 * round robin, then runs by arrival, then longest remaining path (from the learned mean duration of
 * each tool), then original index. A ready call starts only when every limit has room (dispatch.ts).
 */
import type { CallInput, RunStatus } from '../calls.js';
import { callError } from '../errors.js';
import type { CoreEvent } from '../events.js';
import type { LimitUsage, Pause } from '../limits.js';
import { isRunEnded, transition, transitionRun } from '../state.js';
import { StreamPlanner } from '../stream-plan.js';
import {
  SchedulerError,
  assertUniqueIds,
  type AttemptEnded,
  type Output,
  type ReviewDecision,
  type SchedulerOptions,
  type SubmitOptions,
} from './api.js';
import { compensationEnded } from './compensation.js';
import { dispatch, maybeReady, permitRefused, permitted } from './dispatch.js';
import { finishRuns } from './ending.js';
import { addCalls } from './planning.js';
import { cancelCall, fail, mayRetry, pauseFor, queueTimedOut, scheduleRetry, setResolved, stopRun } from './progress.js';
import { attemptSettled, hookDecided } from './hooking.js';
import type { HookAnswer } from '../hooks.js';
import {
  createState,
  emit,
  emptyOutput,
  findCall,
  forgetRun,
  getRun,
  markDirty,
  newRun,
  normalized,
  type ScheduledCall,
  type ScheduledRun,
  type SchedulerState,
} from './records.js';
import { pausesFor, pauseTool } from './pauses.js';
import { restoreRun } from './restore.js';
import { checkArgsSize } from '../references.js';
import { DEFAULT_MAX_ARGS_BYTES, outputChecked } from '../size.js';
import { appendTo, sealRun } from './streamed.js';
import { limitsInUse, waitCounts, type LimitInUse, type WaitCounts } from './limits-in-use.js';
import type { WaitReason } from '../waiting.js';
import { noteWaits } from './waits.js';
import { attemptOutcome } from '../outcome.js';

export class Scheduler {
  private readonly state: SchedulerState;

  constructor(opts: SchedulerOptions) {
    this.state = createState(opts);
  }

  // ---- inputs -------------------------------------------------------------------------------

  submit(now: number, o: SubmitOptions): Output {
    const s = this.state;
    s.now = now;
    if (s.runs.has(o.runId)) throw new SchedulerError('conflict', `run ${o.runId} exists already`);
    const failure = o.failure ?? s.opts.defaults.failure;
    const estimates = o.estimates ?? this.estimates();
    const run = newRun(s, o.runId, o.tenant, failure, estimates);
    if (o.meta?.concurrencyKey !== undefined) run.concurrencyKey = o.meta.concurrencyKey;
    if (o.priority !== undefined) run.priority = o.priority;
    const priority = o.priority !== undefined ? { priority: o.priority } : {};
    const calls = o.calls.map(normalized);
    if (o.open) {
      run.stream = new StreamPlanner(run.tenant, s.opts.catalog, s.opts.policy);
      emit(s, 'run.created', run, undefined, {
        ...o.meta,
        tenant: run.tenant,
        failure,
        tags: o.tags ?? {},
        calls: [],
        estimates,
        open: true,
        ...priority,
      });
      emit(s, 'run.started', run, undefined, { edges: [], generations: [], diagnostics: [] });
      s.timers.push({ at: now + s.opts.defaults.openRunTimeoutMs, seq: s.timerSeq++, runId: run.id, seal: true });
      if (calls.length > 0) appendTo(s, run, calls);
      pausesFor(s, run);
      return this.flush();
    }
    emit(s, 'run.created', run, undefined, {
      ...o.meta,
      tenant: run.tenant,
      failure,
      tags: o.tags ?? {},
      calls,
      estimates,
      ...(o.held ? { held: true as const } : {}),
      ...priority,
    });
    if (o.held) {
      // Queued behind an earlier run of its concurrency key (DESIGN §4) until `release`.
      run.status = 'queued';
      run.heldCalls = calls;
      pausesFor(s, run);
      return this.flush();
    }
    try {
      addCalls(s, run, calls, 'run.started');
    } catch (e) {
      // A bug must not leave a half-built run behind, counted as active forever.
      forgetRun(s, run);
      s.out = emptyOutput();
      throw e;
    }
    // Pauses that began before it did: the run's recording keeps them (pauses.ts).
    pausesFor(s, run);
    return this.flush();
  }

  /**
   * Starts a held run (submitted with `held`): the earlier runs of its concurrency key have ended
   * (DESIGN §4). A run that is not held is left as it is.
   */
  release(now: number, runId: string): Output {
    const s = this.state;
    s.now = now;
    const run = getRun(s, runId);
    if (run.heldCalls !== undefined) startHeld(s, run);
    return this.flush();
  }

  /** The runs held behind an earlier run of their concurrency key, oldest first. */
  heldRuns(): { runId: string; tenant: string; concurrencyKey: string }[] {
    const out: { runId: string; tenant: string; concurrencyKey: string }[] = [];
    for (const run of this.state.runs.values())
      if (run.heldCalls !== undefined) out.push({ runId: run.id, tenant: run.tenant, concurrencyKey: run.concurrencyKey ?? '' });
    return out;
  }

  /** Appends calls, in model order, to an open (streamed) run. */
  append(now: number, runId: string, calls: readonly CallInput[]): Output {
    const s = this.state;
    s.now = now;
    const run = getRun(s, runId);
    if (!run.stream) throw new SchedulerError('conflict', `run ${runId} was not opened for streaming`);
    if (run.stream.sealed) throw new SchedulerError('conflict', `run ${runId} is sealed; it takes no more calls`);
    if (isRunEnded(run.status)) throw new SchedulerError('conflict', `run ${runId} is ${run.status}; it takes no more calls`);
    assertUniqueIds(calls, run.byId, runId);
    appendTo(s, run, calls.map(normalized));
    return this.flush();
  }

  /** Closes a streamed run: calls still waiting on later ones are planned as a batch would plan them. */
  seal(now: number, runId: string): Output {
    const s = this.state;
    s.now = now;
    const run = getRun(s, runId);
    if (!run.stream) throw new SchedulerError('conflict', `run ${runId} was not opened for streaming`);
    if (!run.stream.sealed && !isRunEnded(run.status)) sealRun(s, run, false);
    return this.flush();
  }

  /** Takes a run back from its persisted events after a restart (restore.ts). */
  restore(now: number, events: readonly CoreEvent[]): Output {
    const s = this.state;
    s.now = now;
    const id = events[0]?.runId;
    const known = id !== undefined && s.runs.has(id);
    try {
      restoreRun(s, events);
    } catch (e) {
      // A log it cannot take back (DESIGN §4, `unrecoverable`) leaves nothing half-built behind.
      const run = known || id === undefined ? undefined : s.runs.get(id);
      if (run) forgetRun(s, run);
      s.out = emptyOutput();
      throw e;
    }
    return this.flush();
  }

  attemptEnded(now: number, e: AttemptEnded): Output {
    const s = this.state;
    s.now = now;
    const run = s.runs.get(e.runId);
    if (!run) return this.flush();
    const hint = e.index === undefined ? undefined : run.calls[e.index];
    const idx = hint !== undefined && hint.id === e.callId ? hint.index : run.byId.get(e.callId);
    if (idx === undefined) return this.flush();
    const c = run.calls[idx] as ScheduledCall;
    if (e.kind === 'compensation') {
      if (run.compensating === idx) compensationEnded(s, run, c, e.result);
      return this.flush();
    }
    if (c.status !== 'running' || e.attempt !== c.attempts || c.hookPending !== undefined) return this.flush();
    s.limiter.release(c);
    const book = s.waits;
    if (book !== undefined) book.released[book.releasedCount++] = c;
    this.learn(c.tool, now - (c.attemptStartedAt as number));
    const checked = outputChecked(e.result, c, s.opts.limits.maxOutputBytes);
    const r = checked.ok ? checked : attemptOutcome(checked, c.manifest?.idempotent === true, c.id);
    if (!r.ok && r.pauseMs !== undefined) pauseFor(s, c, r);
    // `run.running` counts the call until it settles: its after_call hooks (hooking.ts) may hold it.
    if (r.ok) attemptSettled(s, run, c, r, true);
    else if (run.cancelRequested || run.failFastBy !== undefined) {
      if (r.error.code === 'cancelled') {
        run.running--;
        cancelCall(s, run, c, run.cancelReason ?? r.error);
      } else attemptSettled(s, run, c, r, false);
    } else if (mayRetry(c, r)) {
      run.running--;
      scheduleRetry(s, run, c, r);
    } else {
      c.lastRetryable = r.retryable === true;
      attemptSettled(s, run, c, r, true);
    }
    markDirty(s, run);
    return this.flush();
  }

  /** The shell's answer to a `HookRequest` (DESIGN §14, hooking.ts). */
  hookDecided(now: number, a: HookAnswer): Output {
    this.state.now = now;
    hookDecided(this.state, a);
    return this.flush();
  }

  /**
   * Gated (DESIGN §12): the cluster granted a call's permit, and the call starts. `undefined` when the
   * call no longer waits for one (it was cancelled meanwhile): the shell gives the permit back.
   */
  permitGranted(now: number, runId: string, callId: string): Output | undefined {
    const s = this.state;
    s.now = now;
    const run = s.runs.get(runId);
    const idx = run?.byId.get(callId);
    const c = idx === undefined ? undefined : run?.calls[idx];
    if (!run || !c || !permitted(s, run, c)) return undefined;
    markDirty(s, run);
    return this.flush();
  }

  /**
   * Gated: the cluster refused a call's permit; it waits for `permitsFreed`. `waitingFor`: what
   * refused it, as the cluster saw it (the call's `waitingFor` then, with `explainWaits`).
   */
  permitRefused(now: number, runId: string, callId: string, waitingFor?: readonly WaitReason[]): Output {
    const s = this.state;
    s.now = now;
    const run = s.runs.get(runId);
    const idx = run?.byId.get(callId);
    const c = idx === undefined ? undefined : run?.calls[idx];
    if (run && c) permitRefused(s, run, c, waitingFor);
    return this.flush();
  }

  /**
   * Backpressure told from outside (DESIGN §4): another replica's call got a 429 (or a 503 with
   * Retry-After), so the tool, or one keyed group of it (`key`), starts nothing here until `until`.
   * Also the hook for replay: a pause recorded from another replica is an outside wait, like a permit.
   */
  paused(now: number, p: Pause): Output {
    const s = this.state;
    s.now = now;
    pauseTool(s, p);
    // Its calls that wait for it wait for something outside their run: their starts say so (outside.ts).
    if (p.until > now && (s.outsidePauses.get(p.tool) ?? 0) < p.until) s.outsidePauses.set(p.tool, p.until);
    return this.flush();
  }

  /** Gated: permits may have freed somewhere in the cluster: refused calls may ask again. */
  permitsFreed(now: number): Output {
    const s = this.state;
    s.now = now;
    s.permitEpoch++;
    return this.flush();
  }

  /** Handles every timer due at `now` (retry backoffs, rate refills, open-run timeouts). */
  tick(now: number): Output {
    const s = this.state;
    s.now = now;
    // Fired late (a loaded engine): what it lets start waited longer than the run alone explains (outside.ts).
    s.timerLate = (s.timers.peek()?.at ?? now) < now;
    for (let t = s.timers.peek(); t && t.at <= now; t = s.timers.peek()) {
      s.timers.pop();
      if (t.runId === undefined) {
        s.wakes.delete(t.at);
        continue;
      }
      const run = s.runs.get(t.runId);
      if (t.seal) {
        if (run?.stream && !run.stream.sealed && !isRunEnded(run.status)) sealRun(s, run, false, true);
        continue;
      }
      const c = run?.calls[t.index as number];
      if (t.queued !== undefined) {
        if (run && c && c.status === 'ready' && c.attempts === t.queued) queueTimedOut(s, run, c);
        continue;
      }
      if (!run || !c?.retrying) continue;
      c.retrying = false;
      maybeReady(s, run, c);
    }
    const out = this.flush();
    s.timerLate = false;
    return out;
  }

  /**
   * Starts what may start at `now`, and nothing else: replay wakes the scheduler when a start it held
   * back (`SchedulerOptions.holds`) may go, a time no timer of the live engine stood for.
   */
  wake(now: number): Output {
    this.state.now = now;
    return this.flush();
  }

  /**
   * The time of the next timer, if any. A seal timer of a run that was sealed or has ended would do
   * nothing when it fires (see `tick`): it is dropped here, so no real timer waits for it (an engine
   * with nothing else to do then holds none, and its process may exit).
   */
  nextWakeAt(): number | undefined {
    const s = this.state;
    for (let t = s.timers.peek(); (t?.seal || t?.queued !== undefined) && t.runId !== undefined; t = s.timers.peek()) {
      const run = s.runs.get(t.runId);
      if (t.seal && run?.stream && !run.stream.sealed && !isRunEnded(run.status)) break;
      // A queue timeout (DESIGN §4) of a call that started, or ended, since: it would do nothing.
      const c = t.queued !== undefined ? run?.calls[t.index as number] : undefined;
      if (c && c.status === 'ready' && c.attempts === t.queued) break;
      s.timers.pop();
    }
    return s.timers.peek()?.at;
  }

  decideReview(now: number, d: ReviewDecision): Output {
    const s = this.state;
    s.now = now;
    const { run, c } = findCall(s, d.runId, d.callId);
    if (c.status !== 'awaiting_review') throw new SchedulerError('conflict', `call ${c.id} is ${c.status}, not awaiting_review`);
    if (d.decision === 'edit') {
      if (!d.args) throw new SchedulerError('invalid_args', `an edit needs args`);
      const problem =
        s.opts.catalog.checkArgs(c.tool, d.args) ?? checkArgsSize(d.args, s.opts.limits.maxArgsBytes ?? DEFAULT_MAX_ARGS_BYTES)?.message;
      if (problem) throw new SchedulerError('invalid_args', `${c.id}: ${problem}`);
    }
    emit(s, 'review.decided', run, c, {
      decision: d.decision,
      ...(d.args ? { args: d.args } : {}),
      ...(d.comment !== undefined ? { comment: d.comment } : {}),
    });
    if (d.decision === 'reject') {
      const why = d.comment ? `rejected in review: ${d.comment}` : 'rejected in review';
      fail(s, run, c, callError('review_rejected', `${c.id}: ${why}`), true);
    } else {
      if (d.args && d.decision === 'edit') setResolved(run, c, d.args);
      c.reviewed = true;
      transition(c, 'pending');
      maybeReady(s, run, c);
    }
    markDirty(s, run);
    return this.flush();
  }

  /** Cancels a run; `supersededBy`: a newer run of its concurrency key replaced it (DESIGN §4). */
  cancel(now: number, runId: string, supersededBy?: string): Output {
    const s = this.state;
    s.now = now;
    const run = getRun(s, runId);
    // A run that failed fast has ended `failed` already (its compensations may still be running):
    // a late cancel must not turn that outcome into `cancelled`.
    if (run.status === 'needs_replan') {
      // Nobody will replan it: the calls waiting for a replan are cancelled, and so is the run.
      transitionRun(run, 'running');
      run.cancelRequested = true;
      run.cancelledAt = now;
      for (const c of run.calls) {
        if (c.status === 'blocked' && c.error?.code === 'awaiting_replan')
          cancelCall(s, run, c, callError('cancelled', 'the run was cancelled'));
      }
      markDirty(s, run);
      return this.flush();
    }
    if (isRunEnded(run.status) || run.cancelRequested || run.failFastBy !== undefined) return this.flush();
    // A held run starts, so that its calls end cancelled like any run's that had not started.
    if (run.heldCalls !== undefined) startHeld(s, run);
    run.cancelRequested = true;
    run.cancelledAt = now;
    if (supersededBy !== undefined)
      run.cancelReason = callError('superseded', `run ${supersededBy} replaced this run (the same concurrencyKey)`, {
        details: { runId: supersededBy },
      });
    stopRun(s, run, run.cancelReason ?? callError('cancelled', 'the run was cancelled'));
    markDirty(s, run);
    return this.flush();
  }

  /** Appends calls to a run that ended `needs_replan`; the calls waiting on its failures are superseded. */
  replan(now: number, runId: string, calls: readonly CallInput[]): Output {
    const s = this.state;
    s.now = now;
    const run = getRun(s, runId);
    if (run.status !== 'needs_replan') throw new SchedulerError('conflict', `run ${runId} is ${run.status}, not needs_replan`);
    for (const c of calls) if (run.byId.has(c.id)) throw new SchedulerError('conflict', `call id ${c.id} is used in run ${runId} already`);
    transitionRun(run, 'running');
    const list = calls.map((c) => ({ id: c.id, tool: c.tool, args: c.args ?? {} }));
    for (const f of run.replanFailures) run.handed.add(f.index);
    run.replanFailures = [];
    for (const c of run.calls) {
      if (c.status === 'blocked' && c.error?.code === 'awaiting_replan') {
        c.superseded = true;
        transition(c, 'cancelled');
        c.error = callError('superseded', `${c.id} was superseded by a replan`);
        emit(s, 'call.cancelled', run, c, { reason: c.error });
      }
    }
    addCalls(s, run, list, 'run.replanned');
    return this.flush();
  }

  // ---- views for the shell -------------------------------------------------------------------

  runStatus(runId: string): RunStatus | undefined {
    return this.state.runs.get(runId)?.status;
  }

  /** Forgets an ended run (the shell keeps its events); a run that may still change is kept. */
  evict(runId: string): void {
    const run = this.state.runs.get(runId);
    if (!run || !isRunEnded(run.status) || run.status === 'needs_replan') return;
    forgetRun(this.state, run);
  }

  /** Whether the scheduler holds the run (ended or not, until it is evicted). */
  has(runId: string): boolean {
    return this.state.runs.has(runId);
  }

  /** The runs not ended (needs_replan included: it waits for a replan). */
  liveRuns(): string[] {
    const out: string[] = [];
    for (const r of this.state.runs.values()) if (!isRunEnded(r.status) || r.status === 'needs_replan') out.push(r.id);
    return out;
  }

  activeRuns(tenant?: string): number {
    let n = 0;
    for (const r of this.state.runs.values()) if (!isRunEnded(r.status) && (tenant === undefined || r.tenant === tenant)) n++;
    return n;
  }

  limitUsage(): LimitUsage[] {
    return this.state.limiter.usage();
  }

  /** Every limit and lock in use at `now`: holders, waiters, longest wait (needs `explainWaits`). */
  limitsInUse(now: number): LimitInUse[] {
    return limitsInUse(this.state, Math.max(this.state.now, now));
  }

  /** The ready calls that wait now, counted by what they wait for (needs `explainWaits`). */
  waitCounts(): WaitCounts {
    return waitCounts(this.state);
  }

  estimates(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [tool, st] of [...this.state.learned].sort(([a], [b]) => (a < b ? -1 : 1))) out[tool] = Math.round(st.mean * 1000) / 1000;
    return out;
  }

  // ---- plumbing ------------------------------------------------------------------------------

  private flush(): Output {
    const s = this.state;
    dispatch(s);
    finishRuns(s);
    // Ending a run can start compensations but never frees a limit, so one more pass is enough.
    if (s.waits) noteWaits(s);
    const out = s.out;
    s.out = emptyOutput();
    return out;
  }

  private learn(tool: string, ms: number): void {
    let st = this.state.learned.get(tool);
    if (!st) this.state.learned.set(tool, (st = { n: 0, mean: 0 }));
    st.n++;
    st.mean += (ms - st.mean) / st.n;
  }
}

/** Plans and starts a held run's calls (`run.started` with `released`). */
function startHeld(s: SchedulerState, run: ScheduledRun): void {
  const calls = run.heldCalls as CallInput[];
  delete run.heldCalls;
  transitionRun(run, 'running');
  addCalls(s, run, calls, 'run.started', true);
  markDirty(s, run);
}
