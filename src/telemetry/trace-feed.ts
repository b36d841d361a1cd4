/**
 * The main thread's part of traces (DESIGN §15): what the event loop that serves runs does for a span
 * is to write down the few values of the events that make, end or time it. `TraceFeed`'s listener puts
 * each such event in a flat list as an entry (an op code and its fields: run-spans.mjs), and the export
 * thread (export-thread.ts) makes the spans from them (`RunSpans`) and exports them. No span, context,
 * attribute or record object is made here: the spans, the batch queue and the OTLP serializer cost this
 * thread nothing but these values (bench/RESULTS.md, "Traces").
 *
 * The executor side (`traceparentFor`) hands each attempt its span's W3C `traceparent`: the run's trace
 * id (its incoming parent's, or the run's own: `runTraceId`) and a span id drawn here, sent along so the
 * attempt's span takes it.
 *
 * Bounded: when the thread has no room (its bound of values on their way, or no thread), a new run is
 * not traced, and past twice the bound a run traced is let go — its later events are passed over, and
 * a FORGET entry tells the thread to drop what it started of them. The spans so dropped are counted
 * and said as the SDK says its own drops.
 */
import type { EventOf, RunEvent } from '../core/events.js';
import type { CallView, RunView } from '../core/view.js';
import { newRunId, type RunListener } from '../engine/engine.js';
import type { ExecuteRequest } from '../executors/types.js';
import {
  OP,
  awaitReplan,
  parseTraceparent,
  runTraceId,
  sweepPending,
  type EntryValue,
  type ParsedTraceparent,
  type SpanIds,
} from './run-spans.mjs';

/** Where entries go (the export thread, or a test's `RunSpans`). */
export interface EntrySink {
  /** The list to push entries to (it may be another list after `wrote`). */
  readonly q: EntryValue[];
  /**
   * The time (epoch ms) that entries' times in `q` are counted from (it changes with `q`): small
   * whole numbers are cheaper to send than epoch milliseconds.
   */
  readonly base: number;
  /** Entries were pushed to `q`. */
  wrote(): void;
  /**
   * Whether there is room on the way for an entry: of a run that starts being traced (`ongoing`
   * false), or of one already traced (true: these may go on past the bound, up to twice it, so that
   * runs traced are traced whole, and it is new runs that are not).
   */
  room(ongoing: boolean): boolean;
  /** Whether entries are taken at all now (a FORGET goes past the bound, not past a missing thread). */
  readonly running: boolean;
  /** `spans` were dropped for want of room. */
  dropped(spans: number): void;
}

interface FeedRun {
  /** The incoming `traceparent`, or '' for a run that is its trace's root. */
  parent: string;
  /** `00-<trace id>-`, once an attempt asked for it. */
  prefix: string | undefined;
  /** `-01`, or `-00` under an unsampled parent. */
  suffix: string;
  tenant: string;
  /** Its spans were let go (no room): its events are passed over. */
  dropped: boolean;
  /** No entry of it went to the thread yet. */
  fresh: boolean;
  /** Its key in the entries (NAME: a small number instead of its run id). */
  key: number;
  /** The thread was told its key (a NAME entry). */
  named: boolean;
}

export class TraceFeed {
  private readonly runs = new Map<string, FeedRun>();
  /** Runs known before their `run.created` (reserved, or started early), with when: see `sweep`. */
  private readonly pending = new Map<string, number>();
  private readonly awaitingReplan = new Map<string, true>();
  private keys = 0;

  readonly listener: RunListener = (e, view, call) => this.on(e, view, call);

  constructor(
    private readonly sink: EntrySink,
    private readonly ids: SpanIds,
    private readonly now: () => number = Date.now,
  ) {}

  /** Reserves a run id whose run span is a child of `traceparent`; undefined for an invalid one. */
  continueTrace(traceparent: string): string | undefined {
    const parsed = parseTraceparent(traceparent);
    if (!parsed) return undefined;
    const runId = newRunId();
    this.runs.set(runId, this.newRun(traceparent, parsed, ''));
    this.pending.set(runId, this.now());
    this.sweep();
    this.told(runId, OP.PARENT, traceparent, '', 1);
    return runId;
  }

