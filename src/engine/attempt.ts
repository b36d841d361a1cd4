/**
 * What the engine keeps of one attempt it runs (`Attempt`, the request an executor gets), and the small
 * helpers the engine and its commit pipeline share to take outputs apart.
 */
import { randomUUID } from 'node:crypto';
import type { RunEvent } from '../core/events.js';
import type { AbortAttempt, HookRequest, Output, StartAttempt } from '../core/scheduler.js';
import type { CallView, RunView } from '../core/view.js';
import type { ExecuteRequest } from '../executors/types.js';

/** `call`: the view of the event's call, when it has one (so a listener need not search `view.calls`). */
export type RunListener = (event: RunEvent, view: RunView, call: CallView | undefined) => void;

/**
 * A running attempt, as the executor gets it (an `ExecuteRequest`) and as the engine aborts it. Its
 * AbortController is made only when the executor first reads `signal`: an instant tool (the builtin
 * `echo`) never does, and an AbortController is one of the dearest things a launch would make. An abort
 * before that is kept, and the signal is born aborted with the same reason.
 */
export class Attempt implements ExecuteRequest {
  readonly runId: string;
  readonly callId: string;
  readonly tool: StartAttempt['tool'];
  readonly args: Record<string, unknown>;
  readonly attempt: number;
  readonly timeoutMs: number;
  /** Started early and still counted in `earlyRunning` (see `Engine.flushSoon`). */
  early = false;
  private controller: AbortController | undefined;
  private fired: { reason: unknown } | undefined;

  constructor(s: StartAttempt) {
    this.runId = s.runId;
    this.callId = s.callId;
    this.tool = s.tool;
    this.args = s.args;
    this.attempt = s.attempt;
    this.timeoutMs = s.timeoutMs;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.fired) this.controller.abort(this.fired.reason);
    }
    return this.controller.signal;
  }

  aborted(): boolean {
    return this.fired !== undefined;
  }

  abort(reason?: unknown): void {
    if (this.fired) return;
    this.fired = { reason };
    this.controller?.abort(reason);
  }
}

/**
 * Whether a grouped submission starts this attempt before its `call.started` is stored: a call (not a
 * compensation) of the run just submitted, whose tool is idempotent. Such a call has no predecessor in
 * its run yet (it is ready at submission), and a crash before the commit loses nothing (the run was
 * never accepted; once it is, a running idempotent call is re-run on restart). A non-idempotent call
 * keeps write-ahead: its effect must never happen without its `call.started` stored first.
 */
export function startsEarly(s: StartAttempt, runId: string): boolean {
  return s.kind === 'call' && s.runId === runId && s.tool.idempotent;
}

export function merge(into: Output, out: Output): void {
  into.events.push(...out.events);
  into.starts.push(...out.starts);
  into.aborts.push(...out.aborts);
  if (out.hooks) (into.hooks ??= []).push(...out.hooks);
  if (out.permits) (into.permits ??= []).push(...out.permits);
}

/** Resolves when `p` does, or after `ms`, whichever comes first. */
export function within(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]).finally(() => clearTimeout(timer));
}

/** Takes a run's events, starts, aborts and hooks out of an output; returns the starts taken (early ones too). */
export function strip<E extends { runId: string }>(
  q: {
    events: E[];
    starts: readonly StartAttempt[];
    aborts: readonly AbortAttempt[];
    early?: readonly StartAttempt[];
    hooks?: readonly HookRequest[];
  },
  runId: string,
): StartAttempt[] {
  const taken = [...(q.early ?? []), ...q.starts].filter((s) => s.runId === runId);
  q.events = q.events.filter((e) => e.runId !== runId);
  q.starts = q.starts.filter((s) => s.runId !== runId);
  q.aborts = q.aborts.filter((a) => a.runId !== runId);
  if (q.early) q.early = q.early.filter((s) => s.runId !== runId);
  if (q.hooks) q.hooks = q.hooks.filter((h) => h.runId !== runId);
  return taken;
}

export function attemptKey(runId: string, callId: string, attempt: number, kind: 'call' | 'compensation'): string {
  return `${kind}/${runId}/${callId}/${attempt}`;
}

export function tell(listener: RunListener, e: RunEvent, view: RunView, call: CallView | undefined): void {
  try {
    listener(e, view, call);
  } catch {
    // A listener cannot throw into the engine.
  }
}

export function newRunId(): string {
  // The first 20 hex digits of a random UUID (which is 8-4-4-4-12), without a regex per run.
  const u = randomUUID();
  return `run_${u.slice(0, 8)}${u.slice(9, 13)}${u.slice(14, 18)}${u.slice(19, 23)}`;
}
