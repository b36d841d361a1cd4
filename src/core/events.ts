/**
 * The events the core emits (DESIGN §7), each type with its payload. The shell numbers them (`seq`,
 * gapless per run), persists them, and streams them; a run's view is derived from them alone (see
 * view.ts). `CoreEvent` is a discriminated union on `type`: a `switch (e.type)` narrows `e.data` to
 * that type's payload, so nothing that reads an event needs a cast. What is read back from outside
 * the process (a store, a file) is checked against event-schema.ts, which is held to these types.
 */
import type { CallInput, Diagnostic, Edge, RunStatus } from './calls.js';
import type { CallError } from './errors.js';
import type { HookDecision, HookOn } from './hooks.js';
import type { FailureMode } from './tool.js';
import type { WaitReason } from './waiting.js';

/** Why a run waits for a replan (`run.needs_replan`, and the run's view). */
export interface ReplanContext {
  failed: { callId: string; error: CallError }[];
  waiting: string[];
  sideEffects: string[];
}

/**
 * How a start waited for what lay outside its run (DESIGN §8: a recording holds every outside delay),
 * on `call.started` when it waited for any: replay under the recording's own config holds the start
 * back as long (outside.ts).
 */
export interface StartWait {
  /** When the attempt joined its run's ready set. */
  since: number;
  /** Gated (DESIGN §12): when the cluster was asked for its permit (the start is the grant). */
  asked?: number;
  /**
   * From `since` to when its local limits let it go (`asked`, else the start), it may have waited for
   * what it could not see alone: calls of other runs, a cluster that refused its permit, a timer that
   * fired late. Without it, that wait was its own run's (replay recomputes it).
   */
  outside?: true;
}

/** Edges and diagnostics a planning step added (a batch, a replan, a streamed step). */
export interface PlanStepData {
  edges: Edge[];
  diagnostics: Diagnostic[];
}

/** The payload of each event type. */
export interface EventPayloads {
  /** `calls` is empty for a streamed (`open`) run: they arrive with `run.calls_added`. */
  'run.created': {
    tenant: string;
    failure: FailureMode;
    tags: Record<string, string>;
    calls: CallInput[];
    estimates: Record<string, number>;
    open?: true;
    /** From `SubmitOptions.meta` (the engine's idempotency key). */
    idempotencyKey?: string;
    /** From `SubmitOptions.meta`: one run per key (DESIGN §4); the store finds a key's runs by it. */
    concurrencyKey?: string;
    /** The run waits `queued` behind an earlier run of its concurrency key; `run.started` releases it. */
    held?: true;
    /** 1 (most urgent) to 5, when the submission gave one (DESIGN §4); none: 3. */
    priority?: number;
    /**
     * From `SubmitOptions.meta`, with tracing on: the W3C `traceparent` the run's trace continues, so
     * that a run resumed elsewhere (a takeover, a restart) goes on in the same trace (DESIGN §15).
     */
    traceparent?: string;
  };
  /** `released`: a held run (`run.created`'s `held`) starts now: it is `running` from here. */
  'run.started': PlanStepData & { generations: string[][]; released?: true };
  'call.ready': Record<string, never>;
  /**
   * `dispatch`: a call of a `client` tool (DESIGN §17): the token the agent answers this attempt with
   * (set by the engine, which makes it; the core never does).
   */
  'call.started': { attempt: number; args: Record<string, unknown>; dispatch?: { token: string }; waited?: StartWait };
  'call.retry_scheduled': {
    /** The attempt the retry will be. */
    attempt: number;
    /** When the backoff ends. */
    at: number;
    delayMs: number;
    error: CallError;
    durationMs: number;
    retryAfterMs?: number;
    /** Backpressure (DESIGN §4): the failed attempt's answer paused its tool this long (ms). */
    pauseMs?: number;
    /** The HTTP status that asked for the pause. */
    pauseStatus?: number;
  };
  'call.succeeded': { attempt: number; output: unknown; durationMs: number };
  /** The attempt fields are there when an attempt ended this way (not a plan-time or review failure). */
  /** `pauseMs`, `pauseStatus`: the attempt's answer paused its tool (backpressure, DESIGN §4). */
  'call.failed': { error: CallError; attempt?: number; retryable?: boolean; durationMs?: number; pauseMs?: number; pauseStatus?: number };
  'call.blocked': { blockedBy: CallError };
  'call.cancelled': { reason: CallError };
  'call.awaiting_review': { reason: string; args: Record<string, unknown> };
  /** Without `startedAt` the compensation never started (no such tool, unresolvable args). */
  'call.compensated':
    | { status: 'succeeded'; output: unknown; startedAt: number }
    | { status: 'failed'; error: CallError; startedAt?: number };
  /**
   * One hook's decision (DESIGN §14); `startedAt` is when the hook was called, `askedAt` when the
   * scheduler asked for the call's hooks (for `after_call`, the end of its attempt, whose places were
   * given back then: a recording ends the attempt there). Events stored before it was kept lack it.
   */
  'call.hook': HookDecision & { on: HookOn; askedAt?: number };
  /** A ready call's wait changed: what refused it now (empty: nothing names it any more). */
  'call.waiting': { waitingFor: WaitReason[] };
  'review.decided': { decision: 'approve' | 'reject' | 'edit'; args?: Record<string, unknown>; comment?: string };
  'run.needs_replan': { replanContext: ReplanContext };
  'run.replanned': PlanStepData & { calls: CallInput[]; generations: string[][] };
  'run.completed': { status: RunStatus; cancelledAt?: number; diagnostics?: Diagnostic[] };
  'run.calls_added': PlanStepData & { calls: CallInput[] };
  'run.sealed': PlanStepData & { generations: string[][]; reason?: 'openRunTimeoutMs' };
  /**
   * The run was taken back from its events (DESIGN §8, §12): by another replica once its owner's lease
   * lapsed, or after a restart. What ran when the owner stopped was lost with it; what follows is the
   * new owner's. A recording keeps the time, so replay resumes the run where the recording did.
   */
  'run.resumed': Record<string, never>;
  /**
   * Backpressure from outside the run (DESIGN §4, §8): a tool, or one keyed group of it (`key`), was
   * paused until `until` (the scheduler's clock) by another run's answer, another replica's pause, or
   * a cluster refusal, while the run had calls of that tool. A recording keeps it, so replay pauses
   * the tool at the same time (an answer of the run's own is replayed from its attempt instead).
   */
  'run.tool_paused': { tool: string; key?: string; until: number; status?: number };
}

