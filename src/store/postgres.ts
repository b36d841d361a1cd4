/**
 * The PostgreSQL store (DESIGN §12), with node-postgres (`pg`): the same interface and guarantees as
 * SQLite, on a database that several processes can share.
 *
 * - Schema: the numbered files of `migrations/postgres/`, applied under an advisory lock, so replicas
 *   may start together (postgres-migrate.ts).
 * - Appends: one statement per batch (postgres-append.ts), which checks the gapless seq itself. Batches
 *   are written one at a time, in the order they came; those that arrive while one is written go in
 *   the next statement together (a group commit on the store's side too). When a batch fails, every
 *   batch waiting behind it is refused (`batch_refused`: it was planned on top of it), as SQLite's
 *   writer thread does.
 * - Reads go to the pool (`poolSize` connections at most) and run concurrently.
 * - Faults: a connection that fails, a server that is gone or an append that takes longer than
 *   `writeTimeoutMs` is `store_unavailable`. When a write's outcome is unknown (the connection broke
 *   while it ran, or it timed out and may still land), the next refusal of a batch is checked
 *   against what the database holds: a batch that is there already counts as stored, so that trying it
 *   again never writes an event twice.
 */
import type pg from 'pg';
import { storedEvent, type RunEvent } from '../core/events.js';
import { planBatch, type StoredState } from './batch.js';
import { isUnavailableError, StoreError } from './errors.js';
import { appendStatement } from './postgres-append.js';
import { migratePostgres } from './postgres-migrate.js';
import { createPgPool, PG_BOUNDS } from './pg-pool.js';
import { checkLimit, decodeCursor, encodeCursor, reviewRecord, runRecord, statusCounts, type ReviewRow, type RunRow } from './rows.js';
import type { ListRunsQuery, ReviewRecord, RunRecord, Store } from './types.js';

export interface PostgresStoreOptions {
  /** `postgres://USER:PASSWORD@HOST:PORT/DB` (or `postgresql://…`). */
  url: string;
  /** The most connections the store opens at once; default 10. */
  poolSize?: number;
  /** How long a new connection, or a free one of the pool, may take (ms); default 2000 (pg-pool.ts). */
  connectTimeoutMs?: number;
  /**
   * How long an append may take (ms) before it counts as `store_unavailable` (its outcome then unknown,
   * see the top of the file); default 3000, the bound of every statement (pg-pool.ts). A server that
   * hangs never holds a submission longer.
   */
  writeTimeoutMs?: number;
  /** Told of each connection fault (a terminated backend, a lost socket); the store goes on. */
  onConnectionError?: (err: Error) => void;
}

/**
 * Opens the pool, checks that the server answers and migrates it. Rejects with `store_unavailable`
 * (naming host and port, never the password) when it cannot be reached.
 * @example const store = await openPostgresStore({ url: 'postgres://toolgraph@127.0.0.1:5432/toolgraph' });
 */
export async function openPostgresStore(opts: PostgresStoreOptions): Promise<PostgresStore> {
  const where = describeUrl(opts.url);
  const pool = createPgPool({
    url: opts.url,
    max: opts.poolSize ?? 10,
    connectTimeoutMs: opts.connectTimeoutMs ?? PG_BOUNDS.connectTimeoutMs,
    ...(opts.onConnectionError ? { onError: opts.onConnectionError } : {}),
  });
  // Migrations wait for each other's advisory lock (replicas that start together): no statement bound.
  const migrating = createPgPool({
    url: opts.url,
    max: 1,
    connectTimeoutMs: opts.connectTimeoutMs ?? PG_BOUNDS.connectTimeoutMs,
    statementTimeoutMs: 0,
  });
  try {
    await migratePostgres(migrating);
  } catch (err) {
    await pool.end().catch(() => {});
    throw classify(err, where);
  } finally {
    await migrating.end().catch(() => {});
  }
  return new PostgresStore(pool, where, opts.url, opts.writeTimeoutMs ?? PG_BOUNDS.statementTimeoutMs);
}

