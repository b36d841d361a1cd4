/**
 * The embedded store (DESIGN §8): one SQLite file in WAL mode with `synchronous = FULL`, so an append
 * is on disk when `append` returns. Schema in `migrations/`, applied on open.
 *
 * `append` plans the batch (batch.ts: every rule checked first) and writes it inside one IMMEDIATE
 * transaction, so a batch is stored whole or not at all. The last seq of each run is kept in a small
 * map, loaded lazily with `SELECT max(seq)` and updated only after a commit; it assumes this process
 * is the file's only writer (other processes may read). `:memory:` writes on the one connection.
 *
 * A file plans the batch the same way here, then hands its writes to a writer thread with its own connection (writer-thread.ts), which commits them with the same pragmas:
 * the fsync then blocks that thread, not the event loop. Reads stay on this connection and see a batch
 * once it is committed. Several batches may be in flight: each is planned on top of those before it
 * (their last seqs, `pendingSeqs`); the thread commits them in order, and once one fails it refuses every
 * later one, so none is stored on top of a batch that is not. Other checks that read the file (an
 * idempotency key, a review's run) see only committed batches; what they miss, the database's own
 * constraints refuse (a duplicate key) or the batch fails its plan, and the engine stores it again once
 * the batches before it are settled.
 *
 * A full disk, an I/O error or a lock held too long is `store_unavailable` (the engine tries again);
 * so is a disk with less than `MIN_FREE_BYTES` free to `ping`, which says when there is room again.
 */
