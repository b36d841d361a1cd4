/**
 * What the scheduler takes and gives (its inputs carry the time; its outputs are what the shell must
 * do), and its one error. The `Scheduler` front (scheduler.ts) is the only thing that takes these.
 */
import type { AttemptFailure } from '../outcome.js';
import type { CallInput } from '../calls.js';
import type { CallError } from '../errors.js';
import type { CoreEvent, EventPayloads } from '../events.js';
import type { HookMatcher, HookRequest } from '../hooks.js';
import type { Catalog, Defaults, FailureMode, Limits, Policy, ToolManifest } from '../tool.js';
import type { Pause } from '../limits.js';

export interface SchedulerOptions {
  catalog: Catalog;
  policy: Policy;
  limits: Limits;
  defaults: Defaults;
  /** Hooks (DESIGN §14): which calls wait for a `before_call` or `after_call` decision. */
  hooks?: readonly HookMatcher[];
  /**
   * Explain why ready calls wait: a `call.waiting` event when what refuses a call changes, and
   * `Scheduler.limitsInUse()` (DESIGN §7). The live engine turns it on; replay and tests of the
   * schedule alone leave it off (default), and the schedule is the same either way.
   */
  explainWaits?: boolean;
  /**
   * Several replicas (DESIGN §12): a call that every local limit lets start is not started yet but
   * asks for a cluster-wide permit (`Output.permits`); the shell answers with `permitGranted` or
   * `permitRefused`. Off, calls start at once, as always.
   */
  gated?: boolean;
}

/** A call that asks for a cluster-wide permit: what every shared limit and lock counts of it. */
export interface PermitRequest {
  runId: string;
  callId: string;
  tenant: string;
  tool: string;
  /** The lock domain: `global`, `tenant:<t>`, or null (run-scoped). */
  domain: string | null;
  reads: readonly string[];
  writes: readonly string[];
  /** A tool with keyed concurrency (DESIGN §4): its `per` template expanded against the call's args. */
  perKey?: string;
  /** The run's priority, 1 (most urgent) to 5; absent: 3 (DESIGN §4: waiters of a cluster counter go by it). */
  priority?: number;
  /** How long the run has had ready calls (ms): its age for priority aging and its place in line. */
  readyMs?: number;
}

export interface SubmitOptions {
  runId: string;
  tenant: string;
  calls: readonly CallInput[];
  failure?: FailureMode;
  tags?: Record<string, string>;
  /** Mean duration per tool to rank calls by; defaults to what this scheduler has learned. */
  estimates?: Record<string, number>;
  /** Extra fields for the `run.created` event (an idempotency key). */
  meta?: Pick<EventPayloads['run.created'], 'idempotencyKey' | 'traceparent' | 'concurrencyKey'>;
  /** A streamed run (DESIGN §10): more calls come with `append`, until `seal` or the open-run timeout. */
  open?: boolean;
  /** 1 (most urgent) to 5; default 3 (DESIGN §4, dispatch.ts). */
  priority?: number;
  /** One run per key (DESIGN §4): the run waits `queued`, its calls not planned, until `release`. */
  held?: boolean;
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
  /** Gated: the call holds a cluster-wide permit (given back when the attempt ends). */
  permit?: true;
  /**
   * A call of a `client` tool (DESIGN §17): the token its `call.started` carries. Set by the engine
   * (the shell makes the token), never by the core.
   */
  dispatch?: { token: string };
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
  /** Hooks to run (only when `SchedulerOptions.hooks` has some): answer each with `hookDecided`. */
  hooks?: HookRequest[];
  /** Gated only (`SchedulerOptions.gated`): calls that wait for a cluster-wide permit. */
  permits?: PermitRequest[];
  /**
   * Backpressure (DESIGN §4): tools (or keyed groups) that this step paused, for the shell to share
   * with other replicas (which tell their schedulers with `Scheduler.paused`).
   */
  pauses?: Pause[];
}

export type AttemptResult = { ok: true; output: unknown } | AttemptFailure;

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
export class SchedulerError extends Error {
  constructor(
    readonly code: 'run_not_found' | 'call_not_found' | 'conflict' | 'invalid_args',
    message: string,
  ) {
    super(message);
  }
}

/** Throws `conflict` for an id used twice in `calls`, or already in the run (`taken`). */
export function assertUniqueIds(calls: readonly CallInput[], taken: ReadonlyMap<string, unknown> | undefined, runId: string): void {
  const seen = new Set<string>();
  for (const c of calls) {
    if (taken?.has(c.id) || seen.has(c.id)) throw new SchedulerError('conflict', `call id ${c.id} is used in run ${runId} already`);
    seen.add(c.id);
  }
}