  /** A run resumed from its events (DESIGN §15): its spans go on in the trace it began in. */
  resumed(created: RunEvent): void {
    if (this.runs.has(created.runId) || created.type !== 'run.created') return;
    const tp = created.data.traceparent;
    const parsed = tp === undefined ? undefined : parseTraceparent(tp);
    this.runs.set(created.runId, this.newRun(parsed ? (tp as string) : '', parsed, created.data.tenant));
    this.told(created.runId, OP.PARENT, parsed ? (tp as string) : '', created.data.tenant, 0);
  }

  /** The `traceparent` of the attempt's span (it starts now, if its `call.started` is still to come). */
  traceparentFor(req: ExecuteRequest): string {
    return this.attempted(req, true) as string;
  }

  /**
   * An attempt is handed to its executor: its span starts now, if its `call.started` is still to come
   * (an early start, a compensation). With `traceparent` (for an executor that sends it: `http`) the
   * span's id is drawn here and its W3C `traceparent` returned; without, the export thread draws the
   * id, and neither the run's trace id nor the text is made here.
   */
  attempted(req: ExecuteRequest, traceparent: boolean): string | undefined {
    let run = this.runs.get(req.runId);
    if (!run) {
      run = this.newRun('', undefined, '');
      this.runs.set(req.runId, run);
      this.pending.set(req.runId, this.now());
      this.sweep();
    }
    const spanId = traceparent ? this.ids.next() : '';
    if (this.admits(req.runId, run)) {
      const key = this.key(req.runId, run);
      this.sink.q.push(OP.ATTEMPT, key, req.callId, this.now() - this.sink.base, req.attempt, req.tool.name, spanId);
      this.sink.wrote();
    }
    return traceparent ? `${(run.prefix ??= `00-${runTraceId(req.runId)}-`)}${spanId}${run.suffix}` : undefined;
  }

  /** How many runs are traced now (for tests). */
  get size(): number {
    return this.runs.size;
  }

  /**
   * The runs traced, told again to a thread started again (it knows nothing of them: what the one that
   * stopped had started of their spans is lost, and their spans go on from their next events, in
   * their traces, under their tenants).
   */
  restarted(): void {
    for (const [runId, run] of this.runs) {
      run.named = false;
      if (!run.dropped && !run.fresh) {
        const key = this.key(runId, run);
        this.sink.q.push(OP.PARENT, key, run.parent, run.tenant, 0);
      }
    }
    this.sink.wrote();
  }

  private on(e: RunEvent, view: RunView, call: CallView | undefined): void {
    let op: number;
    switch (e.type) {
      case 'run.created':
        this.created(e);
        return;
      case 'call.ready':
        op = OP.READY;
        break;
      case 'call.hook':
        // Hook time is not a wait for limits (DESIGN §14): the wait starts once before_call decided.
        if (e.data.on !== 'before_call') return;
        op = OP.READY;
        break;
      case 'call.started':
        op = OP.STARTED;
        break;
      case 'call.succeeded':
        op = OP.SUCCEEDED;
        break;
      case 'call.failed':
      case 'call.retry_scheduled':
      case 'call.cancelled':
        op = OP.ENDED;
        break;
      case 'call.compensated':
        op = OP.COMPENSATED;
        break;
      case 'run.completed':
        this.completed(e, view);
        return;
      case 'run.replanned':
        op = OP.REPLANNED;
        break;
      default:
        return;
    }
    const run = this.runs.get(e.runId) ?? this.midway(e, view);
    if (run === undefined || !this.admits(e.runId, run, op === OP.STARTED ? 1 : 0)) return;
    const key = this.key(e.runId, run);
    const q = this.sink.q;
    const at = e.at - this.sink.base;
    if (op === OP.REPLANNED) q.push(op, key, at);
    else if (op === OP.STARTED)
      q.push(op, key, e.callId as string, at, (e as EventOf<'call.started'>).data.attempt, call?.tool ?? 'unknown');
    else if (op === OP.ENDED || op === OP.COMPENSATED) {
      const error = errorOf(e);
      q.push(op, key, e.callId as string, at, error?.code ?? '', error?.message ?? '');
    } else q.push(op, key, e.callId as string, at);
    this.sink.wrote();
  }

