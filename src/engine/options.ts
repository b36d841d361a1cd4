/** The engine's options and the shapes of what it takes and gives. */
import type { CallInput } from '../core/calls.js';
import type { PermitRequest } from '../core/scheduler.js';
import type { RunView } from '../core/view.js';
import type { WaitReason } from '../core/waiting.js';
import type { Pause } from '../core/limits.js';
import type { Config } from '../contract/config.js';
import type { Executor } from '../executors/types.js';
import type { HookRunner } from '../hooks/index.js';
import type { EventLog } from './commit-pipeline.js';

/** Where events go before anything else sees them; a store makes them durable (see `EventLog`). */
export type EventSink = EventLog;

export interface EngineOptions {
  config: Config;
  /** Runs the attempts; default: builtin, http and worker executors. */
  executor?: Executor;
  /**
   * Tools of kind `client` wait for their agent's answer through `Engine.answer`, each attempt with a
   * token that its `call.started` carries (DESIGN §17). Default: true, unless `executor` is given
   * (which then runs them as it likes).
   */
  clients?: boolean;
  /** Wraps the executor (tracing gives each attempt its trace context); the engine still closes the one it made. */
  instrument?: (executor: Executor) => Executor;
  /** Runs the config's hooks (DESIGN §14); default: one made from `config.hooks`, when it has any. */
  hooks?: HookRunner;
  sink?: EventSink;
  /** Epoch milliseconds; default `Date.now`. */
  clock?: () => number;
  /** Keep ended runs' views in memory for this long (ms) so `get` and `wait` find them; default 10 min. */
  retainEndedMs?: number;
  /**
   * And keep at most this many of them (the oldest go first); default 10,000. Memory then stays bounded
   * at any rate of runs (a view is a few KB); a store still has every run.
   */
  retainEndedRuns?: number;
  /**
   * Told when the store refuses events that no caller waits for (an attempt's end): the engine and the
   * store then disagree. Default: throws it out of the event loop (the process ends, and the next start
   * resumes from what the store holds).
   */
  onFault?: (err: unknown) => void;
  /**
   * Several replicas (DESIGN §12): cluster-wide permits. A call that every local limit lets start then
   * asks the gate, and starts once granted; its permit is given back when its attempt ends.
   */
  permits?: PermitGate;
  /** Several replicas: told after the engine abandoned its runs because the store fenced it off. */
  onLeaseLost?: (err: unknown) => void;
}

/**
 * The cluster's answer to one request: granted, or refused with what refused it (the limit or lock,
 * its key, capacity and use, its holders, `retryAt` for a rate), as the call's `waitingFor`.
 */
export type PermitAnswer = { granted: true } | { granted: false; waitingFor?: WaitReason[] };

/** Where calls take cluster-wide permits (cluster/permits.ts): all or nothing per call. */
export interface PermitGate {
  /** One answer per request, in order. Rejects when the cluster cannot be asked. */
  acquire(requests: readonly PermitRequest[]): Promise<PermitAnswer[]>;
  /** Gives permits back (batched by the gate; nothing to wait for). */
  release(permits: readonly { runId: string; callId: string }[]): void;
  /** `listener` is told when permits may have freed somewhere (or after a while, to ask again). */
  onFreed(listener: () => void): void;
  /**
   * Backpressure (DESIGN §4): shares a pause this replica's call got (a 429, a 503 with Retry-After)
   * with every replica; asks for the paused tool (or keyed group) are refused until it ends.
   */
  pause?(p: Pause): void;
  /** `listener` is told of pauses other replicas got. */
  onPaused?(listener: (p: Pause) => void): void;
  /**
   * Grants at once, with nothing to wait for, what the gate can grant by itself (a replica's slices of
   * counted limits): `true` per request granted. The rest are asked for with `acquire` as before.
   */
  grantNow?(requests: readonly PermitRequest[]): boolean[] | undefined;
}

/** A streamed run as the library offers it: add calls as the model writes them, then seal. */
export interface OpenRun {
  readonly id: string;
  /** Adds calls in model order; each starts as soon as it is safe. Resolves once they are stored. */
  add(...calls: CallInput[]): Promise<RunView>;
  /** No more calls: what still waits on a later call is planned now. */
  seal(): Promise<RunView>;
  /** Resolves with the run when it ends. */
  done(): Promise<RunView>;
}
