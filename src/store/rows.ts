/**
 * What both backends share below the interface: the row shapes (the SQLite columns; the memory store
 * keeps the same objects), their conversion to records, and the list cursor and limit. Sharing these
 * is what keeps the two backends' answers identical.
 */
import { RUN_STATUSES, type RunStatus } from '../core/calls.js';
import { StoreError } from './errors.js';
import type { ReviewRecord, RunRecord } from './types.js';

export interface RunRow {
  id: string;
  /** Creation order, 1, 2, 3…: the newest-first order of `list` and its cursor. */
  created_seq: number;
  tenant: string;
  status: RunStatus;
  failure: string;
  /** JSON object of strings. */
  tags: string;
  created_at: number;
  ended_at: number | null;
  call_count: number;
  idempotency_key: string | null;
}

export interface ReviewRow {
  id: string;
  run_id: string;
  call_id: string;
  tenant: string;
  tool: string;
  /** JSON object. */
  args: string;
  reason: string;
  status: 'pending' | 'decided';
  decision: string | null;
  created_at: number;
  decided_at: number | null;
}

/** The statuses of a run that may still change by itself: what recovery resumes. */
export const ACTIVE_STATUSES: readonly RunStatus[] = ['queued', 'running'];

export const MAX_LIMIT = 200;

const iso = (ms: number): string => new Date(ms).toISOString();

export function runRecord(r: RunRow): RunRecord {
  return {
    id: r.id,
    tenant: r.tenant,
    status: r.status,
    failure: r.failure,
    tags: JSON.parse(r.tags) as Record<string, string>,
    createdAt: iso(r.created_at),
    endedAt: r.ended_at === null ? null : iso(r.ended_at),
    callCount: r.call_count,
    idempotencyKey: r.idempotency_key,
  };
}

export function reviewRecord(r: ReviewRow): ReviewRecord {
  return {
    id: r.id,
    runId: r.run_id,
    callId: r.call_id,
    tenant: r.tenant,
    tool: r.tool,
    args: JSON.parse(r.args) as Record<string, unknown>,
    reason: r.reason,
    status: r.status,
    decision: r.decision,
    createdAt: iso(r.created_at),
    decidedAt: r.decided_at === null ? null : iso(r.decided_at),
  };
}

/** A zero for every known status, then the counts found. */
export function statusCounts(rows: Iterable<{ status: string; n: number }>): Record<string, number> {
  const out: Record<string, number> = Object.fromEntries(RUN_STATUSES.map((s) => [s, 0]));
  for (const r of rows) out[r.status] = (out[r.status] ?? 0) + r.n;
  return out;
}

export function checkLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
    throw new StoreError('invalid_limit', `Expected \`limit\` to be an integer from 1 to ${MAX_LIMIT}, got \`${String(limit)}\``);
  }
}

const CURSOR_PREFIX = 'r1:';

/** The cursor after a page whose last run has this creation order. Opaque to clients. */
export function encodeCursor(createdSeq: number): string {
  return Buffer.from(`${CURSOR_PREFIX}${createdSeq}`, 'utf8').toString('base64url');
}

/** The creation order a cursor points after; anything `encodeCursor` did not make is `invalid_cursor`. */
export function decodeCursor(cursor: string): number {
  const text = /^[A-Za-z0-9_-]{1,64}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const m = /^r1:([1-9][0-9]{0,14})$/.exec(text);
  if (!m) throw new StoreError('invalid_cursor', 'the cursor is not one that a previous page returned');
  return Number(m[1]);
}
