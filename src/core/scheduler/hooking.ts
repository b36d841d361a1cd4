/**
 * Hook decisions (DESIGN §14): what the shell's answer to a `HookRequest` (hook-requests.ts) does to
 * the call. Each decision is a `call.hook` event first, so the log (and a recording) holds it, and
 * replay applies the same decisions without calling any hook.
 *
 * - `before_call` (the call is `ready`, out of the ready set, holding no permit): the first `deny` fails
 *   it with `hook_denied`; new `args` are checked again (`args_too_large` past `limits.maxArgsBytes`,
 *   else `invalid_args`) and must stay within the
 *   resources the graph was planned on (`hook_changed_resources`); a `review` sends it to human review;
 *   otherwise it joins the ready set. It runs once per call: retries and reviews do not ask again.
 * - `after_call` (the call is still `running`, its permits given back, its attempt's outcome held):
 *   on a succeeded attempt a `fail` fails the call with `hook_rejected`, and a `replace` replaces the
 *   output that dependents and the results see; on a failed one the hooks only observe.
 */
import { callError } from '../errors.js';
import { escapedKeys, type HookAnswer, type HookDecision } from '../hooks.js';
import { checkArgsSize } from '../references.js';
import { accessOf } from '../resources.js';
import { DEFAULT_MAX_ARGS_BYTES, outputChecked } from '../size.js';
import { transition } from '../state.js';
import type { ToolManifest } from '../tool.js';
import type { AttemptResult } from './api.js';
import { enqueueReady } from './dispatch.js';
import { askHooks } from './hook-requests.js';
import { fail, setResolved, succeed } from './progress.js';
import { emit, markDirty, type ScheduledCall, type ScheduledRun, type SchedulerState } from './records.js';

/**
 * An attempt's final outcome (no retry follows): held for the call's `after_call` hooks when some
 * match, else applied at once. `propagate`: whether a failure applies the run's failure mode.
 */
export function attemptSettled(s: SchedulerState, run: ScheduledRun, c: ScheduledCall, r: AttemptResult, propagate: boolean): void {
  const durationMs = s.now - (c.attemptStartedAt as number);
  // The request's outcome is made only when hooks are configured: most schedulers have none.
  const hooks = s.opts.hooks;
  const asked =
    hooks !== undefined &&
    hooks.length > 0 &&
    askHooks(s, run, c, 'after_call', r.ok ? { status: 'succeeded', output: r.output } : { status: 'failed', error: r.error });
  if (asked) c.outcome = { result: r, propagate, durationMs };
  else settle(s, run, c, r, propagate, durationMs);
}

function settle(s: SchedulerState, run: ScheduledRun, c: ScheduledCall, r: AttemptResult, propagate: boolean, durationMs: number): void {
  run.running--;
  if (r.ok) succeed(s, run, c, r.output, durationMs);
  else fail(s, run, c, r.error, propagate, durationMs);
}

/** Applies the shell's answer; an answer for a call that no longer waits for it (cancelled…) is dropped. */
export function hookDecided(s: SchedulerState, a: HookAnswer): void {
  const run = s.runs.get(a.runId);
  if (!run) return;
  const hint = a.index === undefined ? undefined : run.calls[a.index];
  const idx = hint !== undefined && hint.id === a.callId ? hint.index : run.byId.get(a.callId);
  const c = idx === undefined ? undefined : run.calls[idx];
  if (!c || c.hookPending !== a.on || c.status !== (a.on === 'before_call' ? 'ready' : 'running')) return;
  c.hookPending = undefined;
  const asked = c.hookAskedAt === undefined ? {} : { askedAt: c.hookAskedAt };
  c.hookAskedAt = undefined;
  for (const d of a.decisions) emit(s, 'call.hook', run, c, { on: a.on, ...asked, ...d });
  if (a.on === 'before_call') beforeDecided(s, run, c, a.decisions);
  else afterDecided(s, run, c, a.decisions);
  markDirty(s, run);
}

function beforeDecided(s: SchedulerState, run: ScheduledRun, c: ScheduledCall, decisions: readonly HookDecision[]): void {
  c.hooked = true;
  let stop: HookDecision | undefined;
  let rewrite: HookDecision | undefined;
  for (const d of decisions) {
    if (d.args) rewrite = d;
    if (d.decision === 'deny' || d.decision === 'review') {
      stop = d;
      break;
    }
  }
  if (stop?.decision === 'deny') {
    const why = stop.reason ?? `denied by hook ${stop.hook}`;
    fail(s, run, c, callError('hook_denied', `${c.id}: ${why}`, { details: { hook: stop.hook } }), true);
    return;
  }
  if (rewrite?.args) {
    const args = rewrite.args;
    const m = c.manifest as ToolManifest;
    // Past the cap first, with its own code (DESIGN §4: caps apply wherever a value enters).
    const big = checkArgsSize(args, s.opts.limits.maxArgsBytes ?? DEFAULT_MAX_ARGS_BYTES);
    if (big) {
      const error = callError('args_too_large', `${c.id}: the args of hook ${rewrite.hook}: ${big.message}`, {
        details: { ...(big.details as object), tool: c.tool, hook: rewrite.hook },
      });
      fail(s, run, c, error, true);
      return;
    }
    const problem = s.opts.catalog.checkArgs(c.tool, args);
    if (problem) {
      fail(
        s,
        run,
        c,
        callError('invalid_args', `${c.id}: the args of hook ${rewrite.hook}: ${problem}`, {
          details: { tool: c.tool, hook: rewrite.hook },
        }),
        true,
      );
      return;
    }
    const escaped = escapedKeys(c.planAccess ?? accessOf(m, c.args), accessOf(m, args));
    const outside = [...escaped.writes.map((k) => `writes ${k}`), ...escaped.reads.map((k) => `reads ${k}`)];
    if (outside.length > 0) {
      const message = `${c.id}: the args of hook ${rewrite.hook} reach resources the graph was not planned on (${outside.join(', ')})`;
      fail(s, run, c, callError('hook_changed_resources', message, { details: { hook: rewrite.hook, ...escaped } }), true);
      return;
    }
    c.hookArgs = args;
    setResolved(run, c, args);
  }
  if (stop?.decision === 'review') {
    c.review = stop.reason !== undefined ? `hook ${stop.hook}: ${stop.reason}` : `hook ${stop.hook} asks for review`;
    c.reviewed = false;
    transition(c, 'awaiting_review');
    emit(s, 'call.awaiting_review', run, c, { reason: c.review, args: c.resolved as Record<string, unknown> });
    return;
  }
  enqueueReady(s, run, c);
}

function afterDecided(s: SchedulerState, run: ScheduledRun, c: ScheduledCall, decisions: readonly HookDecision[]): void {
  const held = c.outcome as NonNullable<ScheduledCall['outcome']>;
  c.outcome = undefined;
  let r = held.result;
  if (r.ok) {
    for (const d of decisions) {
      if (d.decision === 'fail') {
        const why = d.fail?.message ?? d.reason ?? `rejected by hook ${d.hook}`;
        r = { ok: false, error: callError('hook_rejected', `${c.id}: ${why}`, { details: { hook: d.hook } }), retryable: false };
        break;
      }
      if (d.decision === 'replace') r = outputChecked({ ok: true, output: d.output }, c, s.opts.limits.maxOutputBytes);
      if (!r.ok) break;
    }
  }
  settle(s, run, c, r, held.propagate, held.durationMs);
}