/** `HOST:PORT/DB` of a URL, without user or password. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname || 'localhost'}:${u.port || '5432'}${u.pathname && u.pathname !== '/' ? u.pathname : ''}`;
  } catch {
    return 'an unparsable URL';
  }
}

/** A driver error as the store reports it: `store_unavailable` when the server is not there. */
function classify(err: unknown, where: string): unknown {
  if (err instanceof StoreError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const sqlState = typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
  // The SQLSTATE classes are read in one place (errors.ts); an error without one is the driver's: the server is away.
  if (sqlState !== undefined && !isUnavailableError(err)) return err;
  const reason = (err as Error | null)?.message ?? String(err);
  return new StoreError('store_unavailable', `PostgreSQL at ${where} cannot be reached: ${reason}`);
}

interface Waiting {
  events: readonly RunEvent[];
  /** The instance that appended it (several replicas): written as that one, or not at all. */
  owner: string | undefined;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  /**
   * Several replicas (DESIGN §12): the instance whose lease fences every append (see
   * `appendStatement`); set by the cluster (cluster/lease.ts) once it holds a lease.
   */
  owner: string | undefined;
  /** Set by the cluster: every append is fenced, so none goes in while this replica holds no lease. */
  fenced = false;
  private readonly waiting: Waiting[] = [];
  private writing = false;
  /** Set when a write broke off with its outcome unknown (see the top of the file). */
  private uncertain = false;
  private closed = false;
  private idle: (() => void) | undefined;

  constructor(
    readonly pool: pg.Pool,
    readonly where: string,
    /** For the cluster's own LISTEN connection. */
    readonly url: string,
    /** See `PostgresStoreOptions.writeTimeoutMs`. */
    private readonly writeTimeoutMs: number = 5000,
  ) {}

  append(events: readonly RunEvent[]): Promise<void> {
    if (events.length === 0) return Promise.resolve();
    if (this.closed) return Promise.reject(new StoreError('store_unavailable', 'the store is closed'));
    if (this.fenced && this.owner === undefined)
      return Promise.reject(new StoreError('store_unavailable', 'this replica holds no lease now (it is joining the cluster again)'));
    return new Promise((resolve, reject) => {
      this.waiting.push({ events, owner: this.owner, resolve, reject });
      if (!this.writing) void this.writeLoop();
    });
  }

  /** Writes what waits, one statement at a time, each holding every batch that waited for it. */
  private async writeLoop(): Promise<void> {
    this.writing = true;
    while (this.waiting.length > 0) {
      let group = this.waiting.splice(0);
      // Appended under an instance that is not this replica's any more (its lease was lost meanwhile):
      // never written under the new one.
      const stale = group.filter((w) => w.owner !== this.owner);
      if (stale.length > 0) {
        for (const w of stale) w.reject(new StoreError('lease_lost', `replica ${w.owner} lost its lease: it appends nothing more`));
        group = group.filter((w) => w.owner === this.owner);
        if (group.length === 0) continue;
      }
      const events = group.length === 1 ? (group[0] as Waiting).events : group.flatMap((w) => w.events);
      let err: unknown;
      try {
        await this.write(events, (group[0] as Waiting).owner);
      } catch (e) {
        err = classify(e, this.where);
        if (err instanceof StoreError && err.code === 'store_unavailable') this.uncertain = true;
      }
      if (err === undefined) {
        for (const w of group) w.resolve();
        continue;
      }
      for (const w of group) w.reject(err);
      // Planned on top of what failed: refused, as SQLite's writer thread refuses them.
      const refused = Object.assign(new Error('refused: an earlier batch was not stored'), { code: 'batch_refused' });
      for (const w of this.waiting.splice(0)) w.reject(refused);
    }
    this.writing = false;
    this.idle?.();
  }

  private async write(events: readonly RunEvent[], owner: string | undefined): Promise<void> {
    const firstSeqs = new Map<string, number>();
    const reviewed = new Set<string>();
    // Runs whose first event here is out of place (a run.created not at seq 1, a seq below 1): the
    // planner must see their stored last seq to say what is wrong, as it does for SQLite.
    const odd: string[] = [];
    for (const e of events) {
      if (!firstSeqs.has(e.runId)) {
        firstSeqs.set(e.runId, e.seq);
        if (!Number.isInteger(e.seq) || e.seq < 1 || (e.seq === 1) !== (e.type === 'run.created')) odd.push(e.runId);
      }
      if (e.type === 'call.awaiting_review' && firstSeqs.get(e.runId) !== 1) reviewed.add(e.runId);
    }
    const known = reviewed.size > 0 ? await this.reviewState([...reviewed]) : undefined;
    const stored = new Map<string, number>();
    if (odd.length > 0) {
      const rows = await this.pool.query<{ id: string; last_seq: number }>('SELECT id, last_seq FROM runs WHERE id = ANY($1::text[])', [
        odd,
      ]);
      for (const id of odd) stored.set(id, 0);
      for (const r of rows.rows) stored.set(r.id, r.last_seq);
    }
    const state: StoredState = {
      // Taken as given; the statement checks it (see postgres-append.ts).
      lastSeq: (runId) => stored.get(runId) ?? (firstSeqs.get(runId) ?? 1) - 1,
      tenantOf: (runId) => known?.tenants.get(runId),
      // The unique index refuses a repeated key (see `explain`).
      idempotencyOwner: () => undefined,
      toolOf: (runId, callId) => known?.tools.get(`${runId}\u0000${callId}`),
    };
    const plan = planBatch(events, state);
    const stmt = appendStatement(plan.steps, firstSeqs, owner);
    try {
      // Past the bound, pg answers an error and the pool drops the connection (pg reads the bound from
      // the query too, though its types have it only on the client).
      const query: pg.QueryConfig & { query_timeout: number } = {
        name: stmt.name,
        text: stmt.text,
        values: stmt.values,
        query_timeout: this.writeTimeoutMs,
      };
      await this.pool.query(query);
      this.uncertain = false;
    } catch (err) {
      const classified = classify(err, this.where);
      if (classified instanceof StoreError && classified.code === 'store_unavailable') {
        this.uncertain = true;
        throw classified;
      }
      if ((err as { code?: unknown }).code === 'TG002')
        throw new StoreError('lease_lost', `replica ${owner} lost its lease: it appends nothing more`);
      if (this.uncertain && (await this.alreadyStored(events))) {
        this.uncertain = false;
        return;
      }
      throw await this.explain(err, events);
    }
  }

  /** The tenants and call tools of runs whose reviews a batch opens (runs it does not create). */
  private async reviewState(runIds: string[]): Promise<{ tenants: Map<string, string>; tools: Map<string, string> }> {
    const tenants = new Map<string, string>();
    const tools = new Map<string, string>();
    const runs = await this.pool.query<{ id: string; tenant: string }>('SELECT id, tenant FROM runs WHERE id = ANY($1::text[])', [runIds]);
    for (const r of runs.rows) tenants.set(r.id, r.tenant);
    const calls = await this.pool.query<{ run_id: string; id: string; tool: string }>(
      `SELECT e.run_id, c->>'id' AS id, c->>'tool' AS tool FROM events e, jsonb_array_elements(e.data::jsonb->'calls') c
        WHERE e.run_id = ANY($1::text[]) AND e.type IN ('run.created', 'run.replanned')`,
      [runIds],
    );
    for (const c of calls.rows) if (!tools.has(`${c.run_id}\u0000${c.id}`)) tools.set(`${c.run_id}\u0000${c.id}`, c.tool);
    return { tenants, tools };
  }

  /** Whether every run of the batch holds its last event already (a write whose outcome was unknown). */
  private async alreadyStored(events: readonly RunEvent[]): Promise<boolean> {
    const last = new Map<string, RunEvent>();
    for (const e of events) last.set(e.runId, e);
    const rows = await this.pool.query<{ run_id: string; seq: number; type: string; at: number }>(
      'SELECT e.run_id, e.seq, e.type, e.at FROM events e JOIN unnest($1::text[], $2::int4[]) AS w(run_id, seq) ON e.run_id = w.run_id AND e.seq = w.seq',
      [[...last.keys()], [...last.values()].map((e) => e.seq)],
    );
    return rows.rows.length === last.size && rows.rows.every((r) => last.get(r.run_id)?.type === r.type && last.get(r.run_id)?.at === r.at);
  }

  /** A refused statement's error, worded as the planner words it for SQLite and memory. */
  private async explain(err: unknown, events: readonly RunEvent[]): Promise<unknown> {
    const code = (err as { code?: string }).code;
    const constraint = (err as { constraint?: string }).constraint;
    if (code === '23505' && constraint === 'runs_idempotency_key') {
      for (const e of events) {
        if (e.type === 'run.created' && typeof e.data.idempotencyKey === 'string') {
          return new StoreError(
            'duplicate_idempotency_key',
            `run ${e.runId}: tenant ${e.data.tenant} used idempotency key ${JSON.stringify(e.data.idempotencyKey)} already`,
          );
        }
      }
      return new StoreError('duplicate_idempotency_key', 'a run of this batch uses an idempotency key that its tenant used already');
    }
    if (code !== 'TG001' && code !== '23505' && code !== '23503') return err;
    const ids = [...new Set(events.map((e) => e.runId))];
    const stored = new Map<string, number>();
    try {
      const rows = await this.pool.query<{ id: string; last_seq: number }>('SELECT id, last_seq FROM runs WHERE id = ANY($1::text[])', [
        ids,
      ]);
      for (const r of rows.rows) stored.set(r.id, r.last_seq);
    } catch (e) {
      return classify(e, this.where);
    }
    if (this.owner !== undefined) {
      try {
        const created = new Set(events.filter((e) => e.type === 'run.created').map((e) => e.runId));
        const continued = ids.filter((id) => !created.has(id));
        const rows = await this.pool.query<{ id: string }>('SELECT id FROM runs WHERE id = ANY($1::text[]) AND owner IS DISTINCT FROM $2', [
          continued,
          this.owner,
        ]);
        const lost = rows.rows[0];
        if (lost)
          return new StoreError('lease_lost', `run ${lost.id} is owned by another replica now: ${this.owner} appends nothing more to it`);
      } catch (e) {
        return classify(e, this.where);
      }
    }
    const seen = new Set<string>();
    for (const e of events) {
      if (seen.has(e.runId)) continue;
      seen.add(e.runId);
      const last = stored.get(e.runId) ?? 0;
      if (e.seq !== last + 1)
        return new StoreError(
          'seq_out_of_order',
          `event ${e.type} of run ${e.runId} has seq ${e.seq}, but the next seq of that run is ${last + 1}`,
        );
    }
    return new StoreError('seq_out_of_order', `the batch does not go on from the stored log: ${(err as Error).message}`);
  }

  private async query<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    try {
      return (await this.pool.query<R>(text, values)).rows;
    } catch (err) {
      throw classify(err, this.where);
    }
  }

  async events(runId: string, afterSeq = 0): Promise<RunEvent[]> {
    const rows = await this.query<{ seq: number; type: string; call_id: string | null; at: number; data: string }>(
      'SELECT seq, type, call_id, at, data FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq',
      [runId, afterSeq],
    );
    return rows.map((r) => storedEvent({ seq: r.seq, type: r.type, runId, callId: r.call_id, at: r.at, data: r.data }));
  }

  async run(runId: string): Promise<RunRecord | undefined> {
    const [row] = await this.query<RunRow>('SELECT * FROM runs WHERE id = $1', [runId]);
    return row && runRecord(row);
  }

  async list(query: ListRunsQuery): Promise<{ items: RunRecord[]; nextCursor: string | null }> {
    checkLimit(query.limit);
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
    const where: string[] = [];
    const params: unknown[] = [];
    const p = (v: unknown) => {
      params.push(v);
      return `$${params.length}`;
    };
    if (query.tenant !== undefined) where.push(`tenant = ${p(query.tenant)}`);
    const statuses = [...new Set(query.status ?? [])];
    if (statuses.length > 0) where.push(`status = ANY(${p(statuses)}::text[])`);
    for (const [key, value] of query.tags ?? [])
      where.push(`id IN (SELECT run_id FROM run_tags WHERE key = ${p(key)} AND value = ${p(value)})`);
    if (after !== undefined) where.push(`created_seq < ${p(after)}`);
    // One row more than asked tells whether another page follows.
    const sql = `SELECT * FROM runs${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY created_seq DESC LIMIT ${p(query.limit + 1)}`;
    const rows = await this.query<RunRow>(sql, params);
    const page = rows.slice(0, query.limit);
    const last = page[page.length - 1];
    return { items: page.map(runRecord), nextCursor: rows.length > query.limit && last ? encodeCursor(last.created_seq) : null };
  }

  async findByIdempotencyKey(tenant: string, key: string): Promise<string | undefined> {
    const [row] = await this.query<{ id: string }>('SELECT id FROM runs WHERE tenant = $1 AND idempotency_key = $2', [tenant, key]);
    return row?.id;
  }

  async unfinished(): Promise<string[]> {
    return (await this.query<{ id: string }>(`SELECT id FROM runs WHERE status IN ('queued', 'running') ORDER BY created_seq`)).map(
      (r) => r.id,
    );
  }

  async activeCount(tenant: string): Promise<number> {
    const [row] = await this.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM runs WHERE tenant = $1 AND status IN ('queued', 'running')`,
      [tenant],
    );
    return row?.n ?? 0;
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
      params.push(value);
      where.push(`${column} = $${params.length}`);
    }
    const rows = await this.query<ReviewRow>(
      `SELECT * FROM reviews${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY ord`,
      params,
    );
    return rows.map(reviewRecord);
  }

  async review(id: string): Promise<ReviewRecord | undefined> {
    const [row] = await this.query<ReviewRow>('SELECT * FROM reviews WHERE id = $1', [id]);
    return row && reviewRecord(row);
  }

  async countsByStatus(tenant?: string): Promise<Record<string, number>> {
    const rows =
      tenant === undefined
        ? await this.query<{ status: string; n: number }>('SELECT status, count(*)::int AS n FROM runs GROUP BY status')
        : await this.query<{ status: string; n: number }>('SELECT status, count(*)::int AS n FROM runs WHERE tenant = $1 GROUP BY status', [
            tenant,
          ]);
    return statusCounts(rows);
  }

  async ping(): Promise<void> {
    await this.query('SELECT 1');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.writing) await new Promise<void>((resolve) => (this.idle = resolve));
    await this.pool.end();
  }
}
