/**
 * Runs and attempts as spans (DESIGN §15), made from the engine's events by a listener
 * (`Engine.onEvent`): `run.created` starts the run span `toolgraph.run`, `call.started` an attempt's
 * span `execute_tool <tool>` (a direct child of the run span), the attempt's end (`call.succeeded`,
 * `call.failed`, `call.retry_scheduled`, `call.cancelled`) ends it, `run.completed` ends the run span.
 * Times are the events' own (`at`), so the spans say what the event log says.
 *
 * The executor side (`traceparentFor`, through `Tracing.instrument`) hands each attempt its span's
 * W3C `traceparent`. An attempt usually starts after its `call.started` is published, so its span is
 * there already; an idempotent call of a grouped submission starts before (the engine's early start),
 * and then the span is started here, and `call.started` finds it. A compensation's span is made here
 * too (its attempt has no `call.started`) and ends with `call.compensated`.
 *
 * Loaded only with tracing on (it imports OpenTelemetry).
 */
import { hash, randomFillSync } from 'node:crypto';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type HrTime, type Span, type Tracer } from '@opentelemetry/api';
import { parseTraceParent } from '@opentelemetry/core';
import type { CallError } from '../core/errors.js';
import type { EventOf, RunEvent } from '../core/events.js';
import type { CallView, RunView } from '../core/view.js';
import { newRunId, type RunListener } from '../engine/engine.js';
import type { ExecuteRequest } from '../executors/types.js';
import { ATTR, EXECUTE_TOOL, LIMIT_WAIT_EVENT, RUN_SPAN, attemptSpanName, runFailed } from './attributes.js';

/** The call events that start, end or time an attempt's span: the others make no span, and are passed over. */
const CALL_EVENTS: ReadonlySet<RunEvent['type']> = new Set<RunEvent['type']>(['call.ready', 'call.hook', 'call.started', 'call.succeeded', 'call.failed', 'call.retry_scheduled', 'call.cancelled', 'call.compensated']);
/** At most this many tools' span names are kept (one string per tool, not one per span). */
const MAX_SPAN_NAMES = 1000;

/** How long a run id reserved by `continueTrace` (or seen first by the executor) may wait for its `run.created`. */
const PENDING_MS = 60_000;
/** At most this many needs_replan runs keep their trace for a replan (the oldest are let go). */
const MAX_AWAITING_REPLAN = 10_000;

interface OpenAttempt {
  n: number;
  span: Span;
}

interface CallTrace {
  /** When the call last became ready (`call.ready`), until its attempt starts. */
  readyAt?: number;
  open?: OpenAttempt;
  /** The call succeeded: an attempt that comes later is its compensation. */
  succeeded?: boolean;
  compensation?: Span;
}

interface RunTrace {
  /** The incoming context (a `traceparent`), or the root. */
  parent: Context;
  span?: Span;
  /** `parent` with `span` in it: the attempts' parent. */
  ctx?: Context;
  /** The run span ended (with `needs_replan`): a replan starts another. */
  ended: boolean;
  tenant?: string;
  calls: Map<string, CallTrace>;
}

export class RunTraces {
  private readonly runs = new Map<string, RunTrace>();
  /** Runs known before their `run.created` (reserved, or started early), with when: see `sweep`. */
  private readonly pending = new Map<string, number>();
  private readonly awaitingReplan = new Map<string, true>();
  private readonly names = new Map<string, string>();

  readonly listener: RunListener = (e, view, call) => this.on(e, view, call);

  constructor(
    private readonly tracer: Pick<Tracer, 'startSpan'>,
    private readonly now: () => number = Date.now,
    /** The tracer's id generator (see `RunTraceIds`): how a run's trace id follows from its run id. */
    private readonly ids?: RunTraceIds,
  ) {}

