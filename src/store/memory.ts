/**
 * The in-memory store: the same semantics as the SQLite store in plain Maps, for tests and benchmarks.
 * It shares the batch planning and row shapes with SQLite (batch.ts, rows.ts) and keeps JSON as
 * strings, so what comes back is a fresh copy, exactly as from a database. Nothing survives `close()`.
 */
import { storedEvent, type RunEvent } from '../core/events.js';
import { planBatch, type EventRow, type StoredState, type Step } from './batch.js';
import {
  ACTIVE_STATUSES,
  checkLimit,
  decodeCursor,
  encodeCursor,
  reviewRecord,
  runRecord,
  statusCounts,
  type ReviewRow,
  type RunRow,
} from './rows.js';
import type { ListRunsQuery, ReviewRecord, RunRecord, Store } from './types.js';

/**
 * @example const store = createMemoryStore();
 */
export function createMemoryStore(): Store {
  return new MemoryStore();
}

const isActive = (r: RunRow) => ACTIVE_STATUSES.includes(r.status);

class MemoryStore implements Store {
  readonly kind = 'memory' as const;
  private runs = new Map<string, RunRow>();
  /** Runs in creation order: `byCreation[i].created_seq === i + 1`. */
  private byCreation: RunRow[] = [];
  private tags = new Map<string, Map<string, string>>();
  private log = new Map<string, EventRow[]>();
  private reviewRows = new Map<string, ReviewRow>();
  private keys = new Map<string, string>();
  private readonly state: StoredState = {
    lastSeq: (runId) => this.log.get(runId)?.length ?? 0,
    tenantOf: (runId) => this.runs.get(runId)?.tenant,
    idempotencyOwner: (tenant, key) => this.keys.get(keyOf(tenant, key)),
    toolOf: (runId, callId) => {
      for (const e of this.log.get(runId) ?? []) {
        if (e.type !== 'run.created' && e.type !== 'run.replanned') continue;
        const event = storedEvent({ seq: e.seq, type: e.type, runId, callId: e.call_id, at: e.at, data: e.data });
        if (event.type !== 'run.created' && event.type !== 'run.replanned') continue;
        const c = (event.data.calls ?? []).find((x) => x.id === callId);
        if (c) return c.tool;
      }
      return undefined;
    },
  };

  async append(events: readonly RunEvent[]): Promise<void> {
    // Every check is in planBatch, before any change: applying the steps cannot fail half-way.
    const { steps } = planBatch(events, this.state);
    for (const step of steps) this.apply(step);
  }

  async events(runId: string, afterSeq = 0): Promise<RunEvent[]> {
    // seq n is at index n - 1: the log is gapless from 1.
    return (this.log.get(runId) ?? [])
      .slice(Math.max(0, afterSeq))
      .map((r) => storedEvent({ seq: r.seq, type: r.type, runId, callId: r.call_id, at: r.at, data: r.data }));
  }

  async run(runId: string): Promise<RunRecord | undefined> {
    const row = this.runs.get(runId);
    return row && runRecord(row);
  }

  async list(query: ListRunsQuery): Promise<{ items: RunRecord[]; nextCursor: string | null }> {
    checkLimit(query.limit);
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
    const statuses = new Set(query.status ?? []);
    const pairs = query.tags ?? [];
    const items: RunRecord[] = [];
    let last: RunRow | undefined;
    const start = Math.min(this.byCreation.length, after === undefined ? Infinity : after - 1) - 1;
    for (let i = start; i >= 0; i--) {
      const r = this.byCreation[i] as RunRow;
      if (query.tenant !== undefined && r.tenant !== query.tenant) continue;
      if (statuses.size > 0 && !statuses.has(r.status)) continue;
      const tags = this.tags.get(r.id);
      if (pairs.some(([k, v]) => tags?.get(k) !== v)) continue;
      if (items.length === query.limit) return { items, nextCursor: encodeCursor((last as RunRow).created_seq) };
      items.push(runRecord(r));
      last = r;
    }
    return { items, nextCursor: null };
  }

  async findByIdempotencyKey(tenant: string, key: string): Promise<string | undefined> {
    return this.keys.get(keyOf(tenant, key));
  }

  async unfinished(): Promise<string[]> {
    return this.byCreation.filter(isActive).map((r) => r.id);
  }

  async activeCount(tenant: string): Promise<number> {
    return this.byCreation.filter((r) => r.tenant === tenant && isActive(r)).length;
  }

  async runsHoldingKey(tenant: string, key: string): Promise<string[]> {
    return this.byCreation
      .filter((r) => r.tenant === tenant && isActive(r) && JSON.parse(this.log.get(r.id)?.[0]?.data ?? '{}').concurrencyKey === key)
      .map((r) => r.id);
  }

  async reviews(query: { status?: 'pending' | 'decided'; runId?: string; tenant?: string }): Promise<ReviewRecord[]> {
    const out: ReviewRecord[] = [];
    for (const r of this.reviewRows.values()) {
      if (query.status !== undefined && r.status !== query.status) continue;
      if (query.runId !== undefined && r.run_id !== query.runId) continue;
      if (query.tenant !== undefined && r.tenant !== query.tenant) continue;
      out.push(reviewRecord(r));
    }
    return out;
  }

  async review(id: string): Promise<ReviewRecord | undefined> {
    const row = this.reviewRows.get(id);
    return row && reviewRecord(row);
  }

  async countsByStatus(tenant?: string): Promise<Record<string, number>> {
    const n = new Map<string, number>();
    for (const r of this.byCreation) if (tenant === undefined || r.tenant === tenant) n.set(r.status, (n.get(r.status) ?? 0) + 1);
    return statusCounts([...n].map(([status, count]) => ({ status, n: count })));
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.runs = new Map();
    this.byCreation = [];
    this.tags = new Map();
    this.log = new Map();
    this.reviewRows = new Map();
    this.keys = new Map();
  }

  private apply(step: Step): void {
    switch (step.kind) {
      case 'createRun': {
        const row: RunRow = { ...step.run, created_seq: this.byCreation.length + 1 };
        this.runs.set(row.id, row);
        this.byCreation.push(row);
        this.tags.set(row.id, new Map(step.tags));
        if (row.idempotency_key !== null) this.keys.set(keyOf(row.tenant, row.idempotency_key), row.id);
        return;
      }
      case 'event': {
        let list = this.log.get(step.event.run_id);
        if (!list) this.log.set(step.event.run_id, (list = []));
        list.push(step.event);
        return;
      }
      case 'setStatus': {
        const row = this.runs.get(step.runId) as RunRow;
        row.status = step.status;
        row.ended_at = step.endedAt;
        row.call_count += step.addCalls;
        return;
      }
      case 'openReview':
        this.reviewRows.set(step.review.id, { ...step.review });
        return;
      case 'closeReview':
        for (const r of this.reviewRows.values()) {
          if (r.run_id === step.runId && r.call_id === step.callId && r.status === 'pending') {
            r.status = 'decided';
            r.decision = step.decision;
            r.decided_at = step.at;
          }
        }
        return;
    }
  }
}

function keyOf(tenant: string, key: string): string {
  return `${tenant}\u0000${key}`;
}
