// Generated from src/core/view.ts by scripts/dashboard-view.mjs: do not edit (a unit test checks that
// this copy is up to date). The dashboard folds a run's events with the server's own projection.
/**
 * A run's view, derived from its events alone (DESIGN §7: "the event log is the truth"). This is the
 * one fold of a run's events: the engine's live runs (and the views it hands to listeners such as the
 * metrics), runs read back from the store, restore, recordings, the CLI and replay all use
 * `RunProjection`, and so does the dashboard, through src/dashboard/static/view.js, which
 * scripts/dashboard-view.mjs generates from this file (it imports only types, so its JavaScript
 * stands alone in a browser; keep it so).
 */
import type { CallStatus, Diagnostic, Edge, RunStatus } from '../../core/calls.js';
import type { CallError } from '../../core/errors.js';
import type { CoreEvent, ReplanContext } from '../../core/events.js';
import type { FailureMode } from '../../core/tool.js';
import type { WaitHolder, WaitReason } from '../../core/waiting.js';
export type { ReplanContext } from '../../core/events.js';
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
    review?: {
        reason: string;
        decision?: string;
        comment?: string;
    };
    compensation?: CompensationView;
    /** A `ready` call that has not started: what refused it (the latest `call.waiting`). */
    waitingFor?: WaitingView[];
    /** With `waitingFor`: since when the call waits (its first `call.waiting` since it became ready). */
    waitingSince?: string;
}
/** A holder of what a call waits for, as the run's view shows it: `since` as an ISO time. */
export type WaitHolderView = Omit<WaitHolder, 'since'> & {
    since: string;
};
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
    nodes: {
        id: string;
        tool: string;
        status: CallStatus;
    }[];
    edges: Edge[];
    generations: string[][];
}
export declare function iso(at: number): string;
export declare class RunProjection {
    view: RunView;
    readonly edges: Edge[];
    generations: string[][];
    private readonly byId;
    /** Client tools' attempts that wait for their agent: the token of each call's running attempt. */
    private dispatched;
    /** Starts from the run's first event, `run.created`. */
    constructor(created: CoreEvent);
    static of(events: readonly CoreEvent[]): RunProjection;
    call(id: string): CallView | undefined;
    /** The calls that wait for their agent's result, in call order (DESIGN §17). */
    work(): WorkItem[];
    graph(): GraphView;
    apply(e: CoreEvent): void;
    /** A client tool's attempt waits for its agent from its `call.started` until the call moves on. */
    private trackDispatch;
    private addStep;
    private addCalls;
}