  /** A run resumed from its events: its spans go on in the trace it began in (see `RunTraceIds`). */
  resumed(created: RunEvent): void {
    if (this.runs.has(created.runId) || created.type !== 'run.created') return;
    const tp = created.data.traceparent;
    const sc = tp === undefined ? undefined : parseTraceParent(tp);
    const run = newRun(sc ? trace.setSpanContext(ROOT_CONTEXT, { ...sc, isRemote: true }) : ROOT_CONTEXT);
    run.tenant = created.data.tenant;
    this.runs.set(created.runId, run);
  }

  /** Reserves a run id whose run span is a child of `traceparent`; undefined for an invalid one. */
  continueTrace(traceparent: string): string | undefined {
    const sc = parseTraceParent(traceparent);
    if (!sc) return undefined;
    const runId = newRunId();
    this.runs.set(runId, newRun(trace.setSpanContext(ROOT_CONTEXT, { ...sc, isRemote: true })));
    this.expect(runId);
    return runId;
  }

  /** The `traceparent` of the attempt's span (started here if its `call.started` is still to come). */
  traceparentFor(req: ExecuteRequest): string {
    let run = this.runs.get(req.runId);
    if (!run) {
      run = newRun(ROOT_CONTEXT);
      this.runs.set(req.runId, run);
      this.expect(req.runId);
    }
    const c = callOf(run, req.callId);
    const at = this.now();
    let span: Span;
    if (c.succeeded) {
      c.compensation?.end(hrTime(at));
      span = c.compensation = this.startAttempt(req.runId, run, { callId: req.callId, tool: req.tool.name, n: req.attempt, at, compensation: true });
    } else if (c.open?.n === req.attempt) span = c.open.span;
    else {
      endAttempt(c, at);
      span = this.startAttempt(req.runId, run, { callId: req.callId, tool: req.tool.name, n: req.attempt, at });
      c.open = { n: req.attempt, span };
    }
    const sc = span.spanContext();
    return `00-${sc.traceId}-${sc.spanId}-${sc.traceFlags & 1 ? '01' : '00'}`;
  }

  /** How many runs are traced now (for tests). */
  get size(): number {
    return this.runs.size;
  }

  private on(e: RunEvent, view: RunView, call: CallView | undefined): void {
    if (e.type === 'run.created') return this.created(e);
    if (e.callId !== undefined && !CALL_EVENTS.has(e.type)) return;
    let run = this.runs.get(e.runId);
    if (!run) {
      // A run resumed after a restart (its events start midway), unless `resumed` told of it: its
      // trace id follows from its run id all the same (see `RunTraceIds`).
      if (e.type !== 'run.completed' && view.endedAt !== null && view.status !== 'needs_replan') return;
      run = newRun(ROOT_CONTEXT);
      run.tenant = view.tenant;
      this.runs.set(e.runId, run);
    }
    if (e.callId === undefined) {
      if (e.type === 'run.completed') this.completed(e, run);
      else if (e.type === 'run.replanned') this.replanned(e, run);
      return;
    }
    const c = callOf(run, e.callId);
    switch (e.type) {
      case 'call.ready':
        c.readyAt = e.at;
        break;
      case 'call.hook':
        // Hook time is not a wait for limits (DESIGN §14): the wait starts once before_call decided.
        if (e.data.on === 'before_call') c.readyAt = e.at;
        break;
      case 'call.started':
        this.started(e, run, c, call);
        break;
      case 'call.succeeded':
        c.succeeded = true;
        endAttempt(c, e.at);
        break;
      case 'call.failed':
      case 'call.retry_scheduled':
        endAttempt(c, e.at, e.data.error);
        break;
      case 'call.cancelled':
        endAttempt(c, e.at, e.data.reason);
        break;
      case 'call.compensated':
        if (c.compensation) {
          const failed = e.data.status === 'failed' ? e.data.error : undefined;
          if (failed) markError(c.compensation, failed);
          c.compensation.end(hrTime(e.at));
          c.compensation = undefined;
        }
        break;
      default:
        break;
    }
  }

  private created(e: EventOf<'run.created'>): void {
    let run = this.runs.get(e.runId);
    if (!run) {
      run = newRun(ROOT_CONTEXT);
      this.runs.set(e.runId, run);
    }
    this.pending.delete(e.runId);
    run.tenant = e.data.tenant;
    if (run.span) run.span.setAttribute(ATTR.tenant, run.tenant);
    else this.runSpan(e.runId, run, e.at);
    this.sweep();
  }

