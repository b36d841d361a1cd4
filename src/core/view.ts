/**
 * A run's view, derived from its events alone (DESIGN §7: "the event log is the truth"). This is the
 * one fold of a run's events: the engine's live runs (and the views it hands to listeners such as the
 * metrics), runs read back from the store, restore, recordings, the CLI and replay all use
 * `RunProjection`, and so does the dashboard, through src/dashboard/static/view.js, which
 * scripts/dashboard-view.mjs generates from this file (it imports only types, so its JavaScript
 * stands alone in a browser; keep it so).
 */
import type { CallInput, CallStatus, Diagnostic, Edge, RunStatus } from './calls.js';
import type { CallError } from './errors.js';
import type { CoreEvent, EventOf, PlanStepData, ReplanContext } from './events.js';
import type { FailureMode } from './tool.js';
import type { WaitHolder, WaitReason } from './waiting.js';

export type { ReplanContext } from './events.js';

export interface CompensationView {
  status: 'succeeded' | 'failed';
  output?: unknown;
  error?: CallError;
}

export interface CallView {
  id: string;
  tool: string;
  args: Record<string, unknown>;
  status: CallStatus;
  dependsOn: string[];
  attempts: number;
  output: unknown;
  error: CallError | null;
  blockedBy: CallError | null;
  startedAt: string | null;
  endedAt: string | null;
  /** Args after references were substituted (and after a hook's rewrite or a review's edit). */
  resolvedArgs?: Record<string, unknown>;
  review?: { reason: string; decision?: string; comment?: string };
  compensation?: CompensationView;
  /** A `ready` call that has not started: what refused it (the latest `call.waiting`). */
  waitingFor?: WaitingView[];
  /** With `waitingFor`: since when the call waits (its first `call.waiting` since it became ready). */
  waitingSince?: string;
}

/** A holder of what a call waits for, as the run's view shows it: `since` as an ISO time. */
export type WaitHolderView = Omit<WaitHolder, 'since'> & { since: string };

/** A `WaitReason` as the run's view shows it: its times as ISO text. */
export type WaitingView = Omit<WaitReason, 'retryAt' | 'until' | 'holders' | 'queuedBehind'> & {
  retryAt?: string;
  /** `backoff`: when the pause ends. */
  until?: string;
  holders: WaitHolderView[];
  queuedBehind?: WaitHolderView[];
};

export interface RunView {
  id: string;
  tenant: string;
  status: RunStatus;
  failure: FailureMode;
  tags: Record<string, string>;
  createdAt: string;
  endedAt: string | null;
  calls: CallView[];
  diagnostics: Diagnostic[];
  replanContext?: ReplanContext;
  /** A streamed run: `open` until it is sealed. */
  stream?: 'open' | 'sealed';
  /** 1 (most urgent) to 5, when the submission gave one (DESIGN §4); none means 3. */
  priority?: number;
}

/** A call that waits for its agent's result (DESIGN §17): an item of `GET /v1/runs/{id}/work`. */
export interface WorkItem {
  runId: string;
  callId: string;
  tool: string;
  /** Resolved (references substituted). */
  args: Record<string, unknown>;
  attempt: number;
  token: string;
}

export interface GraphView {
  nodes: { id: string; tool: string; status: CallStatus }[];
  edges: Edge[];
  generations: string[][];
}

// The last instant made into text: a run's events mostly share their millisecond. A memo of a pure
// function (one entry), so shared by every caller in the process without leaking anything (memo.ts).
let lastAt = NaN;
let lastIso = '';

export function iso(at: number): string {
  if (at !== lastAt) {
    lastIso = new Date(at).toISOString();
    lastAt = at;
  }
  return lastIso;
}

/** A call as `run.created`, `run.calls_added` and `run.replanned` list it. */
type ListedCall = CallInput;

