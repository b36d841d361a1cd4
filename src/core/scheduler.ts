/**
 * The ready-set scheduler (DESIGN §4, §6): pure, deterministic, and shared by the live engine, the CLI
 * and replay.
 *
 * Inputs are method calls that carry the time (`now`): a run submitted, an attempt ended, a timer due,
 * a review decided, a cancel, a replan. Outputs are what the shell must do: events to persist and
 * stream, attempts to start, attempts to abort, and `nextWakeAt()` for the next timer. There is no
 * clock, no timer and no I/O in here, so the same inputs always give the same outputs.
 *
 * A call is *armed* when its data and policy predecessors have succeeded (its args are then resolved
 * and checked, and a review is asked for if policy wants one); it is *ready* when it is armed, reviewed,
 * and its conflict predecessors are *released*. A call is released when it has ended and its own
 * predecessors (of every kind) are released: a call that ends without running (blocked, cancelled) keeps its
 * successors waiting until what it was waiting for has ended too, which keeps the reduced hazard edges
 * of the plan sound.
 *
 * Among ready calls the order is: tenants round robin, then runs by arrival, then longest remaining
 * path (from the learned mean duration of each tool), then original index. A ready call starts only
 * when every limit has room (see limits.ts); all are taken at once.
 */
import type { CallInput, CallStatus, Diagnostic, Edge, RunStatus } from './calls.js';
import { HazardIndex, describeHazard } from './hazards.js';
import { callError, type CallError } from './errors.js';
import type { CoreEvent, EventType } from './events.js';
import { RunProjection } from './view.js';
import { StreamPlanner, type StreamStep } from './stream-plan.js';
import { KeyedHeap, MinHeap } from './heap.js';
import { Limiter, own, type Holder } from './limits.js';
import { buildPlan, type Plan, type PlannedCall } from './plan.js';
import { checkArgsSize, resolveValue } from './references.js';
import { DEFAULT_MAX_ARGS_BYTES, outputChecked } from './size.js';
import { accessOf, type Access, type Key } from './resources.js';
import { backoffDelay } from './retry.js';
import { isTerminal, transition } from './state.js';
import type { Catalog, Defaults, FailureMode, Limits, Policy, ToolManifest } from './tool.js';

export interface SchedulerOptions {
  catalog: Catalog;
  policy: Policy;
  limits: Limits;
  defaults: Defaults;
}

export interface SubmitOptions {
  runId: string;
  tenant: string;
  calls: readonly CallInput[];
  failure?: FailureMode;
  tags?: Record<string, string>;
  /** Mean duration per tool to rank calls by; defaults to what this scheduler has learned. */
  estimates?: Record<string, number>;
  /** Extra fields for the `run.created` event (an idempotency key, say). */
  meta?: Record<string, unknown>;
  /** A streamed run (DESIGN §10): more calls come with `append`, until `seal` or the open-run timeout. */
  open?: boolean;
}

export interface StartAttempt {
  kind: 'call' | 'compensation';
  runId: string;
  callId: string;
  /** The call's place in its run: hand it back in `AttemptEnded.index` to spare a lookup by id. */
  index: number;
  attempt: number;
  tool: ToolManifest;
  args: Record<string, unknown>;
  timeoutMs: number;
}

export interface AbortAttempt {
  runId: string;
  callId: string;
  attempt: number;
  reason: CallError;
}

export interface Output {
  events: CoreEvent[];
  starts: StartAttempt[];
  aborts: AbortAttempt[];
}

export type AttemptResult = { ok: true; output: unknown } | { ok: false; error: CallError; retryable?: boolean; retryAfterMs?: number };

export interface AttemptEnded {
  runId: string;
  callId: string;
  /** `StartAttempt.index`, if known: a hint, checked against `callId` (a wrong one costs the lookup). */
  index?: number;
  attempt: number;
  kind?: 'call' | 'compensation';
  result: AttemptResult;
}

export interface ReviewDecision {
  runId: string;
  callId: string;
  decision: 'approve' | 'reject' | 'edit';
  args?: Record<string, unknown>;
  comment?: string;
}

/** Misuse of the scheduler's API (unknown run, wrong state): the shell maps it to a 4xx. */
/** Throws `conflict` for an id used twice in `calls`, or already in the run (`taken`). */
function assertUniqueIds(calls: readonly CallInput[], taken: ReadonlyMap<string, unknown> | undefined, runId: string): void {
  const seen = new Set<string>();
  for (const c of calls) {
    if (taken?.has(c.id) || seen.has(c.id)) throw new SchedulerError('conflict', `call id ${c.id} is used in run ${runId} already`);
    seen.add(c.id);
  }
}

export class SchedulerError extends Error {
  constructor(
    readonly code: 'run_not_found' | 'call_not_found' | 'conflict' | 'invalid_args',
    message: string,
  ) {
    super(message);
  }
}

/**
 * A call as the run keeps it. It is its own limit holder (the fields of `Holder`, set when its args
 * are resolved): one object per call instead of two.
 */
interface CallRt extends Holder {
  index: number;
  id: string;
  tool: string;
  manifest?: ToolManifest;
  args: Record<string, unknown>;
  resolved?: Record<string, unknown>;
  status: CallStatus;
  attempts: number;
  output?: unknown;
  error?: CallError;
  review?: string;
  reviewed: boolean;
  /** The plan's `refCalls`: the call each reference in `args` names, in document order. */
  refCalls: number[];
  hasRefs: boolean;
  /** The plan's `templated`: whether `args` hold a `${` at all. */
  templated: boolean;
  dataSucc: number[];
  conflictSucc: number[];
  dataWaiting: number;
  conflictWaiting: number;
  /** Data and policy predecessors not released yet (see `release`). */
  dataUnreleased: number;
  armed: boolean;
  released: boolean;
  retrying: boolean;
  priority: number;
  /** Whether the holder fields are set (the args are resolved). */
  holds: boolean;
  endedAt?: number;
  attemptStartedAt?: number;
  superseded: boolean;
  /** The resources the plan found for the call's own args (reused when it runs with exactly those). */
  planAccess?: Access;
  /** Whether the last failed attempt was retryable (recorded, so replay decides the same way). */
  lastRetryable?: boolean;
  /** In a streamed run: arrived, but a later call may still give it a predecessor. */
  held?: boolean;
}

interface RunRt {
  id: string;
  /** In the scheduler's list of runs that may have ended. */
  dirty: boolean;
  tenant: string;
  /** The lock domain of the run's tenant-scoped calls: `tenant:<tenant>`. */
  tenantDomain: string;
  failure: FailureMode;
  arrival: number;
  calls: CallRt[];
  byId: Map<string, number>;
  inputs: CallInput[];
  ready: Map<string, KeyedHeap<CallRt>>;
  /** `ready`'s entries, in its order: `pick` walks these on every dispatch, and a walk of the map
   *  itself made an entry array per tool each time. */
  readySets: [tool: string, heap: KeyedHeap<CallRt>][];
  readyCount: number;
  running: number;
  /** Set for a streamed run: plans calls as they arrive. */
  stream?: StreamPlanner;
  status: RunStatus;
  cancelRequested: boolean;
  failFastBy?: string;
  compensations?: number[];
  compensating?: number;
  compensationStartedAt?: number;
  cancelledAt?: number;
  replanFailures: CallRt[];
  handed: Set<number>;
  deadlocked: boolean;
  diagnostics: Diagnostic[];
  /** Where the diagnostics of the latest batch of calls start. */
  diagnosticsBase: number;
  /** Found when the run ends (a deadlock at run time): reported with `run.completed`. */
  endDiagnostics: Diagnostic[];
  estimates: Record<string, number>;
}

interface Timer {
  at: number;
  seq: number;
  runId?: string;
  index?: number;
  /** The open-run timeout of a streamed run. */
  seal?: boolean;
}