export type EventType = keyof EventPayloads;

/** Every event type, in the order DESIGN §7 lists them. */
export const EVENT_TYPES = [
  'run.created',
  'run.started',
  'call.ready',
  'call.started',
  'call.retry_scheduled',
  'call.succeeded',
  'call.failed',
  'call.blocked',
  'call.cancelled',
  'call.awaiting_review',
  'call.compensated',
  'call.hook',
  'call.waiting',
  'review.decided',
  'run.needs_replan',
  'run.replanned',
  'run.completed',
  'run.calls_added',
  'run.sealed',
  'run.resumed',
  'run.tool_paused',
] as const satisfies readonly EventType[];

// Every type is listed: a type missing from EVENT_TYPES makes this `false`, which fails to compile.
const everyTypeListed: Exclude<EventType, (typeof EVENT_TYPES)[number]> extends never ? true : false = true;
void everyTypeListed;

/** One event of type `T`. */
export interface EventOf<T extends EventType> {
  type: T;
  runId: string;
  callId?: string;
  /** The scheduler's clock: epoch ms in the live engine, virtual ms in replay. */
  at: number;
  data: EventPayloads[T];
}

/** Any event: narrow it with `e.type`. */
export type CoreEvent = { [T in EventType]: EventOf<T> }[EventType];

/** A persisted event. */
export type RunEvent = CoreEvent & { seq: number };

const TYPES: ReadonlySet<string> = new Set(EVENT_TYPES);

export function isEventType(type: string): type is EventType {
  return TYPES.has(type);
}

/**
 * `e` numbered: field by field, in the order `{ seq, ...e }` gives (a spread is a generic copy, and
 * this runs for every event).
 */
export function withSeq(e: CoreEvent, seq: number): RunEvent {
  // Each field is e's own, so `type` and `data` still belong together; the compiler cannot follow a
  // union through a copy field by field, hence the one assertion.
  return (
    e.callId === undefined
      ? { seq, type: e.type, runId: e.runId, at: e.at, data: e.data }
      : { seq, type: e.type, runId: e.runId, callId: e.callId, at: e.at, data: e.data }
  ) as RunEvent;
}

/** An event as a store keeps it: the payload as the JSON text that was written. */
export interface StoredEventFields {
  seq: number;
  type: string;
  runId: string;
  callId: string | null;
  at: number;
  data: string;
}

/**
 * An event read back from a store. The store checked it against the log's rules when it was written
 * (store/batch.ts), from a typed event; what interprets a whole log again (restore) checks it against
 * the schema too (event-schema.ts). Here only the type is checked, on every read.
 */
export function storedEvent(r: StoredEventFields): RunEvent {
  if (!isEventType(r.type)) throw new Error(`event ${r.seq} of run ${r.runId} has an unknown type ${JSON.stringify(r.type)}`);
  const data: unknown = JSON.parse(r.data);
  // The payload is taken on trust (see above): the one assertion of the read path.
  return (
    r.callId === null
      ? { seq: r.seq, type: r.type, runId: r.runId, at: r.at, data }
      : { seq: r.seq, type: r.type, runId: r.runId, callId: r.callId, at: r.at, data }
  ) as RunEvent;
}