export class RunProjection {
  view: RunView;
  readonly edges: Edge[] = [];
  generations: string[][] = [];
  private readonly byId = new Map<string, CallView>();
  /** Client tools' attempts that wait for their agent: the token of each call's running attempt. */
  private dispatched: Map<string, { attempt: number; token: string }> | undefined;

  /** Starts from the run's first event, `run.created`. */
  constructor(created: CoreEvent) {
    if (created.type !== 'run.created') throw new Error(`a run's first event must be run.created, got ${created.type}`);
    const d = created.data;
    this.view = {
      id: created.runId,
      tenant: d.tenant,
      status: d.held ? 'queued' : 'running',
      failure: d.failure,
      tags: d.tags,
      createdAt: iso(created.at),
      endedAt: null,
      calls: [],
      diagnostics: [],
      ...(d.open ? { stream: 'open' as const } : {}),
      ...(d.priority !== undefined ? { priority: d.priority } : {}),
    };
    this.addCalls(d.calls);
  }

  static of(events: readonly CoreEvent[]): RunProjection {
    const p = new RunProjection(events[0] as CoreEvent);
    for (let i = 1; i < events.length; i++) p.apply(events[i] as CoreEvent);
    return p;
  }

  call(id: string): CallView | undefined {
    return this.byId.get(id);
  }

  /** The calls that wait for their agent's result, in call order (DESIGN §17). */
  work(): WorkItem[] {
    const items: WorkItem[] = [];
    if (this.dispatched === undefined || this.dispatched.size === 0) return items;
    for (const c of this.view.calls) {
      const d = this.dispatched.get(c.id);
      if (d === undefined || c.status !== 'running') continue;
      items.push({ runId: this.view.id, callId: c.id, tool: c.tool, args: c.resolvedArgs ?? c.args, attempt: d.attempt, token: d.token });
    }
    return items;
  }

  graph(): GraphView {
    return {
      nodes: this.view.calls.map((c) => ({ id: c.id, tool: c.tool, status: c.status })),
      edges: this.edges,
      generations: this.generations,
    };
  }

  apply(e: CoreEvent): void {
    switch (e.type) {
      case 'run.created':
        return;
      case 'run.replanned':
        this.addCalls(e.data.calls);
        this.view.status = 'running';
        this.view.endedAt = null;
        delete this.view.replanContext;
        this.generations = e.data.generations;
        this.addStep(e.data);
        return;
      case 'run.started':
        if (this.view.status === 'queued') this.view.status = 'running';
        this.generations = e.data.generations;
        this.addStep(e.data);
        return;
      case 'run.calls_added':
        this.addCalls(e.data.calls);
        this.addStep(e.data);
        return;
      case 'run.sealed':
        this.view.stream = 'sealed';
        this.generations = e.data.generations;
        this.addStep(e.data);
        return;
      case 'run.needs_replan':
        this.view.replanContext = e.data.replanContext;
        return;
      case 'run.completed':
        this.view.status = e.data.status;
        if (e.data.diagnostics) this.view.diagnostics.push(...e.data.diagnostics);
        this.view.endedAt = iso(e.at);
        return;
      default: {
        const c = e.callId !== undefined ? this.byId.get(e.callId) : undefined;
        if (c) {
          applyCallEvent(c, e);
          this.trackDispatch(c, e);
        }
      }
    }
  }

  /** A client tool's attempt waits for its agent from its `call.started` until the call moves on. */
  private trackDispatch(c: CallView, e: CoreEvent): void {
    if (e.type === 'call.started' && e.data.dispatch !== undefined)
      (this.dispatched ??= new Map()).set(c.id, { attempt: e.data.attempt, token: e.data.dispatch.token });
    else if (this.dispatched !== undefined && c.status !== 'running') this.dispatched.delete(c.id);
  }

  private addStep(d: PlanStepData): void {
    for (const edge of d.edges) {
      this.edges.push(edge);
      this.byId.get(edge.to)?.dependsOn.push(edge.from);
    }
    this.view.diagnostics.push(...d.diagnostics);
  }