const byPriority = (a: CallRt, b: CallRt) => b.priority - a.priority || a.index - b.index;

/** A tool's ready calls of a run, in `byPriority` order. */
const readySet = () =>
  new KeyedHeap<CallRt>(
    (c) => -c.priority,
    (c) => c.index,
  );

export class Scheduler {
  private readonly runs = new Map<string, RunRt>();
  private readonly tenants: string[] = [];
  private readonly tenantRuns = new Map<string, RunRt[]>();
  private rr = 0;
  private arrivals = 0;
  private readonly limiter: Limiter;
  private readonly timers = new MinHeap<Timer>((a, b) => a.at - b.at || a.seq - b.seq);
  private timerSeq = 0;
  private readonly wakes = new Set<number>();
  private readonly learned = new Map<string, { n: number; mean: number }>();
  private out: Output = { events: [], starts: [], aborts: [] };
  private now = 0;
  /**
   * Runs that may have ended, in the order they were marked (each once: `RunRt.dirty`). A list and a
   * flag, not a Set: a Set emptied and refilled on every step shrank and grew its table each time.
   */
  private readonly dirty: (RunRt | undefined)[] = [];
  /** How many of `dirty` are in use (the list is not truncated: that would drop its storage). */
  private dirtyCount = 0;

  constructor(private readonly opts: SchedulerOptions) {
    this.limiter = new Limiter(opts.limits);
  }

  // ---- inputs -------------------------------------------------------------------------------

  submit(now: number, s: SubmitOptions): Output {
    this.now = now;
    if (this.runs.has(s.runId)) throw new SchedulerError('conflict', `run ${s.runId} exists already`);
    const failure = s.failure ?? this.opts.defaults.failure;
    const estimates = s.estimates ?? this.estimates();
    const run = this.newRun(s.runId, s.tenant, failure, estimates);
    const calls = s.calls.map(normalized);
    if (s.open) {
      run.stream = new StreamPlanner(run.tenant, this.opts.catalog, this.opts.policy);
      this.emit('run.created', run, undefined, { ...s.meta, tenant: run.tenant, failure, tags: s.tags ?? {}, calls: [], estimates, open: true });
      this.emit('run.started', run, undefined, { edges: [], generations: [], diagnostics: [] });
      this.timers.push({ at: now + this.opts.defaults.openRunTimeoutMs, seq: this.timerSeq++, runId: run.id, seal: true });
      if (calls.length > 0) this.appendTo(run, calls);
      return this.flush();
    }
    this.emit('run.created', run, undefined, { ...s.meta, tenant: run.tenant, failure, tags: s.tags ?? {}, calls, estimates });
    try {
      this.addCalls(run, calls, 'run.started');
    } catch (e) {
      // A bug must not leave a half-built run behind, counted as active forever.
      this.forget(run);
      this.out = { events: [], starts: [], aborts: [] };
      throw e;
    }
    return this.flush();
  }

  private forget(run: RunRt): void {
    this.runs.delete(run.id);
    const list = this.tenantRuns.get(run.tenant) as RunRt[];
    list.splice(list.indexOf(run), 1);
    if (run.dirty) {
      run.dirty = false;
      const i = this.dirty.indexOf(run);
      this.dirty.copyWithin(i, i + 1, this.dirtyCount);
      this.dirty[--this.dirtyCount] = undefined;
    }
  }

  /** Appends calls, in model order, to an open (streamed) run. */
  append(now: number, runId: string, calls: readonly CallInput[]): Output {
    this.now = now;
    const run = this.getRun(runId);
    if (!run.stream) throw new SchedulerError('conflict', `run ${runId} was not opened for streaming`);
    if (run.stream.sealed) throw new SchedulerError('conflict', `run ${runId} is sealed; it takes no more calls`);
    if (isRunOver(run.status)) throw new SchedulerError('conflict', `run ${runId} is ${run.status}; it takes no more calls`);
    assertUniqueIds(calls, run.byId, runId);
    this.appendTo(run, calls.map(normalized));
    return this.flush();
  }

  /** Closes a streamed run: calls still waiting on later ones are planned as a batch would plan them. */
  seal(now: number, runId: string): Output {
    this.now = now;
    const run = this.getRun(runId);
    if (!run.stream) throw new SchedulerError('conflict', `run ${runId} was not opened for streaming`);
    if (!run.stream.sealed && !isRunOver(run.status)) this.sealRun(run, false);
    return this.flush();
  }

  private appendTo(run: RunRt, calls: CallInput[], silent = false): void {
    const step = (run.stream as StreamPlanner).add(calls);
    for (const p of step.planned) {
      run.byId.set(p.id, p.index);
      const c = this.newCall(run, p);
      c.held = true;
      c.priority = own(run.estimates, c.tool) ?? 1;
      run.calls.push(c);
    }
    run.inputs.push(...calls);
    run.diagnostics.push(...step.diagnostics);
    if (!silent) this.emit('run.calls_added', run, undefined, { calls, edges: step.edges, diagnostics: step.diagnostics });
    this.applyStreamStep(run, step, silent);
  }

  private sealRun(run: RunRt, silent: boolean, byTimeout = false): void {
    const step = (run.stream as StreamPlanner).seal();
    run.diagnostics.push(...step.diagnostics);
    if (!silent) {
      this.emit('run.sealed', run, undefined, {
        edges: step.edges,
        diagnostics: step.diagnostics,
        generations: step.plan?.generations ?? [],
        ...(byTimeout ? { reason: 'openRunTimeoutMs' } : {}),
      });
    }
    this.applyStreamStep(run, step, silent);
  }

