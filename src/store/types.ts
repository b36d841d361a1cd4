/**
 * The store: one typed interface at the level of domain operations (append a run's events, read them
 * back, list runs, find reviews), implemented once per backend. SQLite is the embedded default; an
 * in-memory store serves tests and benchmarks; PostgreSQL can implement the same interface next.
 *
 * Every method is synchronous: better-sqlite3 is, and that lets the engine make a state change durable
 * before anything else can observe it. `append` writes one batch of events in one transaction.
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

/** An append under way on another thread (`Store.appendAsync`). */
export interface PendingAppend {
  /** Settles once the events are stored, or rejects with why they were not (nothing of them is). */
  readonly done: Promise<void>;
  /** Blocks the calling thread until then; throws what `done` rejects with. */
  wait(): void;
}

export interface Store {
  /**
   * Appends events of any runs, in one transaction. `run.created` creates the run (its data carries
   * tenant, failure, tags, calls, and an optional `idempotencyKey`); `run.completed` and
   * `run.replanned` update its status; `call.awaiting_review` opens a review and `review.decided`
   * closes it. A `seq` that is not the next one of its run is an error (the log is gapless).
   */
  append(events: readonly RunEvent[]): void;
  /**
   * Optional: appends like `append`, checked the same way, but the commit (and its fsync) runs on
   * another thread, so the caller's thread keeps working meanwhile. Several may be in flight: they are
   * stored in the order they were made, and each is checked on top of those before it; when one fails,
   * every later one in flight fails too and nothing of them is stored (so a batch never lands on top of
   * one that did not). A batch that a check could only pass once the ones before it are committed may
   * fail instead: append it again after they settle. An `append` meanwhile first waits for them all.
   */
  appendAsync?(events: readonly RunEvent[]): PendingAppend;
  /** A run's events with `seq > afterSeq`, in order. */
  events(runId: string, afterSeq?: number): RunEvent[];
  run(runId: string): RunRecord | undefined;
  /** Newest first. */
  list(query: ListRunsQuery): { items: RunRecord[]; nextCursor: string | null };
  /** The run created with this key by this tenant, if any. */
  findByIdempotencyKey(tenant: string, key: string): string | undefined;
  /** Runs whose status is neither ended nor needs_replan: what recovery must resume. */
  unfinished(): string[];
  /** Active (not ended) runs of a tenant. */
  activeCount(tenant: string): number;
  reviews(query: { status?: 'pending' | 'decided'; runId?: string; tenant?: string }): ReviewRecord[];
  review(id: string): ReviewRecord | undefined;
  /** Counts of runs per status (for metrics and the dashboard). */
  countsByStatus(tenant?: string): Record<string, number>;
  close(): void;
}