import { mkdirSync, statfsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { storedEvent, type RunEvent } from '../core/events.js';
import { planBatch, type EventRow, type StoredState, type Step } from './batch.js';
import { migrate } from './migrate.js';
import { checkLimit, decodeCursor, encodeCursor, reviewRecord, runRecord, statusCounts, type ReviewRow, type RunRow } from './rows.js';
import type { ListRunsQuery, ReviewRecord, RunRecord, Store } from './types.js';
import { StoreError } from './errors.js';
import { WriterThread, type Write } from './writer-thread.js';
import { encodeValue, encodeWrites } from './writes-codec.mjs';

/** How long a statement waits for another connection's lock before failing. */
const BUSY_TIMEOUT_MS = 5000;
/** The seq map is a cache: past this many runs it starts over (and reloads lazily). */
const MAX_CACHED_RUNS = 10_000;
/** Statements built per filter shape (list, reviews) are cached up to this many. */
const MAX_CACHED_SHAPES = 200;
/** Less room than this on the database's disk, and `ping` says the store is unavailable (the disk is full). */
const MIN_FREE_BYTES = 1024 * 1024;
const ACTIVE = `status IN ('queued', 'running')`;
/** Every connection to the file, this one and the writer thread's, is set up with these. */
const PRAGMAS = ['journal_mode = WAL', 'synchronous = FULL', `busy_timeout = ${BUSY_TIMEOUT_MS}`, 'foreign_keys = ON'];

/**
 * The statements that write, by name: run on this connection (`:memory:`), else on the writer thread's
 * (writer-thread.ts). Parameters are positional: a batch goes to the writer thread as text
 * (writes-codec.mjs), where named ones would repeat every column name in every row (and be looked up by
 * name again there).
 */
const WRITES = {
  insertRun: `INSERT INTO runs (id, created_seq, tenant, status, failure, tags, created_at, ended_at, call_count, idempotency_key)
    VALUES (?, (SELECT coalesce(max(created_seq), 0) + 1 FROM runs), ?, ?, ?, ?, ?, ?, ?, ?)`,
  insertTag: 'INSERT INTO run_tags (run_id, key, value) VALUES (?, ?, ?)',
  insertEvent: 'INSERT INTO events (run_id, seq, type, call_id, at, data) VALUES (?, ?, ?, ?, ?, ?)',
  setStatus: 'UPDATE runs SET status = ?, ended_at = ?, call_count = call_count + ? WHERE id = ?',
  openReview: `INSERT INTO reviews (id, run_id, call_id, tenant, tool, args, reason, status, decision, created_at, decided_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  closeReview: `UPDATE reviews SET status = 'decided', decision = ?, decided_at = ? WHERE run_id = ? AND call_id = ? AND status = 'pending'`,
} as const;

/** The statements (and their parameters, in the order of the statement's placeholders) that store one planned step. */
export function writesOf(step: Step): Write[] {
  switch (step.kind) {
    case 'createRun': {
      const r = step.run;
      return [
        ['insertRun', [r.id, r.tenant, r.status, r.failure, r.tags, r.created_at, r.ended_at, r.call_count, r.idempotency_key]],
        ...step.tags.map(([key, value]): Write => ['insertTag', [r.id, key, value]]),
      ];
    }
    case 'event': {
      const e = step.event;
      return [['insertEvent', [e.run_id, e.seq, e.type, e.call_id, e.at, e.data]]];
    }
    case 'setStatus':
      return [['setStatus', [step.status, step.endedAt, step.addCalls, step.runId]]];
    case 'openReview': {
      const r = step.review;
      return [
        ['openReview', [r.id, r.run_id, r.call_id, r.tenant, r.tool, r.args, r.reason, r.status, r.decision, r.created_at, r.decided_at]],
      ];
    }
    case 'closeReview':
      return [['closeReview', [step.decision, step.at, step.runId, step.callId]]];
  }
}

const INSERT_EVENT = encodeValue('insertEvent');

/**
 * `encodeWrites(steps.flatMap(writesOf))` (writes-codec.mjs), made without the arrays in between: an
 * event (most of every batch) is written out directly.
 */
export function encodeSteps(steps: readonly Step[]): string {
  let out = '';
  for (const step of steps) {
    if (step.kind === 'event') {
      const e = step.event;
      out += `w6;${INSERT_EVENT}${encodeValue(e.run_id)}${encodeValue(e.seq)}${encodeValue(e.type)}${encodeValue(e.call_id)}${encodeValue(e.at)}${encodeValue(e.data)}`;
    } else {
      out += encodeWrites(writesOf(step));
    }
  }
  return out;
}

/**
 * Opens (creating it and its folder if needed) and migrates a SQLite store. `:memory:` gives a
 * private in-memory database.
 * @example const store = openSqliteStore('./data/toolgraph.db');
 */
export function openSqliteStore(file: string): Store {
  if (file !== ':memory:' && !file.startsWith('file:')) mkdirSync(dirname(resolve(file)), { recursive: true });
  const db = new Database(file);
  try {
    for (const p of PRAGMAS) db.pragma(p);
    migrate(db);
    // A writer thread needs a second connection to the same database: a file, not `:memory:`.
    return new SqliteStore(db, file !== ':memory:' && !file.startsWith('file:') ? resolve(file) : undefined);
  } catch (err) {
    db.close();
    throw err;
  }
}

/** SQLite's result codes that say the disk or the file is in trouble, not the batch: try again later. */
const UNAVAILABLE = /^SQLITE_(FULL|IOERR|BUSY|LOCKED|CANTOPEN|READONLY|PROTOCOL|NOLFS)/;

/** A driver error as the store reports it: `store_unavailable` when the file cannot be written now. */
function classify(err: unknown): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && UNAVAILABLE.test(code))
    return new StoreError('store_unavailable', `the SQLite database cannot be written now (${code}): ${(err as Error).message}`);
  return err;
}

class SqliteStore implements Store {
  readonly kind = 'sqlite' as const;
  private readonly seqs = new Map<string, number>();
  /**
   * The last seq of each run with events in a batch still in flight on the writer thread: the next
   * batch is planned on top of them (see `appendOnWriter`). Empty when none is in flight.
   */
  private readonly pendingSeqs = new Map<string, number>();
  private readonly shapes = new Map<string, Database.Statement>();
  private readonly q;
  private readonly writes: Record<string, Database.Statement>;
  private readonly state: StoredState;
  /**
   * What a batch for the writer thread is planned on: `state`, but a `run.created` of a run that no
   * batch in flight or cached seq knows is taken to be new without asking the file (a query per new run
   * on the event loop, the dearest part of planning a small run). The runs' unique id makes the writer
   * refuse it if it is not, and `explain` turns that into the `seq_out_of_order` the query would
   * have found.
   */
  private readonly onWriter: StoredState;
  private readonly write: (events: readonly RunEvent[]) => Map<string, number>;
  /** Started on the first `append` to a file. */
  private writer: WriterThread | undefined;
  private readonly file: string | undefined;

  constructor(
    private readonly db: Database.Database,
    file?: string,
  ) {
    const p = (sql: string) => db.prepare(sql);
    this.writes = Object.fromEntries(Object.entries(WRITES).map(([name, sql]) => [name, p(sql)]));
    this.q = {
      lastSeq: p('SELECT max(seq) FROM events WHERE run_id = ?').pluck(),
      tenantOf: p('SELECT tenant FROM runs WHERE id = ?').pluck(),
      byKey: p('SELECT id FROM runs WHERE tenant = ? AND idempotency_key = ?').pluck(),
      toolOf: p(`SELECT json_extract(c.value, '$.tool') FROM events e, json_each(e.data, '$.calls') c
        WHERE e.run_id = ? AND e.type IN ('run.created', 'run.replanned') AND json_extract(c.value, '$.id') = ? LIMIT 1`).pluck(),
      events: p('SELECT seq, type, call_id, at, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq'),
      run: p('SELECT * FROM runs WHERE id = ?'),
      unfinished: p(`SELECT id FROM runs WHERE ${ACTIVE} ORDER BY created_seq`).pluck(),
      activeCount: p(`SELECT count(*) FROM runs WHERE tenant = ? AND ${ACTIVE}`).pluck(),
      holdingKey: p(`SELECT r.id FROM runs r JOIN events e ON e.run_id = r.id AND e.seq = 1
        WHERE r.tenant = ? AND r.${ACTIVE} AND json_extract(e.data, '$.concurrencyKey') = ? ORDER BY r.created_seq`).pluck(),
      counts: p('SELECT status, count(*) AS n FROM runs GROUP BY status'),
      countsOf: p('SELECT status, count(*) AS n FROM runs WHERE tenant = ? GROUP BY status'),
      review: p('SELECT * FROM reviews WHERE id = ?'),
    };
    this.state = {
      lastSeq: (runId) => this.lastSeq(runId, false),
      tenantOf: (runId) => this.q.tenantOf.get(runId) as string | undefined,
      idempotencyOwner: (tenant, key) => this.q.byKey.get(tenant, key) as string | undefined,
      toolOf: (runId, callId) => (this.q.toolOf.get(runId, callId) as string | null | undefined) ?? undefined,
    };
    this.onWriter = { ...this.state, lastSeq: (runId, creating) => this.lastSeq(runId, creating === true) };
    const tx = db.transaction((events: readonly RunEvent[]) => {
      const plan = planBatch(events, this.state);
      for (const step of plan.steps) for (const [name, params] of writesOf(step)) (this.writes[name] as Database.Statement).run(...params);
      return plan.lastSeqs;
    });
    this.write = (events) => tx.immediate(events);
    this.file = file;
  }

  append(events: readonly RunEvent[]): Promise<void> {
    if (events.length === 0) return Promise.resolve();
    if (this.file !== undefined) return this.appendOnWriter(this.file, events);
    try {
      this.remember(this.write(events));
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(classify(err) as Error);
    }
  }

  private appendOnWriter(file: string, events: readonly RunEvent[]): Promise<void> {
    let plan: ReturnType<typeof planBatch>;
    try {
      // Outside a transaction, but nothing else writes now: the batches in flight on the writer thread
      // are seen through `pendingSeqs`.
      plan = planBatch(events, this.onWriter);
    } catch (err) {
      return Promise.reject(classify(err) as Error);
    }
    const writer = (this.writer ??= new WriterThread(file, PRAGMAS, WRITES));
    // The next batch is planned on top of this one.
    for (const [runId, seq] of plan.lastSeqs) this.pendingSeqs.set(runId, seq);
    const pending = writer.run(
      encodeSteps(plan.steps),
      () => {
        this.remember(plan.lastSeqs);
        if (writer.pending === 0) this.pendingSeqs.clear();
      },
      // Nothing after it goes in either (until the next batch, planned from the file).
      () => this.pendingSeqs.clear(),
    );
    return pending.done.catch((err: unknown) => {
      throw classify(this.explain(err, events));
    });
  }

  /**
   * The error of a batch the writer thread refused, as `append` would have worded it: a `run.created`
   * planned without a look-up (see `onWriter`) for a run that exists breaks the runs' unique id, and is
   * the `seq_out_of_order` that the look-up would have found (the batch is rolled back, so the file
   * holds what it held before it).
   */
  private explain(err: unknown, events: readonly RunEvent[]): unknown {
    if ((err as { code?: string }).code !== 'SQLITE_CONSTRAINT_PRIMARYKEY' || !/\bruns\.id\b/.test((err as Error).message)) return err;
    for (const e of events) {
      if (e.type !== 'run.created') continue;
      const last = (this.q.lastSeq.get(e.runId) as number | null) ?? 0;
      if (last > 0)
        return new StoreError(
          'seq_out_of_order',
          `event ${e.type} of run ${e.runId} has seq ${e.seq}, but the next seq of that run is ${last + 1}`,
        );
    }
    return err;
  }

  /** Only after a commit: a rolled-back batch leaves the cache as the database is. */
  private remember(lastSeqs: Map<string, number>): void {
    if (this.seqs.size + lastSeqs.size > MAX_CACHED_RUNS) this.seqs.clear();
    for (const [runId, seq] of lastSeqs) this.seqs.set(runId, seq);
  }

  async events(runId: string, afterSeq = 0): Promise<RunEvent[]> {
    return (this.q.events.all(runId, afterSeq) as Omit<EventRow, 'run_id'>[]).map((r) =>
      storedEvent({ seq: r.seq, type: r.type, runId, callId: r.call_id, at: r.at, data: r.data }),
    );
  }

  async run(runId: string): Promise<RunRecord | undefined> {
    const row = this.q.run.get(runId) as RunRow | undefined;
    return row && runRecord(row);
  }

  async list(query: ListRunsQuery): Promise<{ items: RunRecord[]; nextCursor: string | null }> {
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

  async findByIdempotencyKey(tenant: string, key: string): Promise<string | undefined> {
    return this.q.byKey.get(tenant, key) as string | undefined;
  }

  async unfinished(): Promise<string[]> {
    return this.q.unfinished.all() as string[];
  }

  async runsHoldingKey(tenant: string, key: string): Promise<string[]> {
    return this.q.holdingKey.all(tenant, key) as string[];
  }

  async activeCount(tenant: string): Promise<number> {
    return this.q.activeCount.get(tenant) as number;
  }

  async reviews(query: { status?: 'pending' | 'decided'; runId?: string; tenant?: string }): Promise<ReviewRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    for (const [column, value] of [
      ['status', query.status],
      ['run_id', query.runId],
      ['tenant', query.tenant],
    ] as const) {
      if (value === undefined) continue;
      where.push(`${column} = ?`);
      params.push(value);
    }
    const sql = `SELECT * FROM reviews${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY rowid`;
    return (this.shape(sql).all(...params) as ReviewRow[]).map(reviewRecord);
  }

  async review(id: string): Promise<ReviewRecord | undefined> {
    const row = this.q.review.get(id) as ReviewRow | undefined;
    return row && reviewRecord(row);
  }

  async countsByStatus(tenant?: string): Promise<Record<string, number>> {
    const rows = (tenant === undefined ? this.q.counts.all() : this.q.countsOf.all(tenant)) as { status: string; n: number }[];
    return statusCounts(rows);
  }

  /** The file answers, and its disk has room (`MIN_FREE_BYTES`): a full disk is degraded before a write fails. */
  async ping(): Promise<void> {
    try {
      this.db.prepare('SELECT 1').get();
    } catch (err) {
      throw classify(err);
    }
    if (this.file === undefined) return;
    const fs = statfsSync(dirname(this.file));
    const free = fs.bavail * fs.bsize;
    if (free < MIN_FREE_BYTES)
      throw new StoreError('store_unavailable', `the disk of the SQLite database has ${free} bytes free (less than ${MIN_FREE_BYTES})`);
  }

  async close(): Promise<void> {
    this.writer?.close();
    this.writer = undefined;
    if (this.db.open) this.db.close();
  }

  /** `creating`: see `onWriter`. */
  private lastSeq(runId: string, creating: boolean): number {
    let seq = this.pendingSeqs.get(runId) ?? this.seqs.get(runId);
    if (seq === undefined) {
      if (creating) return 0;
      seq = (this.q.lastSeq.get(runId) as number | null) ?? 0;
      if (seq > 0) this.seqs.set(runId, seq);
    }
    return seq;
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