  /** Wires the edges into the calls a stream step settled, and lets those calls go. */
  private applyStreamStep(run: RunRt, step: StreamStep, silent: boolean): void {
    const doomedBy = new Map<number, CallRt>();
    for (const e of step.edges) {
      const from = run.calls[run.byId.get(e.from) as number] as CallRt;
      const to = run.calls[run.byId.get(e.to) as number] as CallRt;
      if (e.kind === 'conflict') {
        if (from.released) continue;
        from.conflictSucc = appended(from.conflictSucc, to.index);
        to.conflictWaiting++;
        continue;
      }
      if (isTerminal(from.status) && from.status !== 'succeeded') {
        // Blocked by the predecessor whose failure a batch would have met first (`via`), if it is one.
        if (!doomedBy.has(to.index) || step.via.get(to.index) === from.id) doomedBy.set(to.index, from);
      } else if (from.status !== 'succeeded') to.dataWaiting++;
      // As in a batch (`wire`), a data or policy predecessor holds the call's release back until it is
      // released itself (see `release`): the hazard between the two may ride on this edge alone.
      if (!from.released) {
        from.dataSucc = appended(from.dataSucc, to.index);
        to.dataUnreleased++;
      }
    }
    this.markDirty(run);
    if (silent) {
      for (const p of step.settledPlans) {
        const c = run.calls[p.index] as CallRt;
        c.held = false;
        c.refCalls = p.refCalls;
        c.hasRefs = p.hasRefs;
      }
      return;
    }
    const settled = step.settled.map((i) => run.calls[i] as CallRt);
    const plans = new Map(step.settledPlans.map((p) => [p.index, p]));
    const planned = (c: CallRt) => plans.get(c.index);
    for (const c of settled) {
      c.held = false;
      const p = planned(c) as PlannedCall;
      // The plan as of the step that settled it: the calls its references name are known now.
      c.refCalls = p.refCalls;
      c.hasRefs = p.hasRefs;
      if (p.review !== undefined) c.review = p.review;
      if (p.blockedBy && isPending(c)) this.block(run, c, p.blockedBy, false);
    }
    // Calls that arrive while a cancelled or failing-fast run waits for its aborted calls to end are
    // cancelled, as a batch's calls that had not started are (they would otherwise wait for nothing
    // and end blocked as a deadlock).
    if (run.cancelRequested || run.failFastBy !== undefined) {
      const reason = run.cancelRequested
        ? callError('cancelled', 'the run was cancelled')
        : callError('cancelled', `the run failed fast: ${run.failFastBy} failed`, { callId: run.failFastBy as string });
      for (const p of step.planned) {
        const c = run.calls[p.index] as CallRt;
        if (isPending(c)) this.cancelCall(run, c, reason);
      }
    }
    // Plan-time failures take effect in original order, each blocking what depends on it at once, as
    // in a batch (`addCalls`): a call whose own error a batch would reach later than the failure of
    // a predecessor is blocked through that predecessor instead (`origin`, `via`). Then, as after a
    // batch's plan, the calls whose predecessors failed at run time already.
    const originOf = (c: CallRt) => step.origin.get(c.index) ?? Infinity;
    const inherits = (c: CallRt) => planned(c)?.error !== undefined && originOf(c) < c.index;
    const blockThrough = (c: CallRt, from: CallRt) => {
      // What a batch would have said: a call blocked by propagation passes its reason on (naming the
      // call that failed); otherwise the reason follows from the predecessor and the run's mode
      // (`dependency_failed`, `awaiting_replan`, or `dependency_blocked` after a cycle).
      const passOn = from.status === 'blocked' && from.error && from.error.code !== 'cycle' ? from.error : undefined;
      this.blockDescendantsOf(run, from, [c], passOn);
    };
    const inOrder = [...settled].sort((x, y) => originOf(x) - originOf(y) || x.index - y.index);
    for (const c of inOrder) {
      const p = planned(c);
      const from = doomedBy.get(c.index);
      const via = step.via.get(c.index);
      if (p?.error && isPending(c) && !inherits(c)) this.fail(run, c, p.error, true);
      else if (p?.blockedBy && c.status === 'blocked') this.blockDescendantsOf(run, c);
      // (A `via` settled in this step blocks it when its own turn comes.)
      else if (from && isPending(c) && (via === undefined || via === from.id)) blockThrough(c, from);
    }
    // Never left waiting: what no planned predecessor reached is blocked by the failed one, or fails.
    for (const c of inOrder) {
      if (!isPending(c)) continue;
      const from = doomedBy.get(c.index);
      if (from) blockThrough(c, from);
      else if (inherits(c)) this.fail(run, c, planned(c)?.error as CallError, true);
    }
    for (const c of settled) if (c.status === 'pending' && c.dataWaiting === 0 && !c.armed) this.arm(run, c);
  }

  private newRun(id: string, tenant: string, failure: FailureMode, estimates: Record<string, number>): RunRt {
    const run: RunRt = {
      id,
      tenant,
      tenantDomain: `tenant:${tenant}`,
      failure,
      arrival: this.arrivals++,
      calls: [],
      byId: new Map(),
      inputs: [],
      ready: new Map(),
      readySets: [],
      readyCount: 0,
      running: 0,
      dirty: false,
      status: 'running',
      cancelRequested: false,
      replanFailures: [],
      handed: new Set(),
      deadlocked: false,
      diagnostics: [],
      diagnosticsBase: 0,
      endDiagnostics: [],
      estimates,
    };
    this.runs.set(run.id, run);
    if (!this.tenantRuns.has(run.tenant)) {
      this.tenants.push(run.tenant);
      this.tenantRuns.set(run.tenant, []);
    }
    (this.tenantRuns.get(run.tenant) as RunRt[]).push(run);
    return run;
  }

  /**
   * Takes a run back from its persisted events after a restart (DESIGN §8). Calls keep the outcome
   * their events gave them; a call that was running when the process died runs again if its tool is
   * idempotent, and otherwise fails with `interrupted` (its outcome is unknown) and the run's mode
   * applies. A run that had been cancelled or was failing fast only finishes stopping. Only what
   * happens from here on is emitted.
   */
  restore(now: number, events: readonly CoreEvent[]): Output {
    const id = events[0]?.runId as string;
    const known = this.runs.has(id);
    try {
      return this.restoreRun(now, events);
    } catch (e) {
      // A log it cannot take back (DESIGN §4, `unrecoverable`) leaves nothing half-built behind.
      const run = known ? undefined : this.runs.get(id);
      if (run) this.forget(run);
      this.out = { events: [], starts: [], aborts: [] };
      throw e;
    }
  }

  private restoreRun(now: number, events: readonly CoreEvent[]): Output {
    this.now = now;
    const created = events[0] as CoreEvent;
    if (created.type !== 'run.created') throw new SchedulerError('conflict', `run ${created.runId}: the first event is not run.created`);
    if (this.runs.has(created.runId)) throw new SchedulerError('conflict', `run ${created.runId} exists already`);
    const d = created.data as { tenant: string; failure: FailureMode; calls: CallInput[]; estimates?: Record<string, number>; open?: boolean };
    const run = this.newRun(created.runId, d.tenant, d.failure, d.estimates ?? {});
    // A streamed run (DESIGN §10) is planned again step by step, as its calls arrived and as it was
    // sealed, silently: the wiring is rebuilt, the outcomes come from the events below.
    if (d.open) run.stream = new StreamPlanner(run.tenant, this.opts.catalog, this.opts.policy);
    else this.wire(run, d.calls);
    const view = RunProjection.of(events).view;
    let pendingFailures: CallRt[] = [];
    let over: RunStatus | undefined;
    for (const e of events) {
      if (e.type === 'run.calls_added' && run.stream) this.appendTo(run, e.data.calls as CallInput[], true);
      else if (e.type === 'run.sealed' && run.stream) this.sealRun(run, true);
      else if (e.type === 'run.replanned') {
        for (const f of pendingFailures) run.handed.add(f.index);
        pendingFailures = [];
        over = undefined;
        this.wire(run, e.data.calls as CallInput[]);
      } else if (e.type === 'run.completed') over = e.data.status as RunStatus;
      else if (e.type === 'call.cancelled') {
        const reason = e.data.reason as CallError;
        if (reason.code === 'cancelled' && reason.callId === undefined) {
          run.cancelRequested = true;
          run.cancelledAt ??= e.at;
        }
      } else if (e.type === 'call.failed') {
        const c = run.calls[run.byId.get(e.callId as string) as number] as CallRt;
        const mode = c.manifest?.failure === 'fail_fast' ? 'fail_fast' : run.failure;
        if (mode === 'fail_fast' && !run.cancelRequested) run.failFastBy ??= c.id;
        else if (mode === 'replan' && run.failFastBy === undefined) pendingFailures.push(c);
      } else if (e.type === 'call.compensated') (run.compensations ??= []).push(run.byId.get(e.callId as string) as number);
    }
    run.replanFailures = pendingFailures;
    const interrupted: CallRt[] = [];
    for (const v of view.calls) {
      const c = run.calls[run.byId.get(v.id) as number] as CallRt;
      c.attempts = v.attempts;
      if (v.resolvedArgs) this.setResolved(run, c, v.resolvedArgs);
      if (v.status === 'succeeded' || v.status === 'failed' || v.status === 'blocked' || v.status === 'cancelled') {
        c.status = v.status;
        c.armed = true;
        if (v.status === 'succeeded') c.output = v.output;
        else c.error = (v.error ?? v.blockedBy) as CallError;
        c.superseded = v.error?.code === 'superseded';
        c.endedAt = v.endedAt ? Date.parse(v.endedAt) : now;
      } else if (v.status === 'awaiting_review') {
        c.status = 'awaiting_review';
        c.armed = true;
      } else if (v.status === 'running') interrupted.push(c);
      c.reviewed = v.review?.decision === 'approve' || v.review?.decision === 'edit';
    }
    for (const c of run.calls) if (c.status === 'succeeded') for (const s of c.dataSucc) (run.calls[s] as CallRt).dataWaiting--;
    for (const c of run.calls) if (isTerminal(c.status) && releasable(c)) this.release(run, c);
    let compensate = false;
    if (run.failFastBy !== undefined && run.compensations) {
      // Compensations already reported stay done; the rest still run, newest first.
      const done = new Set(run.compensations);
      run.compensations = this.compensationQueue(run).filter((i) => !done.has(i));
      compensate = run.compensations.length > 0;
    }
    if (over !== undefined) {
      run.status = over;
      return this.flush();
    }
    // An open run that was not sealed is still sealed by the server at its open-run timeout, counted
    // from its creation (right away when that has passed).
    if (run.stream && !run.stream.sealed) this.timers.push({ at: created.at + this.opts.defaults.openRunTimeoutMs, seq: this.timerSeq++, runId: run.id, seal: true });
    const stopping = run.cancelRequested || run.failFastBy !== undefined;
    if (stopping) {
      for (const c of interrupted) this.cancelCall(run, c, callError('cancelled', 'the run was stopping when the service restarted'));
    } else {
      // Every non-idempotent call that was running fails first, all of them with `interrupted` (each
      // one's outcome is unknown), and only then does the run's mode apply to them: a fail-fast from
      // the first must not turn the others into `cancelled`, nor re-arm an idempotent call it stopped.
      const lost = interrupted.filter((c) => !c.manifest?.idempotent);
      for (const c of lost) this.fail(run, c, callError('interrupted', `${c.id} was running when the service stopped; its outcome is unknown`), false);
      for (const c of lost) {
        const mode: FailureMode = c.manifest?.failure === 'fail_fast' ? 'fail_fast' : run.failure;
        if (mode === 'fail_fast') {
          if (run.failFastBy === undefined) {
            run.failFastBy = c.id;
            this.stopRun(run, callError('cancelled', `the run failed fast: ${c.id} failed`, { callId: c.id }));
          }
        } else {
          if (mode === 'replan') run.replanFailures.push(c);
          this.blockDescendantsOf(run, c);
        }
      }
      // Running idempotent calls are `pending` again (not armed): they run again below, unless that
      // fail-fast has just cancelled them with the rest of the run.
    }
    if (stopping) this.stopRun(run, callError('cancelled', run.cancelRequested ? 'the run was cancelled' : `the run failed fast: ${run.failFastBy} failed`, run.cancelRequested ? {} : { callId: run.failFastBy as string }));
    for (const c of run.calls) {
      if (c.status !== 'pending' || c.dataWaiting > 0) continue;
      if (c.reviewed) {
        // Reviewed (and maybe edited) already: keep the args the reviewer saw.
        c.armed = true;
        this.maybeReady(run, c);
      } else if (!c.armed) this.arm(run, c);
    }
    if (compensate) this.startNextCompensation(run);
    this.markDirty(run);
    return this.flush();
  }