  private addCalls(calls: readonly ListedCall[]): void {
    for (const call of calls) {
      const v: CallView = {
        id: call.id,
        tool: call.tool,
        args: call.args ?? {},
        status: 'pending',
        dependsOn: [],
        attempts: 0,
        output: null,
        error: null,
        blockedBy: null,
        startedAt: null,
        endedAt: null,
      };
      this.view.calls.push(v);
      this.byId.set(v.id, v);
    }
  }
}

/** The events that change one call. */
type CallEvent = Exclude<
  CoreEvent,
  EventOf<'run.created' | 'run.started' | 'run.replanned' | 'run.calls_added' | 'run.sealed' | 'run.needs_replan' | 'run.completed'>
>;

function applyCallEvent(c: CallView, e: CallEvent): void {
  // A wait lasts until the call's next move (it starts, ends, or waits again after a retry).
  if (c.waitingFor !== undefined && e.type !== 'call.waiting') {
    delete c.waitingFor;
    delete c.waitingSince;
  }
  switch (e.type) {
    case 'call.waiting':
      if (c.status === 'ready' && e.data.waitingFor.length > 0) {
        c.waitingFor = e.data.waitingFor.map(waitingView);
        c.waitingSince ??= iso(e.at);
      } else {
        delete c.waitingFor;
        delete c.waitingSince;
      }
      return;
    case 'call.ready':
      c.status = 'ready';
      return;
    case 'call.awaiting_review':
      c.status = 'awaiting_review';
      c.review = { reason: e.data.reason };
      c.resolvedArgs = e.data.args;
      return;
    case 'call.started':
      c.status = 'running';
      c.attempts = e.data.attempt;
      c.startedAt ??= iso(e.at);
      c.resolvedArgs = e.data.args;
      return;
    case 'call.retry_scheduled':
      c.status = 'pending';
      c.error = e.data.error;
      return;
    case 'call.succeeded':
      c.status = 'succeeded';
      c.output = e.data.output;
      c.error = null;
      c.endedAt = iso(e.at);
      return;
    case 'call.failed':
      c.status = 'failed';
      c.error = e.data.error;
      c.endedAt = iso(e.at);
      return;
    case 'call.blocked':
      c.status = 'blocked';
      c.blockedBy = e.data.blockedBy;
      c.endedAt = iso(e.at);
      return;
    case 'call.cancelled':
      c.status = 'cancelled';
      c.error = e.data.reason;
      c.endedAt = iso(e.at);
      return;
    case 'call.compensated': {
      const d = e.data;
      c.compensation =
        d.status === 'succeeded'
          ? { status: d.status, ...(d.output !== undefined ? { output: d.output } : {}) }
          : { status: d.status, error: d.error };
      return;
    }
    case 'call.hook':
      // A before_call hook's new args are the ones the call runs with.
      if (e.data.args && e.data.on === 'before_call') c.resolvedArgs = e.data.args;
      return;
    case 'review.decided': {
      const d = e.data;
      if (!c.review) return;
      c.review.decision = d.decision;
      if (d.decision !== 'reject') c.status = 'pending';
      if (d.comment !== undefined) c.review.comment = d.comment;
      if (d.args) c.resolvedArgs = d.args;
      return;
    }
  }
}

function waitingView(w: WaitReason): WaitingView {
  const { retryAt, until, holders, queuedBehind, ...rest } = w;
  const v: WaitingView = { ...rest, holders: holders.map(holderView) };
  if (retryAt !== undefined) v.retryAt = iso(retryAt);
  if (until !== undefined) v.until = iso(until);
  if (queuedBehind !== undefined) v.queuedBehind = queuedBehind.map(holderView);
  return v;
}

function holderView(h: WaitHolder): WaitHolderView {
  return { runId: h.runId, callId: h.callId, tenant: h.tenant, since: iso(h.since) };
}