  private started(e: EventOf<'call.started'>, run: RunTrace, c: CallTrace, call: CallView | undefined): void {
    const n = e.data.attempt;
    const waitMs = c.readyAt === undefined ? 0 : Math.max(0, e.at - c.readyAt);
    let span = c.open?.n === n ? c.open.span : undefined;
    if (span) span.setAttribute(ATTR.waitMs, waitMs);
    else {
      endAttempt(c, e.at);
      span = this.startAttempt(e.runId, run, { callId: e.callId as string, tool: call?.tool ?? 'unknown', n, at: e.at, waitMs });
      c.open = { n, span };
    }
    if (waitMs > 0) span.addEvent(LIMIT_WAIT_EVENT, { [ATTR.waitMs]: waitMs }, hrTime(c.readyAt as number));
    c.readyAt = undefined;
  }

  private completed(e: EventOf<'run.completed'>, run: RunTrace): void {
    const status = e.data.status;
    const span = run.span;
    if (span && !run.ended) {
      span.setAttribute(ATTR.runStatus, status);
      if (runFailed(status)) span.setStatus({ code: SpanStatusCode.ERROR, message: `the run ${status}` });
      span.end(hrTime(e.at));
      run.ended = true;
    }
    if (status !== 'needs_replan') {
      this.runs.delete(e.runId);
      this.awaitingReplan.delete(e.runId);
      return;
    }
    this.awaitingReplan.set(e.runId, true);
    if (this.awaitingReplan.size > MAX_AWAITING_REPLAN) {
      const oldest = this.awaitingReplan.keys().next().value as string;
      this.awaitingReplan.delete(oldest);
      this.runs.delete(oldest);
    }
  }

  /** A replan after `needs_replan`: the run goes on in a new run span, linked to the one that ended. */
  private replanned(e: RunEvent, run: RunTrace): void {
    this.awaitingReplan.delete(e.runId);
    if (!run.ended) return;
    const previous = run.span?.spanContext();
    run.span = undefined;
    run.ended = false;
    this.runSpan(e.runId, run, e.at, { [ATTR.replanned]: true }, previous);
  }

  private runSpan(runId: string, run: RunTrace, at: number, extra?: Attributes, link?: ReturnType<Span['spanContext']>): Span {
    const attributes: Attributes = { [ATTR.runId]: runId, ...extra };
    if (run.tenant !== undefined) attributes[ATTR.tenant] = run.tenant;
    // A run span without an incoming parent is a trace's root: its trace id is the run's own.
    if (this.ids && trace.getSpanContext(run.parent) === undefined) this.ids.next = runTraceId(runId);
    // Attributes are set on the started span, not passed to `startSpan`, which copies them twice more
    // for the sampler's sake; the samplers the SDK takes from the environment never read them.
    const span = this.tracer.startSpan(RUN_SPAN, { kind: SpanKind.INTERNAL, startTime: hrTime(at), ...(link ? { links: [{ context: link }] } : {}) }, run.parent);
    span.setAttributes(attributes);
    if (this.ids) this.ids.next = undefined;
    run.span = span;
    run.ctx = trace.setSpan(run.parent, span);
    return span;
  }

  private startAttempt(runId: string, run: RunTrace, a: { callId: string; tool: string; n: number; at: number; waitMs?: number; compensation?: boolean }): Span {
    if (!run.span) this.runSpan(runId, run, a.at);
    const attributes: Attributes = {
      [ATTR.operation]: EXECUTE_TOOL,
      [ATTR.toolName]: a.tool,
      [ATTR.toolCallId]: a.callId,
      [ATTR.runId]: runId,
      [ATTR.attempt]: a.n,
    };
    if (a.waitMs !== undefined) attributes[ATTR.waitMs] = a.waitMs;
    if (a.compensation) attributes[ATTR.compensation] = true;
    return this.tracer.startSpan(this.spanName(a.tool), { kind: SpanKind.INTERNAL, startTime: hrTime(a.at) }, run.ctx).setAttributes(attributes);
  }