  attemptEnded(now: number, e: AttemptEnded): Output {
    this.now = now;
    const run = this.runs.get(e.runId);
    if (!run) return this.flush();
    const hint = e.index === undefined ? undefined : run.calls[e.index];
    const idx = hint !== undefined && hint.id === e.callId ? hint.index : run.byId.get(e.callId);
    if (idx === undefined) return this.flush();
    const c = run.calls[idx] as CallRt;
    if (e.kind === 'compensation') {
      if (run.compensating === idx) this.compensationEnded(run, c, e.result);
      return this.flush();
    }
    if (c.status !== 'running' || e.attempt !== c.attempts) return this.flush();
    this.limiter.release(c);
    run.running--;
    this.learn(c.tool, now - (c.attemptStartedAt as number));
    const r = outputChecked(e.result, c, this.opts.limits.maxOutputBytes);
    if (r.ok) this.succeed(run, c, r.output);
    else if (run.cancelRequested || run.failFastBy !== undefined) {
      if (r.error.code === 'cancelled') this.cancelCall(run, c, r.error);
      else this.fail(run, c, r.error, false);
    } else if (this.mayRetry(c, r)) this.scheduleRetry(run, c, r);
    else {
      c.lastRetryable = r.retryable === true;
      this.fail(run, c, r.error, true);
    }
    this.markDirty(run);
    return this.flush();
  }

  /** Handles every timer due at `now` (retry backoffs, rate refills). */
  tick(now: number): Output {
    this.now = now;
    for (let t = this.timers.peek(); t && t.at <= now; t = this.timers.peek()) {
      this.timers.pop();
      if (t.runId === undefined) {
        this.wakes.delete(t.at);
        continue;
      }
      const run = this.runs.get(t.runId);
      if (t.seal) {
        if (run?.stream && !run.stream.sealed && !isRunOver(run.status)) this.sealRun(run, false, true);
        continue;
      }
      const c = run?.calls[t.index as number];
      if (!run || !c || !c.retrying) continue;
      c.retrying = false;
      this.maybeReady(run, c);
    }
    return this.flush();
  }

  /** The time of the next timer, if any. */
  nextWakeAt(): number | undefined {
    return this.timers.peek()?.at;
  }

  decideReview(now: number, d: ReviewDecision): Output {
    this.now = now;
    const { run, c } = this.find(d.runId, d.callId);
    if (c.status !== 'awaiting_review') throw new SchedulerError('conflict', `call ${c.id} is ${c.status}, not awaiting_review`);
    if (d.decision === 'edit') {
      if (!d.args) throw new SchedulerError('invalid_args', `an edit needs args`);
      const problem = this.opts.catalog.checkArgs(c.tool, d.args) ?? checkArgsSize(d.args, this.opts.limits.maxArgsBytes ?? DEFAULT_MAX_ARGS_BYTES)?.message;
      if (problem) throw new SchedulerError('invalid_args', `${c.id}: ${problem}`);
    }
    this.emit('review.decided', run, c, {
      decision: d.decision,
      ...(d.args ? { args: d.args } : {}),
      ...(d.comment !== undefined ? { comment: d.comment } : {}),
    });
    if (d.decision === 'reject') {
      const why = d.comment ? `rejected in review: ${d.comment}` : 'rejected in review';
      this.fail(run, c, callError('review_rejected', `${c.id}: ${why}`), true);
    } else {
      if (d.decision === 'edit') this.setResolved(run, c, d.args as Record<string, unknown>);
      c.reviewed = true;
      transition(c, 'pending');
      this.maybeReady(run, c);
    }
    this.markDirty(run);
    return this.flush();
  }

  cancel(now: number, runId: string): Output {
    this.now = now;
    const run = this.getRun(runId);
    // A run that failed fast has ended `failed` already (its compensations may still be running):
    // a late cancel must not turn that outcome into `cancelled`.
    if (run.status === 'needs_replan') {
      // Nobody will replan it: the calls waiting for a replan are cancelled, and so is the run.
      run.status = 'running';
      run.cancelRequested = true;
      run.cancelledAt = now;
      for (const c of run.calls) {
        if (c.status === 'blocked' && c.error?.code === 'awaiting_replan') this.cancelCall(run, c, callError('cancelled', 'the run was cancelled'));
      }
      this.markDirty(run);
      return this.flush();
    }
    if (isRunOver(run.status) || run.cancelRequested || run.failFastBy !== undefined) return this.flush();
    run.cancelRequested = true;
    run.cancelledAt = now;
    this.stopRun(run, callError('cancelled', 'the run was cancelled'));
    this.markDirty(run);
    return this.flush();
  }

