/**
 * The store: one typed interface at the level of domain operations (append a run's events, read them
 * back, list runs, find reviews), implemented once per backend. SQLite is the embedded default; an
 * in-memory store serves tests and benchmarks; PostgreSQL can implement the same interface next.
 *
 * Every method is asynchronous (PostgreSQL is; SQLite answers at once, its commits run on a writer
 * thread). `append` writes one batch of events in one transaction; the engine's commit pipeline
 * (engine/commit-pipeline.ts) makes a state change durable before anything else can observe it.
 *
 * A store that cannot reach its database (PostgreSQL gone, SQLite's disk full) fails with a
 * `StoreError` of code `store_unavailable`: the engine keeps what it could not store and tries again,
 * and the API answers 503.
 */
import type { RunStatus } from '../core/calls.js';
import type { RunEvent } from '../core/events.js';

export interface RunRecord {
  id: string;
  tenant: string;
  status: RunStatus;
  failure: string;
  tags: Record<string, string>;
  createdAt: string;
  endedAt: string | null;
  callCount: number;
  idempotencyKey: string | null;
}

export interface ListRunsQuery {
  tenant?: string;
  status?: RunStatus[];
  /** Every pair must match. */
  tags?: [string, string][];
  /** 1..200 */
  limit: number;
  /** Opaque, from a previous page's `nextCursor`. */
  cursor?: string;
}

export interface ReviewRecord {
  id: string;
  runId: string;
  callId: string;
  tenant: string;
  tool: string;
  args: Record<string, unknown>;
  reason: string;
  status: 'pending' | 'decided';
  decision: string | null;
  createdAt: string;
  decidedAt: string | null;
}

export type StoreKind = 'memory' | 'sqlite' | 'postgres';

export interface Store {
  readonly kind: StoreKind;
  /**
   * Appends events of any runs, in one transaction. `run.created` creates the run (its data carries
   * tenant, failure, tags, calls, and an optional `idempotencyKey`); `run.completed` and
   * `run.replanned` update its status; `call.awaiting_review` opens a review and `review.decided`
   * closes it. A `seq` that is not the next one of its run is an error (the log is gapless).
   *
   * Several appends may be in flight: they are stored in the order they were made, each checked on top
   * of those before it; when one fails, every later one in flight fails too and nothing of them is
   * stored (so a batch never lands on top of one that did not). A batch that a check could only pass
   * once the ones before it are committed may fail instead: append it again after they settle.
   */
  append(events: readonly RunEvent[]): Promise<void>;
  /** A run's events with `seq > afterSeq`, in order. */
  events(runId: string, afterSeq?: number): Promise<RunEvent[]>;
  run(runId: string): Promise<RunRecord | undefined>;
  /** Newest first. */
  list(query: ListRunsQuery): Promise<{ items: RunRecord[]; nextCursor: string | null }>;
  /** The run created with this key by this tenant, if any. */
  findByIdempotencyKey(tenant: string, key: string): Promise<string | undefined>;
  /** Runs whose status is neither ended nor needs_replan: what recovery must resume (oldest first). */
  unfinished(): Promise<string[]>;
  /** Active (not ended) runs of a tenant. */
  activeCount(tenant: string): Promise<number>;
  /**
   * The tenant's runs, queued or running, whose `run.created` carries this `concurrencyKey` (one run
   * per key, DESIGN §4), oldest first.
   */
  runsHoldingKey(tenant: string, key: string): Promise<string[]>;
  reviews(query: { status?: 'pending' | 'decided'; runId?: string; tenant?: string }): Promise<ReviewRecord[]>;
  review(id: string): Promise<ReviewRecord | undefined>;
  /** Counts of runs per status (for metrics and the dashboard). */
  countsByStatus(tenant?: string): Promise<Record<string, number>>;
  /** Resolves when the database answers; rejects with `store_unavailable` when it does not. */
  ping(): Promise<void>;
  /** Waits for the appends in flight, then lets the database go. */
  close(): Promise<void>;
}