  private created(e: EventOf<'run.created'>): void {
    let run = this.runs.get(e.runId);
    if (!run) {
      run = this.newRun('', undefined, e.data.tenant);
      this.runs.set(e.runId, run);
    }
    run.tenant = e.data.tenant;
    this.pending.delete(e.runId);
    if (this.admits(e.runId, run, 1)) {
      const key = this.key(e.runId, run);
      this.sink.q.push(OP.CREATED, key, e.at - this.sink.base, e.data.tenant);
      this.sink.wrote();
    }
    this.sweep();
  }

  private completed(e: EventOf<'run.completed'>, view: RunView): void {
    const status = e.data.status;
    const run = this.runs.get(e.runId) ?? this.midway(e, view);
    if (run !== undefined && this.admits(e.runId, run)) {
      const key = this.key(e.runId, run);
      this.sink.q.push(OP.COMPLETED, key, e.at - this.sink.base, status);
      this.sink.wrote();
    }
    if (status !== 'needs_replan') {
      this.runs.delete(e.runId);
      this.awaitingReplan.delete(e.runId);
      return;
    }
    awaitReplan(this.awaitingReplan, this.runs, e.runId);
  }

  /**
   * A run resumed after a restart whose events start midway, unless `resumed` told of it (its trace id
   * follows from its run id all the same); undefined for an ended run's late event.
   */
  private midway(e: { type: RunEvent['type']; runId: string }, view: RunView): FeedRun | undefined {
    if (e.type !== 'run.completed' && view.endedAt !== null && view.status !== 'needs_replan') return undefined;
    const run = this.newRun('', undefined, view.tenant);
    this.runs.set(e.runId, run);
    this.told(e.runId, OP.PARENT, '', view.tenant, 0);
    return run;
  }

  /**
   * Whether the run's entries go on: not when it was let go, nor when there is no room now (then it is
   * let go: the thread drops what it started of it). `spans`: how many spans this entry would start.
   */
  private admits(_runId: string, run: FeedRun, spans = 0): boolean {
    if (run.dropped) {
      if (spans > 0) this.sink.dropped(spans);
      return false;
    }
    if (this.sink.room(!run.fresh)) {
      run.fresh = false;
      return true;
    }
    run.dropped = true;
    if (spans > 0) this.sink.dropped(spans);
    // The thread knows nothing of a run that sent nothing yet.
    if (!run.fresh && run.named && this.sink.running) {
      this.sink.q.push(OP.FORGET, run.key);
      this.sink.wrote();
    }
    return false;
  }

  /** An entry of the run's trace (PARENT), unless the run was let go. */
  private told(runId: string, op: number, traceparent: string, tenant: string, expect: number): void {
    const run = this.runs.get(runId) as FeedRun;
    if (!this.admits(runId, run)) return;
    const key = this.key(runId, run);
    this.sink.q.push(op, key, traceparent, tenant, expect);
    this.sink.wrote();
  }

  private newRun(parent: string, parsed: ParsedTraceparent | undefined, tenant: string): FeedRun {
    return {
      parent,
      prefix: parsed ? `00-${parsed.traceId}-` : undefined,
      suffix: parsed && (parsed.flags & 1) === 0 ? '-00' : '-01',
      tenant,
      dropped: false,
      fresh: true,
      key: ++this.keys,
      named: false,
    };
  }

  /** The run's key for an entry about to be written: the thread is told what it stands for first. */
  private key(runId: string, run: FeedRun): number {
    if (!run.named) {
      this.sink.q.push(OP.NAME, run.key, runId);
      run.named = true;
    }
    return run.key;
  }

  /** Lets go of runs that never showed their `run.created` (the thread does the same with its own). */
  private sweep(): void {
    sweepPending(this.pending, this.runs, this.now());
  }
}

function errorOf(e: RunEvent): { code: string; message: string } | undefined {
  switch (e.type) {
    case 'call.failed':
    case 'call.retry_scheduled':
      return e.data.error;
    case 'call.cancelled':
      return e.data.reason;
    case 'call.compensated':
      return e.data.status === 'failed' ? e.data.error : undefined;
    default:
      return undefined;
  }
}