  /** Appends calls to a run that ended `needs_replan`; the calls waiting on its failures are superseded. */
  replan(now: number, runId: string, calls: readonly CallInput[]): Output {
    this.now = now;
    const run = this.getRun(runId);
    if (run.status !== 'needs_replan') throw new SchedulerError('conflict', `run ${runId} is ${run.status}, not needs_replan`);
    for (const c of calls) if (run.byId.has(c.id)) throw new SchedulerError('conflict', `call id ${c.id} is used in run ${runId} already`);
    run.status = 'running';
    const list = calls.map((c) => ({ id: c.id, tool: c.tool, args: c.args ?? {} }));
    for (const f of run.replanFailures) run.handed.add(f.index);
    run.replanFailures = [];
    for (const c of run.calls) {
      if (c.status === 'blocked' && c.error?.code === 'awaiting_replan') {
        c.superseded = true;
        transition(c, 'cancelled');
        c.error = callError('superseded', `${c.id} was superseded by a replan`);
        this.emit('call.cancelled', run, c, { reason: c.error });
      }
    }
    this.addCalls(run, list, 'run.replanned');
    return this.flush();
  }

  // ---- views for the shell -------------------------------------------------------------------

  runStatus(runId: string): RunStatus | undefined {
    return this.runs.get(runId)?.status;
  }

  /** Forgets an ended run (the shell keeps its events); a run that may still change is kept. */
  evict(runId: string): void {
    const run = this.runs.get(runId);
    if (!run || !isRunOver(run.status) || run.status === 'needs_replan') return;
    this.forget(run);
  }

  activeRuns(tenant?: string): number {
    let n = 0;
    for (const r of this.runs.values()) if (!isRunOver(r.status) && (tenant === undefined || r.tenant === tenant)) n++;
    return n;
  }

  limitUsage() {
    return this.limiter.usage();
  }

