/**
 * How a call moves on (DESIGN §6): armed when its data and policy predecessors have succeeded (args
 * resolved and checked, review asked for), then ready (dispatch.ts), and finally succeeded, failed
 * (retried first if it may be), blocked or cancelled, with the run's failure mode applied to what
 * depends on it. Every status change goes through `transition` (state.ts).
 *
 * A call is *released* when it has ended and its own predecessors (of every kind) are released: a
 * call that ends without running (blocked, cancelled) keeps its successors waiting until what it was
 * waiting for has ended too, which keeps the reduced hazard edges of the plan sound.
 */
import { callError, type CallError } from '../errors.js';
import { checkArgsSize, resolveValue } from '../references.js';
import { DEFAULT_MAX_ARGS_BYTES } from '../size.js';
import { accessOf, expandLabel } from '../resources.js';
import { backoffDelay } from '../retry.js';
import { isTerminal, transition } from '../state.js';
import type { FailureMode, ToolManifest } from '../tool.js';
import { maybeReady } from './dispatch.js';
import type { Pause } from '../limits.js';
import { pauseTool } from './pauses.js';
import { emit, isPending, markDirty, releasable, type ScheduledCall, type ScheduledRun, type SchedulerState } from './records.js';

/** Data and policy predecessors have succeeded: resolve args, ask for review or wait for conflicts. */
export function arm(s: SchedulerState, run: ScheduledRun, c: ScheduledCall): void {
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
      s.opts.limits.maxArgsBytes ?? DEFAULT_MAX_ARGS_BYTES,
    );
    if (!r.ok) {
      fail(s, run, c, { ...r.error, message: `${c.id}: ${r.error.message}` }, true);
      return;
    }
    args = r.value as Record<string, unknown>;
    // Resolved once: what the references brought in is data (a file's text may well hold `${`),
    // so the schema sees it as it is, never scanned for references again.
    const problem = s.opts.catalog.checkArgs(c.tool, args);
    if (problem) {
      fail(s, run, c, callError('invalid_args', `${c.id}: ${problem}`, { details: { tool: c.tool } }), true);
      return;
    }
  } else if (c.templated) {
    const r = resolveValue(c.args, () => undefined);
    if (r.ok) args = r.value as Record<string, unknown>;
  }
  // What a before_call hook gave (known again after a restart) replaces them, checked when it was given.
  if (c.hookArgs) args = c.hookArgs;
  const big = c.hasRefs || c.hookArgs ? undefined : checkArgsSize(args, s.opts.limits.maxArgsBytes ?? DEFAULT_MAX_ARGS_BYTES);
  if (big) {
    fail(s, run, c, { ...big, message: `${c.id}: ${big.message}` }, true);
    return;
  }
  setResolved(run, c, args);
  if (c.review !== undefined && !c.reviewed) {
    transition(c, 'awaiting_review');
    emit(s, 'call.awaiting_review', run, c, { reason: c.review, args });
    return;
  }
  maybeReady(s, run, c);
}

/** Sets the args the call runs with; its resources follow them (the plan's, when they are the same args). */
export function setResolved(run: ScheduledRun, c: ScheduledCall, args: Record<string, unknown>): void {
  c.resolved = args;
  const m = c.manifest as ToolManifest;
  const access = args === c.args && c.planAccess ? c.planAccess : accessOf(m, args);
  c.holds = true;
  c.domain = m.scope === 'run' ? null : m.scope === 'global' ? 'global' : run.tenantDomain;
  c.reads = access.reads;
  c.writes = access.writes;
  c.toolRate = m.rate;
  const keyed = m.keyedConcurrency;
  if (keyed !== undefined) {
    c.keyed = keyed;
    c.perKey = expandLabel(keyed.per, args);
  }
  // What the limiter found these args to count against (found again for new args).
  c.resourceLimits = undefined;
  c.buckets = undefined;
  c.groups = undefined;
}

/** `durationMs`: the attempt's, when it ended before now (its after_call hooks took the rest). */
export function succeed(
  s: SchedulerState,
  run: ScheduledRun,
  c: ScheduledCall,
  output: unknown,
  durationMs = s.now - (c.attemptStartedAt as number),
): void {
  transition(c, 'succeeded');
  c.output = output;
  emit(s, 'call.succeeded', run, c, { attempt: c.attempts, output, durationMs });
  ended(s, run, c);
  // Indexed loops over successor lists, here and in `release`: most are the shared frozen empty
  // list, which for…of iterates through the generic (allocating) iterator path, several times slower.
  const succ = c.dataSucc;
  for (let k = 0; k < succ.length; k++) {
    const t = run.calls[succ[k] as number] as ScheduledCall;
    t.dataWaiting--;
    if (t.dataWaiting === 0 && t.status === 'pending' && !t.armed) arm(s, run, t);
  }
}