  /** `execute_tool <tool>`, the same string for each span of a tool. */
  private spanName(tool: string): string {
    let name = this.names.get(tool);
    if (name === undefined) {
      name = attemptSpanName(tool);
      if (this.names.size >= MAX_SPAN_NAMES) this.names.clear();
      this.names.set(tool, name);
    }
    return name;
  }

  private expect(runId: string): void {
    this.pending.set(runId, this.now());
    this.sweep();
  }

  /**
   * Lets go of runs that never showed their `run.created` (a reserved id whose submission failed, a
   * run the store refused after its early attempts started): their spans are never ended, so never
   * exported.
   */
  private sweep(): void {
    if (this.pending.size === 0) return;
    const before = this.now() - PENDING_MS;
    for (const [runId, since] of this.pending) {
      if (since > before) break;
      this.pending.delete(runId);
      this.runs.delete(runId);
    }
  }
}

/**
 * An event's time (epoch ms) as the SDK keeps it, [seconds, nanoseconds], as its own `millisToHrTime`
 * does. A number would do, but the SDK first asks `performance.now()` whether it is one of its
 * timestamps, once per start, end and span event.
 */
function hrTime(ms: number): HrTime {
  return [Math.trunc(ms / 1000), Math.round((ms % 1000) * 1e6)];
}

function newRun(parent: Context): RunTrace {
  return { parent, ended: false, calls: new Map() };
}

function callOf(run: RunTrace, callId: string): CallTrace {
  let c = run.calls.get(callId);
  if (!c) {
    c = {};
    run.calls.set(callId, c);
  }
  return c;
}

function markError(span: Span, error: CallError): void {
  span.setAttribute(ATTR.errorType, error.code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
}

function endAttempt(c: CallTrace, at: number, error?: CallError): void {
  const open = c.open;
  if (!open) return;
  c.open = undefined;
  if (error) markError(open.span, error);
  open.span.end(hrTime(at));
}

/** Random bytes are drawn this many at a time (one `randomFillSync` per 512 span ids). */
const POOL_BYTES = 4096;

/**
 * The tracer's id generator (an OpenTelemetry `IdGenerator`): random ids, except that the trace id of a
 * run span without an incoming parent is derived from the run id (`next`, set just before the span
 * starts). Wherever the run goes on, after a restart or on another replica, its spans join that trace.
 *
 * The random bytes come from a pool filled 4 KiB at a time: a `randomBytes` call per id cost more than
 * the rest of a span's making (DESIGN §15's spans, bench/RESULTS.md "Traces").
 */
export class RunTraceIds {
  next: string | undefined;
  private readonly pool = Buffer.allocUnsafe(POOL_BYTES);
  private offset = POOL_BYTES;

  generateTraceId(): string {
    const id = this.next;
    this.next = undefined;
    return id ?? this.random(16);
  }

  generateSpanId(): string {
    return this.random(8);
  }

  /** `bytes` random bytes in hex, never all zeros (an invalid id). */
  private random(bytes: number): string {
    if (this.offset + bytes > POOL_BYTES) {
      randomFillSync(this.pool);
      this.offset = 0;
    }
    const start = this.offset;
    this.offset += bytes;
    let zero = true;
    for (let i = start; i < this.offset && zero; i++) zero = this.pool[i] === 0;
    if (zero) this.pool[this.offset - 1] = 1;
    return this.pool.toString('hex', start, this.offset);
  }
}

/** The trace id of a run's own trace: 16 bytes of the SHA-256 of its id. */
export function runTraceId(runId: string): string {
  // The one-shot `hash` (the same digest): a `createHash` object per run cost ten times as much. Hex
  // of the first 16 bytes, not a slice of all 64 digits: a flat string, which the exporter reads faster.
  return hash('sha256', runId, 'buffer').toString('hex', 0, 16);
}
