/**
 * The embedded store (DESIGN §8): one SQLite file in WAL mode with `synchronous = FULL`, so an append
 * is on disk when `append` returns. Schema in `migrations/`, applied on open.
 *
 * `append` plans the batch (batch.ts: every rule checked first) and writes it inside one IMMEDIATE
 * transaction, so a batch is stored whole or not at all. The last seq of each run is kept in a small
 * map, loaded lazily with `SELECT max(seq)` and updated only after a commit; it assumes this process
 * is the file's only writer (other processes may read).
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import type { RunEvent } from '../core/events.js';
import { planBatch, type EventRow, type StoredState, type Step } from './batch.js';
import { migrate } from './migrate.js';
import { checkLimit, decodeCursor, encodeCursor, reviewRecord, runRecord, statusCounts, type ReviewRow, type RunRow } from './rows.js';
import type { ListRunsQuery, ReviewRecord, RunRecord, Store } from './types.js';

/** How long a statement waits for another connection's lock before failing. */
const BUSY_TIMEOUT_MS = 5000;
/** The seq map is a cache: past this many runs it starts over (and reloads lazily). */
const MAX_CACHED_RUNS = 10_000;
/** Statements built per filter shape (list, reviews) are cached up to this many. */
const MAX_CACHED_SHAPES = 200;
const ACTIVE = `status IN ('queued', 'running')`;

/**
 * Opens (creating it and its folder if needed) and migrates a SQLite store. `:memory:` gives a
 * private in-memory database.
 * @example const store = openSqliteStore('./data/toolgraph.db');
 */
export function openSqliteStore(file: string): Store {
  if (file !== ':memory:' && !file.startsWith('file:')) mkdirSync(dirname(resolve(file)), { recursive: true });
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    db.pragma('foreign_keys = ON');
    migrate(db);
    return new SqliteStore(db);
  } catch (err) {
    db.close();
    throw err;
  }
}

class SqliteStore implements Store {
  private readonly seqs = new Map<string, number>();
  private readonly shapes = new Map<string, Database.Statement>();
  private readonly q;
  private readonly write: (events: readonly RunEvent[]) => Map<string, number>;

  constructor(private readonly db: Database.Database) {
    const p = (sql: string) => db.prepare(sql);
    this.q = {
      insertRun: p(`INSERT INTO runs (id, created_seq, tenant, status, failure, tags, created_at, ended_at, call_count, idempotency_key)
        VALUES (@id, (SELECT coalesce(max(created_seq), 0) + 1 FROM runs), @tenant, @status, @failure, @tags, @created_at, @ended_at, @call_count, @idempotency_key)`),
      insertTag: p('INSERT INTO run_tags (run_id, key, value) VALUES (?, ?, ?)'),
      insertEvent: p('INSERT INTO events (run_id, seq, type, call_id, at, data) VALUES (@run_id, @seq, @type, @call_id, @at, @data)'),
      setStatus: p('UPDATE runs SET status = ?, ended_at = ?, call_count = call_count + ? WHERE id = ?'),
      openReview: p(`INSERT INTO reviews (id, run_id, call_id, tenant, tool, args, reason, status, decision, created_at, decided_at)
        VALUES (@id, @run_id, @call_id, @tenant, @tool, @args, @reason, @status, @decision, @created_at, @decided_at)`),
      closeReview: p(`UPDATE reviews SET status = 'decided', decision = ?, decided_at = ? WHERE run_id = ? AND call_id = ? AND status = 'pending'`),
      lastSeq: p('SELECT max(seq) FROM events WHERE run_id = ?').pluck(),
      tenantOf: p('SELECT tenant FROM runs WHERE id = ?').pluck(),
      byKey: p('SELECT id FROM runs WHERE tenant = ? AND idempotency_key = ?').pluck(),
      toolOf: p(`SELECT json_extract(c.value, '$.tool') FROM events e, json_each(e.data, '$.calls') c
        WHERE e.run_id = ? AND e.type IN ('run.created', 'run.replanned') AND json_extract(c.value, '$.id') = ? LIMIT 1`).pluck(),
      events: p('SELECT seq, type, call_id, at, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq'),
      run: p('SELECT * FROM runs WHERE id = ?'),
      unfinished: p(`SELECT id FROM runs WHERE ${ACTIVE} ORDER BY created_seq`).pluck(),
      activeCount: p(`SELECT count(*) FROM runs WHERE tenant = ? AND ${ACTIVE}`).pluck(),
      counts: p('SELECT status, count(*) AS n FROM runs GROUP BY status'),
      countsOf: p('SELECT status, count(*) AS n FROM runs WHERE tenant = ? GROUP BY status'),
      review: p('SELECT * FROM reviews WHERE id = ?'),
    };
    const state: StoredState = {
      lastSeq: (runId) => this.lastSeq(runId),
      tenantOf: (runId) => this.q.tenantOf.get(runId) as string | undefined,
      idempotencyOwner: (tenant, key) => this.q.byKey.get(tenant, key) as string | undefined,
      toolOf: (runId, callId) => (this.q.toolOf.get(runId, callId) as string | null | undefined) ?? undefined,
    };
    const tx = db.transaction((events: readonly RunEvent[]) => {
      const plan = planBatch(events, state);
      for (const step of plan.steps) this.apply(step);
      return plan.lastSeqs;
    });
    this.write = (events) => tx.immediate(events);
  }

