/**
 * A run's view, derived from its events alone (DESIGN §7: "the event log is the truth"). The store,
 * the API, the CLI and replay all fold the same events through `RunProjection.apply`.
 */
import type { CallStatus, Diagnostic, Edge, RunStatus } from './calls.js';
import type { CallError } from './errors.js';
import type { CoreEvent } from './events.js';
import type { FailureMode } from './tool.js';

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
  /** Args after references were substituted (and after a review's edit). */
  resolvedArgs?: Record<string, unknown>;
  review?: { reason: string; decision?: string; comment?: string };
  compensation?: CompensationView;
}

export interface ReplanContext {
  failed: { callId: string; error: CallError }[];
  waiting: string[];
  sideEffects: string[];
}

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
}

export interface GraphView {
  nodes: { id: string; tool: string; status: CallStatus }[];
  edges: Edge[];
  generations: string[][];
}

// The last instant made into text: a run's events mostly share their millisecond.
let lastAt = NaN;
let lastIso = '';

export function iso(at: number): string {
  if (at !== lastAt) {
    lastIso = new Date(at).toISOString();
    lastAt = at;
  }
  return lastIso;
}

export class RunProjection {
  view: RunView;
  readonly edges: Edge[] = [];
  generations: string[][] = [];
  private readonly byId = new Map<string, CallView>();

  /** Starts from the run's first event, `run.created`. */
  constructor(created: CoreEvent) {
    if (created.type !== 'run.created') throw new Error(`a run's first event must be run.created, got ${created.type}`);
    const d = created.data as { tenant: string; failure: FailureMode; tags: Record<string, string>; calls: { id: string; tool: string; args: Record<string, unknown> }[] };
    this.view = {
      id: created.runId,
      tenant: d.tenant,
      status: 'running',
      failure: d.failure,
      tags: d.tags,
      createdAt: iso(created.at),
      endedAt: null,
      calls: [],
      diagnostics: [],
      ...((created.data as { open?: boolean }).open ? { stream: 'open' as const } : {}),
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

  graph(): GraphView {
    return {
      nodes: this.view.calls.map((c) => ({ id: c.id, tool: c.tool, status: c.status })),
      edges: this.edges,
      generations: this.generations,
    };
  }

  apply(e: CoreEvent): void {
    const c = e.callId !== undefined ? this.byId.get(e.callId) : undefined;
    const d = e.data;
    switch (e.type) {
      case 'run.created':
        return;
      case 'run.started':
      case 'run.replanned': {
        if (e.type === 'run.replanned') {
          this.addCalls(d.calls as { id: string; tool: string; args: Record<string, unknown> }[]);
          this.view.status = 'running';
          this.view.endedAt = null;
          delete this.view.replanContext;
        }
        for (const edge of d.edges as Edge[]) {
          this.edges.push(edge);
          this.byId.get(edge.to)?.dependsOn.push(edge.from);
        }
        this.generations = d.generations as string[][];
        this.view.diagnostics.push(...(d.diagnostics as Diagnostic[]));
        return;
      }
      case 'run.calls_added':
      case 'run.sealed':
        if (e.type === 'run.calls_added') this.addCalls(d.calls as { id: string; tool: string; args: Record<string, unknown> }[]);
        else {
          this.view.stream = 'sealed';
          this.generations = d.generations as string[][];
        }
        for (const edge of d.edges as Edge[]) {
          this.edges.push(edge);
          this.byId.get(edge.to)?.dependsOn.push(edge.from);
        }
        this.view.diagnostics.push(...(d.diagnostics as Diagnostic[]));
        return;
      case 'run.needs_replan':
        this.view.replanContext = d.replanContext as ReplanContext;
        return;
      case 'run.completed':
        this.view.status = d.status as RunStatus;
        if (Array.isArray(d.diagnostics)) this.view.diagnostics.push(...(d.diagnostics as Diagnostic[]));
        this.view.endedAt = iso(e.at);
        return;
      case 'review.decided':
        if (c?.review) {
          c.review.decision = d.decision as string;
          if (d.decision !== 'reject') c.status = 'pending';
          if (d.comment !== undefined) c.review.comment = d.comment as string;
          if (d.args) c.resolvedArgs = d.args as Record<string, unknown>;
        }
        return;
      default:
        if (c) applyCallEvent(c, e);
    }
  }

  private addCalls(calls: { id: string; tool: string; args: Record<string, unknown> }[]): void {
    for (const call of calls) {
      const v: CallView = {
        id: call.id,
        tool: call.tool,
        args: call.args,
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

function applyCallEvent(c: CallView, e: CoreEvent): void {
  const d = e.data;
  switch (e.type) {
    case 'call.ready':
      c.status = 'ready';
      return;
    case 'call.awaiting_review':
      c.status = 'awaiting_review';
      c.review = { reason: d.reason as string };
      c.resolvedArgs = d.args as Record<string, unknown>;
      return;
    case 'call.started':
      c.status = 'running';
      c.attempts = d.attempt as number;
      c.startedAt ??= iso(e.at);
      c.resolvedArgs = d.args as Record<string, unknown>;
      return;
    case 'call.retry_scheduled':
      c.status = 'pending';
      c.error = d.error as CallError;
      return;
    case 'call.succeeded':
      c.status = 'succeeded';
      c.output = d.output;
      c.error = null;
      c.endedAt = iso(e.at);
      return;
    case 'call.failed':
      c.status = 'failed';
      c.error = d.error as CallError;
      c.endedAt = iso(e.at);
      return;
    case 'call.blocked':
      c.status = 'blocked';
      c.blockedBy = d.blockedBy as CallError;
      c.endedAt = iso(e.at);
      return;
    case 'call.cancelled':
      c.status = 'cancelled';
      c.error = d.reason as CallError;
      c.endedAt = iso(e.at);
      return;
    case 'call.compensated':
      c.compensation = { status: d.status as 'succeeded' | 'failed' };
      if (d.output !== undefined) c.compensation.output = d.output;
      if (d.error !== undefined) c.compensation.error = d.error as CallError;
      return;
    default:
      return;
  }
}