  estimates(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [tool, s] of [...this.learned].sort(([a], [b]) => (a < b ? -1 : 1))) out[tool] = Math.round(s.mean * 1000) / 1000;
    return out;
  }

  // ---- building a run ------------------------------------------------------------------------

  private addCalls(run: RunRt, list: CallInput[], event: 'run.started' | 'run.replanned'): void {
    const { plan, base, fresh, doomedBy } = this.wire(run, list);
    const data: Record<string, unknown> = { edges: fresh, generations: plan.generations, diagnostics: run.diagnostics.slice(run.diagnosticsBase) };
    if (event === 'run.replanned') data.calls = list;
    this.emit(event, run, undefined, data);

    // Cycles first, so a cycle's calls all say `cycle` before anything is propagated from them.
    const added = run.calls.slice(base);
    const planned = (c: CallRt) => plan.calls[c.index] as PlannedCall;
    for (const c of added) if (planned(c).blockedBy && isPending(c)) this.block(run, c, planned(c).blockedBy as CallError, false);
    for (const c of added) {
      const p = planned(c);
      const from = doomedBy.get(c.index);
      if (p.error && isPending(c)) this.fail(run, c, p.error, true);
      else if (p.blockedBy && c.status === 'blocked') this.blockDescendantsOf(run, c);
      else if (from && isPending(c)) this.blockDescendantsOf(run, from, [c], callError('dependency_failed', `${from.id} ${from.status === 'failed' ? 'failed' : `is ${from.status}`}`, { callId: from.id }));
    }
    for (const c of added) if (c.status === 'pending' && c.dataWaiting === 0 && !c.armed) this.arm(run, c);
    this.markDirty(run);
  }

  /**
   * Plans the run's calls with `list` appended and wires the edges that end in the new calls. An edge
   * from an earlier call (a replan's calls referring to the run's results) needs no waiting: that call
   * has ended; if it did not succeed, the new call is doomed by it.
   */
  private wire(run: RunRt, list: CallInput[]) {
    const base = run.calls.length;
    const inputs = [...run.inputs, ...list];
    const plan = buildPlan({ calls: inputs, tenant: run.tenant, catalog: this.opts.catalog, policy: this.opts.policy });
    // A call is named by its id in every attempt end, review and reference: two calls with one id
    // could never both end (the API rejects such a batch too; this guards library callers). The plan
    // indexes ids anyway, so a duplicate shows as fewer ids than calls.
    if (plan.byId.size !== inputs.length) assertUniqueIds(inputs, undefined, run.id);
    run.inputs = inputs;
    // The plan indexes every call of the run, the earlier ones as they were.
    run.byId = plan.byId;
    for (let i = base; i < inputs.length; i++) run.calls.push(this.newCall(run, plan.calls[i] as PlannedCall));
    const { edges: fresh, ends } = base === 0 ? { edges: plan.edges, ends: plan.edgeCalls } : this.replanEdges(plan, base);
    const doomedBy = new Map<number, CallRt>();
    for (let k = 0; k < fresh.length; k++) {
      const from = run.calls[ends[2 * k] as number] as CallRt;
      const to = run.calls[ends[2 * k + 1] as number] as CallRt;
      if (from.index < base) {
        if ((fresh[k] as Edge).kind !== 'conflict' && from.status !== 'succeeded' && !doomedBy.has(to.index)) doomedBy.set(to.index, from);
        continue;
      }
      if ((fresh[k] as Edge).kind === 'conflict') {
        from.conflictSucc = appended(from.conflictSucc, to.index);
        to.conflictWaiting++;
      } else {
        from.dataSucc = appended(from.dataSucc, to.index);
        to.dataWaiting++;
        to.dataUnreleased++;
      }
    }
    this.rank(run, plan, base);
    const isNew = (id: string) => (run.byId.get(id) as number) >= base;
    run.diagnosticsBase = run.diagnostics.length;
    run.diagnostics.push(...plan.diagnostics.filter((d) => (d.callId !== undefined ? isNew(d.callId) : (d.callIds ?? []).some(isNew))));
    return { plan, base, fresh, doomedBy };
  }

  /**
   * The edges into a replan's calls (with their call indexes, as `Plan.edgeCalls`). Every earlier call
   * has ended, so conflicts are only among the new calls: they are ordered by a hazard index of their
   * own, in the plan's order. (The whole run's conflict edges would not do: an old call between two new
   * ones in that order would stand in for the edge between them, and it is no longer there to wait for.)
   */
  private replanEdges(plan: Plan, base: number): { edges: Edge[]; ends: number[] } {
    const edges: Edge[] = [];
    const ends: number[] = [];
    plan.edges.forEach((e, k) => {
      const to = plan.edgeCalls[2 * k + 1] as number;
      if (e.kind === 'conflict' || to < base) return;
      edges.push(e);
      ends.push(plan.edgeCalls[2 * k] as number, to);
    });
    const linked = new Set(edges.map((e) => `${e.from}>${e.to}`));
    const hazards = new HazardIndex();
    for (const i of plan.order) {
      const p = plan.calls[i] as PlannedCall;
      if (i < base || p.error || p.blockedBy) continue;
      for (const h of hazards.add(i, p.access)) {
        const from = (plan.calls[h.from] as PlannedCall).id;
        if (linked.has(`${from}>${p.id}`)) continue;
        edges.push({ from, to: p.id, kind: 'conflict', reason: describeHazard(h.kind, h.key) });
        ends.push(h.from, i);
      }
    }
    return { edges, ends };
  }

  private newCall(run: RunRt, p: PlannedCall): CallRt {
    // Every field set, in one order: all calls share one shape.
    return {
      index: p.index,
      id: p.id,
      tool: p.tool,
      manifest: p.manifest,
      args: p.args,
      resolved: undefined,
      status: 'pending',
      attempts: 0,
      output: undefined,
      error: undefined,
      review: p.review,
      reviewed: false,
      refCalls: p.refCalls,
      hasRefs: p.hasRefs,
      templated: p.templated,
      dataSucc: NO_SUCC,
      conflictSucc: NO_SUCC,
      dataWaiting: 0,
      conflictWaiting: 0,
      dataUnreleased: 0,
      armed: false,
      released: false,
      retrying: false,
      priority: 0,
      holds: false,
      runId: run.id,
      tenant: run.tenant,
      domain: null,
      reads: NO_KEYS,
      writes: NO_KEYS,
      toolRate: undefined,
      resourceLimits: undefined,
      buckets: undefined,
      endedAt: undefined,
      attemptStartedAt: undefined,
      superseded: false,
      planAccess: p.access,
      lastRetryable: undefined,
      held: false,
    };
  }

  /** Longest remaining path, in estimated ms, for the calls from `base` on (reverse topological order). */
  private rank(run: RunRt, plan: Plan, base: number): void {
    const est = (c: CallRt) => own(run.estimates, c.tool) ?? 1;
    const { start, list } = plan.adjacency;
    for (let k = plan.order.length - 1; k >= 0; k--) {
      const i = plan.order[k] as number;
      if (i < base) continue;
      const c = run.calls[i] as CallRt;
      let tail = 0;
      for (let e = start[i] as number; e < (start[i + 1] as number); e++) {
        const s = list[e] as number;
        if (s >= base) tail = Math.max(tail, (run.calls[s] as CallRt).priority);
      }
      c.priority = est(c) + tail;
    }
  }

  // ---- transitions ---------------------------------------------------------------------------

  /** Data and policy predecessors have succeeded: resolve args, ask for review or wait for conflicts. */
  private arm(run: RunRt, c: CallRt): void {
    if (c.held) return;
    c.armed = true;
    let args = c.args;
    if (c.hasRefs) {
      // References are looked up in document order: the k-th names the plan's `refCalls[k]`.
      let k = 0;
      const r = resolveValue(
        c.args,
        () => {
          const t = run.calls[c.refCalls[k++] as number];
          return t && t.status === 'succeeded' ? { value: t.output } : undefined;
        },
        this.opts.limits.maxArgsBytes ?? DEFAULT_MAX_ARGS_BYTES,
      );
      if (!r.ok) return this.fail(run, c, { ...r.error, message: `${c.id}: ${r.error.message}` }, true);
      args = r.value as Record<string, unknown>;
      // Resolved once: what the references brought in is data (a file's text may well hold `${`),
      // so the schema sees it as it is, never scanned for references again.
      const problem = this.opts.catalog.checkArgs(c.tool, args);
      if (problem) return this.fail(run, c, callError('invalid_args', `${c.id}: ${problem}`, { details: { tool: c.tool } }), true);
    } else if (c.templated) {
      const r = resolveValue(c.args, () => undefined);
      if (r.ok) args = r.value as Record<string, unknown>;
    }
    const big = c.hasRefs ? undefined : checkArgsSize(args, this.opts.limits.maxArgsBytes ?? DEFAULT_MAX_ARGS_BYTES);
    if (big) return this.fail(run, c, { ...big, message: `${c.id}: ${big.message}` }, true);
    this.setResolved(run, c, args);
    if (c.review !== undefined && !c.reviewed) {
      transition(c, 'awaiting_review');
      this.emit('call.awaiting_review', run, c, { reason: c.review, args });
      return;
    }
    this.maybeReady(run, c);
  }

  /** Sets the args the call runs with; its resources follow them (the plan's, when they are the same args). */
  private setResolved(run: RunRt, c: CallRt, args: Record<string, unknown>): void {
    c.resolved = args;
    const m = c.manifest as ToolManifest;
    const access = args === c.args && c.planAccess ? c.planAccess : accessOf(m, args);
    c.holds = true;
    c.domain = m.scope === 'run' ? null : m.scope === 'global' ? 'global' : run.tenantDomain;
    c.reads = access.reads;
    c.writes = access.writes;
    c.toolRate = m.rate;
    // What the limiter found these args to count against (found again for new args).
    c.resourceLimits = undefined;
    c.buckets = undefined;
  }

  private maybeReady(run: RunRt, c: CallRt): void {
    if (c.status !== 'pending' || !c.armed || c.retrying || c.conflictWaiting > 0) return;
    if (c.review !== undefined && !c.reviewed) return;
    if (run.cancelRequested || run.failFastBy !== undefined) return;
    transition(c, 'ready');
    this.emit('call.ready', run, c, NO_DATA);
    let heap = run.ready.get(c.tool);
    if (!heap) {
      heap = readySet();
      run.ready.set(c.tool, heap);
      run.readySets.push([c.tool, heap]);
    }
    heap.push(c);
    run.readyCount++;
    this.markDirty(run);
  }

  private start(run: RunRt, c: CallRt): void {
    this.limiter.acquire(c, this.now);
    transition(c, 'running');
    run.running++;
    c.attempts++;
    c.attemptStartedAt = this.now;
    const args = c.resolved as Record<string, unknown>;
    this.emit('call.started', run, c, { attempt: c.attempts, args });
    const m = c.manifest as ToolManifest;
    this.out.starts.push({ kind: 'call', runId: run.id, callId: c.id, index: c.index, attempt: c.attempts, tool: m, args, timeoutMs: m.timeoutMs });
  }

  private succeed(run: RunRt, c: CallRt, output: unknown): void {
    transition(c, 'succeeded');
    c.output = output;
    this.emit('call.succeeded', run, c, { attempt: c.attempts, output, durationMs: this.now - (c.attemptStartedAt as number) });
    this.ended(run, c);
    // Indexed loops over successor lists, here and in `release`: most are the shared frozen empty
    // list, which for…of iterates through the generic (allocating) iterator path, several times slower.
    const succ = c.dataSucc;
    for (let k = 0; k < succ.length; k++) {
      const t = run.calls[succ[k] as number] as CallRt;
      t.dataWaiting--;
      if (t.dataWaiting === 0 && t.status === 'pending' && !t.armed) this.arm(run, t);
    }
  }

  private fail(run: RunRt, c: CallRt, error: CallError, propagate: boolean): void {
    const wasRunning = c.status === 'running';
    transition(c, 'failed');
    c.error = error;
    const attempt = wasRunning ? { attempt: c.attempts, retryable: c.lastRetryable === true, durationMs: this.now - (c.attemptStartedAt as number) } : {};
    this.emit('call.failed', run, c, { ...attempt, error });
    this.ended(run, c);
    if (!propagate) return;
    const mode: FailureMode = c.manifest?.failure === 'fail_fast' ? 'fail_fast' : run.failure;
    if (mode === 'fail_fast') {
      if (run.failFastBy === undefined && !run.cancelRequested) {
        run.failFastBy = c.id;
        this.stopRun(run, callError('cancelled', `the run failed fast: ${c.id} failed`, { callId: c.id }));
      }
    } else if (mode === 'replan') {
      run.replanFailures.push(c);
      this.blockDescendantsOf(run, c);
    } else this.blockDescendantsOf(run, c);
  }

  private block(run: RunRt, c: CallRt, why: CallError, propagate: boolean): void {
    transition(c, 'blocked');
    c.error = why;
    this.emit('call.blocked', run, c, { blockedBy: why });
    this.ended(run, c);
    if (propagate) this.blockDescendantsOf(run, c);
  }

  /**
   * Blocks every call that depends on `root` through data or policy edges (or only `only`'s subtrees):
   * `dependency_failed` naming a failed root, `awaiting_replan` in replan mode, `dependency_blocked`
   * naming a blocked root.
   */
  private blockDescendantsOf(run: RunRt, root: CallRt, only?: CallRt[], reason?: CallError): void {
    const replan = root.status === 'failed' && run.failure === 'replan' && root.manifest?.failure !== 'fail_fast';
    const why: CallError =
      reason ??
      (root.status === 'failed'
        ? replan
          ? callError('awaiting_replan', `waits for a replan: ${root.id} failed`, { callId: root.id })
          : callError('dependency_failed', `${root.id} failed`, { callId: root.id })
        : callError('dependency_blocked', `${root.id} is ${root.status}`, { callId: root.id }));
    const stack = only ? [...only] : root.dataSucc.map((s) => run.calls[s] as CallRt);
    while (stack.length > 0) {
      const c = stack.pop() as CallRt;
      if (!isPending(c)) continue;
      this.block(run, c, why, false);
      for (const s of c.dataSucc) stack.push(run.calls[s] as CallRt);
    }
  }

  private cancelCall(run: RunRt, c: CallRt, reason: CallError): void {
    transition(c, 'cancelled');
    c.error = reason;
    this.emit('call.cancelled', run, c, { reason });
    this.ended(run, c);
  }

  /** Cancels every call not started yet and aborts the running ones (cancel, fail-fast). */
  private stopRun(run: RunRt, reason: CallError): void {
    for (const c of run.calls) {
      if (c.status === 'running') {
        this.out.aborts.push({ runId: run.id, callId: c.id, attempt: c.attempts, reason });
      } else if (isPending(c)) {
        c.retrying = false;
        this.cancelCall(run, c, reason);
      }
    }
  }

  /** A call reached a final status: bookkeeping, and conflict successors may go once it is released. */
  private ended(run: RunRt, c: CallRt): void {
    c.endedAt = this.now;
    if (c.holds) this.limiter.dropWaiter(c);
    if (releasable(c)) this.release(run, c);
    this.markDirty(run);
  }

  /**
   * Releases an ended call and, after it, every ended call that waited only for it. A call that ends
   * without running waits for its data and policy predecessors too: the plan keeps one edge per pair,
   * so a hazard between two calls that also share a data edge is carried by that data edge alone, and
   * the conflict successors of the later call rely on it (a writer blocked early must not let the next
   * writer start while the earlier one still runs).
   */
  private release(run: RunRt, first: CallRt): void {
    // Usually nothing cascades: the stack is only made when an ended successor becomes releasable.
    let stack: CallRt[] | undefined;
    for (let c: CallRt | undefined = first; c; c = stack?.pop()) {
      if (c.released) continue;
      c.released = true;
      const conflictSucc = c.conflictSucc;
      for (let k = 0; k < conflictSucc.length; k++) {
        const t = run.calls[conflictSucc[k] as number] as CallRt;
        t.conflictWaiting--;
        if (t.conflictWaiting > 0) continue;
        if (isTerminal(t.status)) {
          if (releasable(t)) (stack ??= []).push(t);
        } else this.maybeReady(run, t);
      }
      const dataSucc = c.dataSucc;
      for (let k = 0; k < dataSucc.length; k++) {
        const t = run.calls[dataSucc[k] as number] as CallRt;
        t.dataUnreleased--;
        if (isTerminal(t.status) && releasable(t)) (stack ??= []).push(t);
      }
    }
  }

  private mayRetry(c: CallRt, r: { retryable?: boolean }): boolean {
    const m = c.manifest as ToolManifest;
    return r.retryable === true && m.idempotent && m.retry !== undefined && c.attempts < m.retry.attempts;
  }

  private scheduleRetry(run: RunRt, c: CallRt, r: { error: CallError; retryAfterMs?: number }): void {
    const m = c.manifest as ToolManifest;
    const delay = Math.max(backoffDelay(m.retry!, run.id, c.id, c.attempts), r.retryAfterMs ?? 0);
    transition(c, 'pending');
    c.retrying = true;
    const at = this.now + delay;
    this.emit('call.retry_scheduled', run, c, {
      attempt: c.attempts + 1,
      at,
      delayMs: delay,
      error: r.error,
      durationMs: this.now - (c.attemptStartedAt as number),
      ...(r.retryAfterMs !== undefined ? { retryAfterMs: r.retryAfterMs } : {}),
    });
    this.timers.push({ at, seq: this.timerSeq++, runId: run.id, index: c.index });
  }

  // ---- compensation --------------------------------------------------------------------------

  private startNextCompensation(run: RunRt): void {
    const queue = run.compensations as number[];
    while (queue.length > 0) {
      const c = run.calls[queue.shift() as number] as CallRt;
      const spec = (c.manifest as ToolManifest).compensate as NonNullable<ToolManifest['compensate']>;
      const tool = this.opts.catalog.get(spec.tool);
      const args = resolveValue(spec.args, (ref) =>
        ref.target === 'self' ? { value: ref.field === 'args' ? (c.resolved ?? c.args) : c.output } : undefined,
      );
      if (!tool || !args.ok) {
        const error = !tool ? callError('unknown_tool', `no tool named ${spec.tool} to compensate ${c.id}`) : (args as { error: CallError }).error;
        this.emit('call.compensated', run, c, { status: 'failed', error });
        continue;
      }
      run.compensating = c.index;
      run.compensationStartedAt = this.now;
      this.out.starts.push({
        kind: 'compensation',
        runId: run.id,
        callId: c.id,
        index: c.index,
        attempt: 1,
        tool,
        args: args.value as Record<string, unknown>,
        timeoutMs: tool.timeoutMs,
      });
      return;
    }
    run.compensating = undefined;
    this.markDirty(run);
  }

  private compensationEnded(run: RunRt, c: CallRt, r: AttemptResult): void {
    const startedAt = run.compensationStartedAt as number;
    this.emit('call.compensated', run, c, r.ok ? { status: 'succeeded', output: r.output, startedAt } : { status: 'failed', error: r.error, startedAt });
    this.startNextCompensation(run);
  }

  // ---- dispatch and ending -------------------------------------------------------------------

  private dispatch(): void {
    for (;;) {
      if (this.limiter.globalFull()) return;
      let started = false;
      const n = this.tenants.length;
      for (let k = 0; k < n && !started; k++) {
        const ti = (this.rr + k) % n;
        const tenant = this.tenants[ti] as string;
        if (this.limiter.globalFull()) return;
        if (this.limiter.tenantFull(tenant)) continue;
        for (const run of this.tenantRuns.get(tenant) as RunRt[]) {
          if (run.readyCount === 0) continue;
          if (this.opts.limits.perRun !== undefined && run.running >= this.opts.limits.perRun) continue;
          const c = this.pick(run);
          if (c === 'stop') break;
          if (!c) continue;
          this.takeReady(run, c);
          this.start(run, c);
          // Not modulo n: a tenant that arrives later is appended after the one just served, and
          // must be the next in turn (a pointer wrapped to 0 would serve this tenant again first).
          this.rr = ti + 1;
          started = true;
          break;
        }
      }
      if (!started) return;
    }
  }

  /** The best ready call of the run that every limit lets start, or 'stop' when its tenant is full. */
  private pick(run: RunRt): CallRt | undefined | 'stop' {
    let best: CallRt | undefined;
    // Indexed, and no destructuring (which goes through the iterator): this runs per dispatch.
    const sets = run.readySets;
    for (let i = 0; i < sets.length; i++) {
      const set = sets[i] as [string, KeyedHeap<CallRt>];
      const tool = set[0];
      const heap = set[1];
      while (heap.size > 0 && (heap.peek() as CallRt).status !== 'ready') heap.pop();
      if (heap.size === 0 || this.limiter.toolFull(tool)) continue;
      if (best && byPriority(heap.peek() as CallRt, best) > 0) continue;
      let skipped: CallRt[] | undefined;
      let found: CallRt | undefined;
      while (heap.size > 0) {
        const c = heap.peek() as CallRt;
        if (c.status !== 'ready') {
          heap.pop();
          continue;
        }
        const check = this.limiter.check(c, this.now);
        if (check.ok) {
          found = c;
          break;
        }
        if (check.reason === 'global' || check.reason === 'tenant') {
          if (skipped) for (const s of skipped) heap.push(s);
          return 'stop';
        }
        if (check.reason === 'rate') {
          this.wakeAt(check.wakeAt as number);
          break;
        }
        if (check.reason === 'tool') break;
        (skipped ??= []).push(heap.pop() as CallRt);
      }
      if (skipped) for (const s of skipped) heap.push(s);
      if (found && (!best || byPriority(found, best) < 0)) best = found;
    }
    return best;
  }

  private takeReady(run: RunRt, c: CallRt): void {
    const heap = run.ready.get(c.tool) as KeyedHeap<CallRt>;
    if (heap.peek() === c) heap.pop();
    else heap.removeWhere((x) => x === c);
    run.readyCount--;
  }

  private wakeAt(at: number): void {
    if (this.wakes.has(at)) return;
    this.wakes.add(at);
    this.timers.push({ at, seq: this.timerSeq++ });
  }

  private markDirty(run: RunRt): void {
    if (run.dirty) return;
    run.dirty = true;
    this.dirty[this.dirtyCount++] = run;
  }

  private finishRuns(): void {
    // A run marked again while this runs (after its flag was cleared) is looked at again, later.
    for (let i = 0; i < this.dirtyCount; i++) {
      const run = this.dirty[i] as RunRt;
      this.dirty[i] = undefined;
      run.dirty = false;
      this.maybeEnd(run);
    }
    this.dirtyCount = 0;
  }

  private maybeEnd(run: RunRt): void {
    if (run.status !== 'running' || run.running > 0 || run.compensating !== undefined) return;
    if (run.stream && !run.stream.sealed && !run.cancelRequested && run.failFastBy === undefined) return;
    if (run.failFastBy !== undefined && run.compensations === undefined) {
      run.compensations = this.compensationQueue(run);
      this.startNextCompensation(run);
      if (run.compensating !== undefined) return;
    }
    const live = run.calls.filter((c) => !isTerminal(c.status));
    if (live.length > 0) {
      if (live.some((c) => c.status === 'ready' || c.status === 'awaiting_review' || c.retrying)) return;
      this.deadlock(run, live);
    }
    const status = this.finalStatus(run);
    run.status = status;
    if (status === 'needs_replan') {
      const waiting = run.calls.filter((c) => c.status === 'blocked' && c.error?.code === 'awaiting_replan').map((c) => c.id);
      const sideEffects = run.calls.filter((c) => c.status === 'succeeded' && c.manifest && writesSomething(c.manifest)).map((c) => c.id);
      const replanContext = { failed: run.replanFailures.map((c) => ({ callId: c.id, error: c.error })), waiting, sideEffects };
      this.emit('run.needs_replan', run, undefined, { replanContext });
    }
    const completed: Record<string, unknown> = { status };
    if (run.cancelledAt !== undefined) completed.cancelledAt = run.cancelledAt;
    if (run.endDiagnostics.length > 0) completed.diagnostics = run.endDiagnostics.splice(0);
    this.emit('run.completed', run, undefined, completed);
  }

  /** Succeeded calls that declare a compensation, newest first. */
  private compensationQueue(run: RunRt): number[] {
    return run.calls
      .filter((c) => c.status === 'succeeded' && c.manifest?.compensate)
      .sort((a, b) => (b.endedAt as number) - (a.endedAt as number) || b.index - a.index)
      .map((c) => c.index);
  }

  /** Pending calls that nothing can move any more: block them and say what each waits on. */
  private deadlock(run: RunRt, live: CallRt[]): void {
    run.deadlocked = true;
    const waits = live.map((c) => {
      const on = run.calls.filter((p) => (p.dataSucc.includes(c.index) || p.conflictSucc.includes(c.index)) && !p.released).map((p) => p.id);
      return { callId: c.id, waitsOn: on };
    });
    const diagnostic: Diagnostic = {
      code: 'deadlock',
      message: `nothing can run: ${waits.map((w) => `${w.callId} waits on ${w.waitsOn.join(', ') || 'nothing'}`).join('; ')}`,
      callIds: live.map((c) => c.id),
    };
    run.diagnostics.push(diagnostic);
    run.endDiagnostics.push(diagnostic);
    for (const w of waits) {
      const c = run.calls[run.byId.get(w.callId) as number] as CallRt;
      if (isPending(c)) this.block(run, c, callError('dependency_blocked', `${c.id} waits on ${w.waitsOn.join(', ')}, which cannot end`, w.waitsOn[0] ? { callId: w.waitsOn[0] } : {}), false);
    }
  }

  private finalStatus(run: RunRt): RunStatus {
    if (run.cancelRequested) return 'cancelled';
    if (run.failFastBy !== undefined) return 'failed';
    if (run.deadlocked || run.calls.some((c) => c.status === 'blocked' && c.error?.code === 'cycle')) return 'deadlocked';
    if (run.replanFailures.length > 0) return 'needs_replan';
    const counted = run.calls.filter((c) => !c.superseded && !run.handed.has(c.index));
    const ok = counted.filter((c) => c.status === 'succeeded').length;
    if (ok === counted.length) return 'succeeded';
    return ok === 0 ? 'failed' : 'partial';
  }

  // ---- plumbing ------------------------------------------------------------------------------

  private flush(): Output {
    this.dispatch();
    this.finishRuns();
    // Ending a run can start compensations but never frees a limit, so one more pass is enough.
    const out = this.out;
    this.out = { events: [], starts: [], aborts: [] };
    return out;
  }

  private emit(type: EventType, run: RunRt, c: CallRt | undefined, data: Record<string, unknown>): void {
    this.out.events.push(c ? { type, runId: run.id, callId: c.id, at: this.now, data } : { type, runId: run.id, at: this.now, data });
  }

  private learn(tool: string, ms: number): void {
    let s = this.learned.get(tool);
    if (!s) this.learned.set(tool, (s = { n: 0, mean: 0 }));
    s.n++;
    s.mean += (ms - s.mean) / s.n;
  }

  private getRun(runId: string): RunRt {
    const run = this.runs.get(runId);
    if (!run) throw new SchedulerError('run_not_found', `no run ${runId}`);
    return run;
  }

  private find(runId: string, callId: string): { run: RunRt; c: CallRt } {
    const run = this.getRun(runId);
    const idx = run.byId.get(callId);
    if (idx === undefined) throw new SchedulerError('call_not_found', `no call ${callId} in run ${runId}`);
    return { run, c: run.calls[idx] as CallRt };
  }
}