  append(events: readonly RunEvent[]): void {
    if (events.length === 0) return;
    const lastSeqs = this.write(events);
    // Only now, after the commit: a rolled-back batch leaves the cache as the database is.
    if (this.seqs.size + lastSeqs.size > MAX_CACHED_RUNS) this.seqs.clear();
    for (const [runId, seq] of lastSeqs) this.seqs.set(runId, seq);
  }

  events(runId: string, afterSeq = 0): RunEvent[] {
    return (this.q.events.all(runId, afterSeq) as Omit<EventRow, 'run_id'>[]).map((r) => {
      const data = JSON.parse(r.data) as Record<string, unknown>;
      return r.call_id === null
        ? { seq: r.seq, type: r.type as RunEvent['type'], runId, at: r.at, data }
        : { seq: r.seq, type: r.type as RunEvent['type'], runId, callId: r.call_id, at: r.at, data };
    });
  }

  run(runId: string): RunRecord | undefined {
    const row = this.q.run.get(runId) as RunRow | undefined;
    return row && runRecord(row);
  }

  list(query: ListRunsQuery): { items: RunRecord[]; nextCursor: string | null } {
    checkLimit(query.limit);
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.tenant !== undefined) {
      where.push('tenant = ?');
      params.push(query.tenant);
    }
    const statuses = [...new Set(query.status ?? [])];
    if (statuses.length > 0) {
      where.push(`status IN (${statuses.map(() => '?').join(', ')})`);
      params.push(...statuses);
    }
    for (const [key, value] of query.tags ?? []) {
      where.push('id IN (SELECT run_id FROM run_tags WHERE key = ? AND value = ?)');
      params.push(key, value);
    }
    if (after !== undefined) {
      where.push('created_seq < ?');
      params.push(after);
    }
    const sql = `SELECT * FROM runs${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY created_seq DESC LIMIT ?`;
    // One row more than asked tells whether another page follows.
    const rows = this.shape(sql).all(...params, query.limit + 1) as RunRow[];
    const page = rows.slice(0, query.limit);
    const last = page[page.length - 1];
    return { items: page.map(runRecord), nextCursor: rows.length > query.limit && last ? encodeCursor(last.created_seq) : null };
  }

  findByIdempotencyKey(tenant: string, key: string): string | undefined {
    return this.q.byKey.get(tenant, key) as string | undefined;
  }

  unfinished(): string[] {
    return this.q.unfinished.all() as string[];
  }

  activeCount(tenant: string): number {
    return this.q.activeCount.get(tenant) as number;
  }

  reviews(query: { status?: 'pending' | 'decided'; runId?: string; tenant?: string }): ReviewRecord[] {
    const where: string[] = [];
    const params: unknown[] = [];
    for (const [column, value] of [['status', query.status], ['run_id', query.runId], ['tenant', query.tenant]] as const) {
      if (value === undefined) continue;
      where.push(`${column} = ?`);
      params.push(value);
    }
    const sql = `SELECT * FROM reviews${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY rowid`;
    return (this.shape(sql).all(...params) as ReviewRow[]).map(reviewRecord);
  }

  review(id: string): ReviewRecord | undefined {
    const row = this.q.review.get(id) as ReviewRow | undefined;
    return row && reviewRecord(row);
  }

  countsByStatus(tenant?: string): Record<string, number> {
    const rows = (tenant === undefined ? this.q.counts.all() : this.q.countsOf.all(tenant)) as { status: string; n: number }[];
    return statusCounts(rows);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  private lastSeq(runId: string): number {
    let seq = this.seqs.get(runId);
    if (seq === undefined) {
      seq = (this.q.lastSeq.get(runId) as number | null) ?? 0;
      if (seq > 0) this.seqs.set(runId, seq);
    }
    return seq;
  }

  private apply(step: Step): void {
    const q = this.q;
    switch (step.kind) {
      case 'createRun':
        q.insertRun.run(step.run);
        for (const [key, value] of step.tags) q.insertTag.run(step.run.id, key, value);
        return;
      case 'event':
        q.insertEvent.run(step.event);
        return;
      case 'setStatus':
        q.setStatus.run(step.status, step.endedAt, step.addCalls, step.runId);
        return;
      case 'openReview':
        q.openReview.run(step.review);
        return;
      case 'closeReview':
        q.closeReview.run(step.decision, step.at, step.runId, step.callId);
        return;
    }
  }

  /** A statement for a filter shape, prepared on first use. */
  private shape(sql: string): Database.Statement {
    let stmt = this.shapes.get(sql);
    if (!stmt) {
      if (this.shapes.size >= MAX_CACHED_SHAPES) this.shapes.clear();
      stmt = this.db.prepare(sql);
      this.shapes.set(sql, stmt);
    }
    return stmt;
  }
}