/** The failure mode that applies to a call's failure: its tool's own `fail_fast`, else the run's. */
export function failureModeOf(run: ScheduledRun, c: ScheduledCall): FailureMode {
  return c.manifest?.failure === 'fail_fast' ? 'fail_fast' : run.failure;
}

/**
 * Fails a call; with `propagate`, the run's failure mode then applies to it. `durationMs`: the
 * attempt's, when it ended before now (as `succeed`).
 */
export function fail(
  s: SchedulerState,
  run: ScheduledRun,
  c: ScheduledCall,
  error: CallError,
  propagate: boolean,
  durationMs = s.now - (c.attemptStartedAt as number),
): void {
  const wasRunning = c.status === 'running';
  transition(c, 'failed');
  c.error = error;
  const pause = c.lastPause;
  emit(
    s,
    'call.failed',
    run,
    c,
    wasRunning
      ? pause
        ? { attempt: c.attempts, retryable: c.lastRetryable === true, durationMs, error, ...pause }
        : { attempt: c.attempts, retryable: c.lastRetryable === true, durationMs, error }
      : { error },
  );
  ended(s, run, c);
  if (propagate) applyFailureMode(s, run, c);
}

/** Fail-fast stops the run; partial and replan block what depends on the failed call. */
export function applyFailureMode(s: SchedulerState, run: ScheduledRun, c: ScheduledCall): void {
  const mode = failureModeOf(run, c);
  if (mode === 'fail_fast') {
    if (run.failFastBy === undefined && !run.cancelRequested) {
      run.failFastBy = c.id;
      stopRun(s, run, callError('cancelled', `the run failed fast: ${c.id} failed`, { callId: c.id }));
    }
  } else {
    if (mode === 'replan') run.replanFailures.push(c);
    blockDescendantsOf(s, run, c);
  }
}

export function block(s: SchedulerState, run: ScheduledRun, c: ScheduledCall, why: CallError, propagate: boolean): void {
  transition(c, 'blocked');
  c.error = why;
  emit(s, 'call.blocked', run, c, { blockedBy: why });
  ended(s, run, c);
  if (propagate) blockDescendantsOf(s, run, c);
}

/**
 * Blocks every call that depends on `root` through data or policy edges (or only `only`'s subtrees):
 * `dependency_failed` naming a failed root, `awaiting_replan` in replan mode, `dependency_blocked`
 * naming a blocked root.
 */
export function blockDescendantsOf(
  s: SchedulerState,
  run: ScheduledRun,
  root: ScheduledCall,
  only?: ScheduledCall[],
  reason?: CallError,
): void {
  const replan = root.status === 'failed' && run.failure === 'replan' && root.manifest?.failure !== 'fail_fast';
  const why: CallError =
    reason ??
    (root.status === 'failed'
      ? replan
        ? callError('awaiting_replan', `waits for a replan: ${root.id} failed`, { callId: root.id })
        : callError('dependency_failed', `${root.id} failed`, { callId: root.id })
      : callError('dependency_blocked', `${root.id} is ${root.status}`, { callId: root.id }));
  const stack = only ? [...only] : root.dataSucc.map((i) => run.calls[i] as ScheduledCall);
  while (stack.length > 0) {
    const c = stack.pop() as ScheduledCall;
    if (!isPending(c)) continue;
    block(s, run, c, why, false);
    for (const i of c.dataSucc) stack.push(run.calls[i] as ScheduledCall);
  }
}

export function cancelCall(s: SchedulerState, run: ScheduledRun, c: ScheduledCall, reason: CallError): void {
  transition(c, 'cancelled');
  c.error = reason;
  emit(s, 'call.cancelled', run, c, { reason });
  ended(s, run, c);
}

/** Cancels every call not started yet and aborts the running ones (cancel, fail-fast). */
export function stopRun(s: SchedulerState, run: ScheduledRun, reason: CallError): void {
  for (const c of run.calls) {
    if (c.status === 'running') {
      s.out.aborts.push({ runId: run.id, callId: c.id, attempt: c.attempts, reason });
    } else if (isPending(c)) {
      c.retrying = false;
      cancelCall(s, run, c, reason);
    }
  }
}

/** A call reached a final status: bookkeeping, and conflict successors may go once it is released. */
function ended(s: SchedulerState, run: ScheduledRun, c: ScheduledCall): void {
  c.endedAt = s.now;
  if (c.holds) s.limiter.dropWaiter(c);
  if (c.permitPending) {
    // It waited for a cluster-wide permit: what it held here is free; a late grant is given back.
    c.permitPending = false;
    s.limiter.release(c);
  }
  if (releasable(c)) release(s, run, c);
  markDirty(s, run);
}

/**
 * Releases an ended call and, after it, every ended call that waited only for it. A call that ends
 * without running waits for its data and policy predecessors too: the plan keeps one edge per pair,
 * so a hazard between two calls that also share a data edge is carried by that data edge alone, and
 * the conflict successors of the later call rely on it (a writer blocked early must not let the next
 * writer start while the earlier one still runs).
 */