/** Whether a tool changes anything: it declares writes, or declares nothing at all (unknown effects). */
function writesSomething(m: ToolManifest): boolean {
  return m.writes === undefined ? m.reads === undefined : m.writes.length > 0;
}

/** Whether an ended call may be released: everything it waited for, of every kind, is released. */
function releasable(c: CallRt): boolean {
  return !c.released && c.conflictWaiting === 0 && c.dataUnreleased === 0;
}

function isPending(c: CallRt): boolean {
  return c.status === 'pending' || c.status === 'ready' || c.status === 'awaiting_review';
}

/** The keys of a call whose args are not resolved yet (shared, so frozen). */
const NO_KEYS: Key[] = Object.freeze([]) as unknown as Key[];

/** A successor list that no call has joined yet (shared, so frozen; see `appended`). */
const NO_SUCC: number[] = Object.freeze([]) as unknown as number[];

/**
 * `list` with `index` appended. Most calls have no successors of a kind, or one: they share the empty
 * list, and get a list of one rather than the 16 slots a push onto an empty array reserves.
 */
function appended(list: number[], index: number): number[] {
  if (list === NO_SUCC) return [index];
  list.push(index);
  return list;
}

/** The data of events that carry none (shared, so frozen). */
const NO_DATA: Record<string, unknown> = Object.freeze({});

/** A call as the run keeps and records it: `args` defaulted, nothing but the fields of a CallInput. */
function normalized(c: CallInput): CallInput {
  // Already so (what the API and most callers pass): kept as it is, not copied (a 100k-call batch
  // would keep 100k copies alive for the whole run).
  if (c.invalid === undefined && c.args !== undefined && fieldCount(c) === 3) return c;
  const args = c.args ?? {};
  return c.invalid !== undefined ? { id: c.id, tool: c.tool, args, invalid: c.invalid } : { id: c.id, tool: c.tool, args };
}

function fieldCount(o: object): number {
  let n = 0;
  for (const k in o) if (Object.hasOwn(o, k)) n++;
  return n;
}

function isRunOver(s: RunStatus): boolean {
  return s !== 'running' && s !== 'queued';
}