export function release(s: SchedulerState, run: ScheduledRun, first: ScheduledCall): void {
  // Usually nothing cascades: the stack is only made when an ended successor becomes releasable.
  let stack: ScheduledCall[] | undefined;
  for (let c: ScheduledCall | undefined = first; c; c = stack?.pop()) {
    if (c.released) continue;
    c.released = true;
    const conflictSucc = c.conflictSucc;
    for (let k = 0; k < conflictSucc.length; k++) {
      const t = run.calls[conflictSucc[k] as number] as ScheduledCall;
      t.conflictWaiting--;
      if (t.conflictWaiting > 0) continue;
      if (isTerminal(t.status)) {
        if (releasable(t)) (stack ??= []).push(t);
      } else maybeReady(s, run, t);
    }
    const dataSucc = c.dataSucc;
    for (let k = 0; k < dataSucc.length; k++) {
      const t = run.calls[dataSucc[k] as number] as ScheduledCall;
      t.dataUnreleased--;
      if (isTerminal(t.status) && releasable(t)) (stack ??= []).push(t);
    }
  }
}

/**
 * A call ready but not started within its queue timeout (its tool's `queueTimeoutMs`, else
 * `defaults.queueTimeoutMs`) fails `queue_timeout` (DESIGN §4): it never reaches the tool, so the
 * model may simply ask again. The run's failure mode applies as to any failure.
 */
export function queueTimedOut(s: SchedulerState, run: ScheduledRun, c: ScheduledCall): void {
  const ms = (c.manifest?.queueTimeoutMs ?? s.opts.defaults.queueTimeoutMs) as number;
  const waited = c.attempts === 0 ? 'did not start' : `did not start attempt ${c.attempts + 1}`;
  fail(
    s,
    run,
    c,
    callError('queue_timeout', `${c.id} was ready for ${ms} ms and ${waited} (queueTimeoutMs); nothing ran`, {
      details: { queueTimeoutMs: ms },
    }),
    true,
  );
  markDirty(s, run);
}

/** How many attempts in all an idempotent tool without `retry` gets when its answers pause it (DESIGN §4). */
export const PAUSED_ATTEMPTS = 3;

export function mayRetry(c: ScheduledCall, r: { retryable?: boolean; pauseMs?: number }): boolean {
  const m = c.manifest as ToolManifest;
  // Backpressure: the call that got the pause is retried (after it) if its tool is idempotent.
  if (r.pauseMs !== undefined && m.idempotent) return c.attempts < (m.retry?.attempts ?? PAUSED_ATTEMPTS);
  return r.retryable === true && m.idempotent && m.retry !== undefined && c.attempts < m.retry.attempts;
}

/**
 * Backpressure (DESIGN §4): the attempt's answer asks that its tool be left alone for `pauseMs`: the
 * tool (or, with keyed concurrency, the call's keyed group) is paused until then, cluster-wide (the
 * shell shares `Output.pauses`); its waiting calls wait without spending attempts.
 */
export function pauseFor(s: SchedulerState, c: ScheduledCall, r: { pauseMs?: number; pauseStatus?: number }): void {
  if (r.pauseMs === undefined) return;
  c.lastPause = r.pauseStatus !== undefined ? { pauseMs: r.pauseMs, pauseStatus: r.pauseStatus } : { pauseMs: r.pauseMs };
  const p: Pause = { tool: c.tool, until: s.now + r.pauseMs };
  if (c.keyed !== undefined && c.perKey !== undefined) p.key = c.perKey;
  if (r.pauseStatus !== undefined) p.status = r.pauseStatus;
  if (!pauseTool(s, p, c.runId)) return;
  (s.out.pauses ??= []).push(p);
}

export function scheduleRetry(
  s: SchedulerState,
  run: ScheduledRun,
  c: ScheduledCall,
  r: { error: CallError; retryAfterMs?: number; pauseMs?: number; pauseStatus?: number },
): void {
  const m = c.manifest as ToolManifest;
  const backoff = m.retry ? backoffDelay(m.retry, run.id, c.id, c.attempts) : 0;
  const delay = Math.max(backoff, r.retryAfterMs ?? 0, r.pauseMs ?? 0);
  transition(c, 'pending');
  c.retrying = true;
  const at = s.now + delay;
  emit(s, 'call.retry_scheduled', run, c, {
    attempt: c.attempts + 1,
    at,
    delayMs: delay,
    error: r.error,
    durationMs: s.now - (c.attemptStartedAt as number),
    ...(r.retryAfterMs !== undefined ? { retryAfterMs: r.retryAfterMs } : {}),
    ...(r.pauseMs !== undefined ? { pauseMs: r.pauseMs } : {}),
    ...(r.pauseStatus !== undefined ? { pauseStatus: r.pauseStatus } : {}),
  });
  s.timers.push({ at, seq: s.timerSeq++, runId: run.id, index: c.index });
}
