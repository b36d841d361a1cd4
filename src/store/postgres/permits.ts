/**
 * The SQL of cluster-wide permits (DESIGN §12; migration 0004): counters per limit key, lock nodes per
 * domain and key prefix, rate buckets, and a row per permit saying what it took. The logic is in
 * cluster/permits.ts and cluster/permit-plan.ts; this module only reads and writes rows.
 *
 * Lock order, the same in every transaction, so two never wait on each other in a cycle: the permit
 * rows a give-back deletes, then counters by key, then lock nodes by (domain, node), then rate buckets
 * by name, each sorted in byte order (`COLLATE "C"`). An ask locks what it needs with an upsert whose
 * rows come sorted (`INSERT … SELECT … ORDER BY … ON CONFLICT DO UPDATE`: rows are locked in the
 * order inserted), reads them from its RETURNING, and writes its increments back in one statement.
 */
import type pg from 'pg';
import type { PermitRequest } from '../../core/scheduler.js';

export interface NodeRow {
  r: number;
  w: number;
  ir: number;
  iw: number;
}

/** A lock row's waiter marks, as JSON text (cluster/permit-waits.ts reads them). */
export interface MarkRow {
  at: string | null;
  below: string | null;
}

export interface BucketRow {
  name: string;
  units: number;
  last: number;
}

/** A permit as listed (a refusal's holders, `GET /v1/limits`). */
export interface PermitRow {
  run_id: string;
  call_id: string;
  tenant: string;
  tool: string;
  domain: string | null;
  reads: string;
  writes: string;
  since: number;
  /** A tool's keyed concurrency: the call's expanded `per` key. */
  per_key?: string | null;
}

/** A tool paused by backpressure (DESIGN §4; migration 0005): `key` '' for the whole tool. */
export interface PauseRow {
  tool: string;
  key: string;
  /** The database's clock (ms). */
  until: number;
  status: number | null;
}

/**
 * Records a pause (a later `until` wins) and tells every replica (`toolgraph_pauses`, payload
 * `{ tool, key, ms, status }`: how long it still holds, so that clocks need not agree).
 */
export async function writePause(pool: pg.Pool, p: { tool: string; key: string; ms: number; status: number | null }): Promise<void> {
  await pool.query(
    `WITH w AS (
       INSERT INTO tool_pauses AS t (tool, key, until, status) VALUES ($1, $2, toolgraph_now() + $3, $4)
       ON CONFLICT (tool, key) DO UPDATE SET until = GREATEST(t.until, excluded.until),
         status = CASE WHEN excluded.until > t.until THEN excluded.status ELSE t.status END
       RETURNING until - toolgraph_now() AS ms, status)
     SELECT pg_notify('toolgraph_pauses', json_build_object('tool', $1::text, 'key', $2::text, 'ms', w.ms, 'status', w.status)::text) FROM w`,
    [p.tool, p.key, Math.max(0, Math.round(p.ms)), p.status],
  );
}

/** The pauses in force, with how long each still holds (ms). */
export async function pausesNow(pool: pg.Pool): Promise<{ tool: string; key: string; ms: number; status: number | null }[]> {
  const r = await pool.query<{ tool: string; key: string; ms: string; status: number | null }>(
    `SELECT tool, key, until - toolgraph_now() AS ms, status FROM tool_pauses WHERE until > toolgraph_now() ORDER BY tool, key LIMIT 10000`,
  );
  return r.rows.map((x) => ({ tool: x.tool, key: x.key, ms: Number(x.ms), status: x.status }));
}

/** Deletes pauses that ended. */
export async function sweepPauses(pool: pg.Pool): Promise<number> {
  return (await pool.query(`DELETE FROM tool_pauses WHERE until <= toolgraph_now()`)).rowCount ?? 0;
}

/** A granted permit to record: the call's ask, the counter keys and lock nodes it took. */
export interface NewPermit extends PermitRequest {
  keys: readonly string[];
  locks: readonly string[];
}

/** What an ask writes back once decided. */
export interface AskWrite {
  instance: string;
  now: number;
  permits: readonly NewPermit[];
  counterDelta: ReadonlyMap<string, number>;
  nodeDelta: ReadonlyMap<string, NodeRow>;
  buckets: readonly BucketRow[];
  /** Places the instance takes into its slices (migration 0008), counted in `counterDelta` too. */
  slices?: ReadonlyMap<string, number>;
}

/** A bucket not there yet starts full: the caller caps `units` at the rate's capacity. */
const FULL_UNITS = '4611686018427387904';

/** One ask's transaction, on one connection (see `withAsk`). */
export class PermitTx {
  constructor(private readonly client: pg.PoolClient) {}

  /**
   * Begins the transaction, and says the database's clock and whether `instance`'s lease holds (its
   * row held `FOR KEY SHARE` until commit, so that it is not freed meanwhile): one round trip.
   */
  async begin(instance: string, tools: readonly string[] = []): Promise<{ now: number; alive: boolean; pauses: PauseRow[] }> {
    const list = tools.length > 0 ? tools.map((t) => this.client.escapeLiteral(t)).join(', ') : 'NULL';
    const results = (await this.client.query(
      `BEGIN; SELECT toolgraph_now() AS now,
         (SELECT lease_until > toolgraph_now() FROM replicas WHERE instance = ${this.client.escapeLiteral(instance)} AND NOT permits_freed
          FOR KEY SHARE) AS alive,
         (SELECT coalesce(json_agg(json_build_object('tool', tool, 'key', key, 'until', until, 'status', status)), '[]'::json)
          FROM tool_pauses WHERE tool IN (${list}) AND until > toolgraph_now()) AS pauses`,
    )) as unknown as pg.QueryResult<{ now: string; alive: boolean | null; pauses: PauseRow[] }>[];
    const row = results[1]?.rows[0];
    return {
      now: Number(row?.now),
      alive: row?.alive === true,
      pauses: (row?.pauses ?? []).map((p) => ({ ...p, until: Number(p.until) })),
    };
  }

  /**
   * Locks the counters (sorted), creating those not there yet; their use now, and the waiter marks of
   * those that have one (JSON text; cluster/permit-priority.ts reads them; migration 0006).
   */
  async lockCounters(
    counters: readonly { key: string; cap: number }[],
  ): Promise<{ counts: Map<string, number>; marks: Map<string, string> }> {
    const counts = new Map<string, number>();
    const marks = new Map<string, string>();
    if (counters.length === 0) return { counts, marks };
    const r = await this.client.query<{ key: string; in_use: number; waiter: string | null }>(
      `INSERT INTO permit_counts (key, cap) SELECT k, c FROM unnest($1::text[], $2::int[]) AS u(k, c) ORDER BY k COLLATE "C"
       ON CONFLICT (key) DO UPDATE SET cap = excluded.cap RETURNING key, in_use, waiter`,
      [counters.map((c) => c.key), counters.map((c) => c.cap)],
    );
    for (const row of r.rows) {
      counts.set(row.key, row.in_use);
      if (row.waiter !== null) marks.set(row.key, row.waiter);
    }
    return { counts, marks };
  }

  /** Writes the waiter marks of counters this transaction locked (null: none). */
  async writeCounterMarks(marks: ReadonlyMap<string, string | null>): Promise<void> {
    if (marks.size === 0) return;
    const list = [...marks];
    await this.client.query(`UPDATE permit_counts p SET waiter = u.m FROM unnest($1::text[], $2::text[]) AS u(k, m) WHERE p.key = u.k`, [
      list.map(([k]) => k),
      list.map(([, m]) => m),
    ]);
  }

  /** Locks lock nodes (rows `<domain> <node>`, sorted), creating those not there yet; their counts now. */
  async lockNodes(rows: readonly string[], sep: string): Promise<{ counts: Map<string, NodeRow>; marks: Map<string, MarkRow> }> {
    const counts = new Map<string, NodeRow>();
    const marks = new Map<string, MarkRow>();
    if (rows.length === 0) return { counts, marks };
    const parts = rows.map((row) => row.split(sep) as [string, string]);
    const r = await this.client.query<{ domain: string; node: string; wait_at: string | null; wait_below: string | null } & NodeRow>(
      `INSERT INTO permit_locks (domain, node) SELECT d, n FROM unnest($1::text[], $2::text[]) AS u(d, n)
         ORDER BY d COLLATE "C", n COLLATE "C"
       ON CONFLICT (domain, node) DO UPDATE SET r = permit_locks.r RETURNING domain, node, r, w, ir, iw, wait_at, wait_below`,
      [parts.map((p) => p[0]), parts.map((p) => p[1])],
    );
    for (const row of r.rows) {
      const k = `${row.domain}${sep}${row.node}`;
      counts.set(k, { r: row.r, w: row.w, ir: row.ir, iw: row.iw });
      if (row.wait_at !== null || row.wait_below !== null) marks.set(k, { at: row.wait_at, below: row.wait_below });
    }
    return { counts, marks };
  }

  /** Writes the waiter marks of lock rows this transaction locked. */
  async writeMarks(marks: ReadonlyMap<string, MarkRow>, sep: string): Promise<void> {
    if (marks.size === 0) return;
    const list = [...marks].map(([row, m]) => [...(row.split(sep) as [string, string]), m] as const);
    await this.client.query(
      `UPDATE permit_locks p SET wait_at = u.a, wait_below = u.b FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(d, n, a, b)
       WHERE p.domain = u.d AND p.node = u.n`,
      [list.map((x) => x[0]), list.map((x) => x[1]), list.map((x) => x[2].at), list.map((x) => x[2].below)],
    );
  }

  /** Locks rate buckets (sorted), a new one full. */
  async lockBuckets(names: readonly string[]): Promise<BucketRow[]> {
    if (names.length === 0) return [];
    const r = await this.client.query<{ name: string; units: string; last: string }>(
      `INSERT INTO rate_buckets (name, units, last) SELECT n, ${FULL_UNITS}, 0 FROM unnest($1::text[]) AS u(n) ORDER BY n COLLATE "C"
       ON CONFLICT (name) DO UPDATE SET units = rate_buckets.units RETURNING name, units, last`,
      [names],
    );
    return r.rows.map((b) => ({ name: b.name, units: Number(b.units), last: Number(b.last) }));
  }

  /** The lock entries held by the permits of these runs (read only when a lock looked taken). */
  async heldLocks(runIds: readonly string[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    if (runIds.length === 0) return out;
    const r = await this.client.query<{ run_id: string; locks: string[] }>(
      `SELECT run_id, locks FROM permits WHERE run_id = ANY($1::text[]) AND cardinality(locks) > 0`,
      [runIds],
    );
    for (const row of r.rows) {
      const list = out.get(row.run_id) ?? [];
      list.push(...row.locks);
      out.set(row.run_id, list);
    }
    for (const id of runIds) if (!out.has(id)) out.set(id, []);
    return out;
  }

  /**
   * Records the granted permits and adds their increments (rows locked already). A permit of the same
   * call recorded earlier (by an instance whose runs were taken over, or a duplicate ask) is replaced:
   * what it took is given back first.
   */
  async write(w: AskWrite, sep: string): Promise<void> {
    const slices = [...(w.slices ?? [])].filter(([, n]) => n > 0);
    if (w.permits.length === 0 && slices.length === 0) return;
    const p = w.permits;
    const counters = [...w.counterDelta];
    const nodes = [...w.nodeDelta].map(([row, d]) => [...(row.split(sep) as [string, string]), d] as const);
    const values = (list: readonly NewPermit[]) => [
      w.instance,
      w.now,
      list.map((x) => x.runId),
      list.map((x) => x.callId),
      list.map((x) => x.tenant),
      list.map((x) => x.tool),
      list.map((x) => x.domain),
      list.map((x) => JSON.stringify(x.reads)),
      list.map((x) => JSON.stringify(x.writes)),
      list.map((x) => pgArray(x.keys)),
      list.map((x) => pgArray(x.locks)),
      list.map((x) => x.perKey ?? null),
    ];
    // One statement: the permits, and the increments of rows this transaction locked already.
    const r = await this.client.query<{ inserted: [string, string][] }>(
      `WITH ins AS (${INSERT_PERMITS} ON CONFLICT (run_id, call_id) DO NOTHING RETURNING run_id, call_id),
       c AS (UPDATE permit_counts p SET in_use = p.in_use + u.d FROM unnest($13::text[], $14::int[]) AS u(k, d) WHERE p.key = u.k RETURNING 1),
       l AS (UPDATE permit_locks p SET r = p.r + u.r, w = p.w + u.w, ir = p.ir + u.ir, iw = p.iw + u.iw
             FROM unnest($15::text[], $16::text[], $17::int[], $18::int[], $19::int[], $20::int[]) AS u(d, n, r, w, ir, iw)
             WHERE p.domain = u.d AND p.node = u.n RETURNING 1),
       b AS (UPDATE rate_buckets b SET units = u.units, last = u.last FROM unnest($21::text[], $22::int8[], $23::int8[]) AS u(name, units, last)
             WHERE b.name = u.name RETURNING 1),
       s AS (INSERT INTO permit_slices AS s (instance, key, n) SELECT $1, k, n FROM unnest($24::text[], $25::int[]) AS u(k, n)
             ON CONFLICT (instance, key) DO UPDATE SET n = s.n + excluded.n RETURNING 1)
       SELECT (SELECT count(*) FROM c) AS c, (SELECT count(*) FROM l) AS l, (SELECT count(*) FROM b) AS b, (SELECT count(*) FROM s) AS s,
         (SELECT coalesce(json_agg(json_build_array(run_id, call_id)), '[]'::json) FROM ins) AS inserted`,
      [
        ...values(p),
        counters.map(([k]) => k),
        counters.map(([, d]) => d),
        nodes.map((n) => n[0]),
        nodes.map((n) => n[1]),
        nodes.map((n) => n[2].r),
        nodes.map((n) => n[2].w),
        nodes.map((n) => n[2].ir),
        nodes.map((n) => n[2].iw),
        w.buckets.map((b) => b.name),
        w.buckets.map((b) => Math.round(b.units)),
        w.buckets.map((b) => b.last),
        slices.map(([k]) => k),
        slices.map(([, n]) => n),
      ],
    );
    const inserted = new Set((r.rows[0]?.inserted ?? []).map(([run, call]) => `${run}\u0000${call}`));
    const rest = p.filter((x) => !inserted.has(`${x.runId}\u0000${x.callId}`));
    if (rest.length === 0) return;
    // Rare: the call's permit was recorded already (by an instance whose runs were taken over, or a
    // duplicate ask). It is replaced: what it took is given back, then the new one is recorded.
    const old = await this.client.query<{ keys: string[]; locks: string[]; sliced: boolean }>(
      `DELETE FROM permits p USING unnest($1::text[], $2::text[]) AS g(run_id, call_id)
       WHERE p.run_id = g.run_id AND p.call_id = g.call_id RETURNING p.keys, p.locks, p.sliced`,
      [rest.map((x) => x.runId), rest.map((x) => x.callId)],
    );
    // A row of a call granted from a slice counts nothing (its slice does).
    const back = takenBy(
      old.rows.filter((x) => !x.sliced),
      sep,
    );
    await addCounts(this.client, back.counters, back.nodes, sep);
    await this.client.query(INSERT_PERMITS, values(rest));
  }
}

const INSERT_PERMITS = `INSERT INTO permits (instance, run_id, call_id, tenant, tool, domain, reads, writes, since, keys, locks, per_key)
  SELECT $1, u.run_id, u.call_id, u.tenant, u.tool, u.domain, u.reads, u.writes, $2, u.keys::text[], u.locks::text[], u.per_key
  FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[])
    AS u(run_id, call_id, tenant, tool, domain, reads, writes, keys, locks, per_key)`;

/** Runs `fn` as one transaction, begun by `PermitTx.begin`; rolls back when it throws. */
export async function withAsk<T>(pool: pg.Pool, fn: (tx: PermitTx) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    try {
      const out = await fn(new PermitTx(client));
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  } finally {
    client.release();
  }
}

/** Oldest first: the permits that count against a counter key (a refusal's holders). */
export async function holdersOfKey(pool: pg.Pool, key: string, max: number): Promise<PermitRow[]> {
  return (
    await pool.query<PermitRow>(
      `SELECT run_id, call_id, tenant, tool, domain, reads, writes, since, per_key FROM permits WHERE keys @> ARRAY[$1::text]
       ORDER BY since, run_id, call_id LIMIT $2`,
      [key, max],
    )
  ).rows;
}

/** Oldest first: the permits that hold locks in a domain (to explain a lock refusal), at most `max`. */
export async function holdersInDomain(pool: pg.Pool, domain: string, max: number): Promise<PermitRow[]> {
  return (
    await pool.query<PermitRow>(
      `SELECT run_id, call_id, tenant, tool, domain, reads, writes, since FROM permits WHERE domain = $1 AND cardinality(locks) > 0
       ORDER BY since, run_id, call_id LIMIT $2`,
      [domain, max],
    )
  ).rows;
}

/**
 * Adds deltas to counters and lock nodes, locking them in the fixed order (an upsert of sorted rows; a
 * row not there, which a held permit's never is, would start at the delta).
 */
export async function addCounts(
  client: pg.PoolClient,
  counters: ReadonlyMap<string, number>,
  nodes: ReadonlyMap<string, NodeRow>,
  sep: string,
) {
  const c = [...counters].filter(([, d]) => d !== 0);
  if (c.length > 0)
    await client.query(
      `INSERT INTO permit_counts AS c (key, in_use) SELECT k, d FROM unnest($1::text[], $2::int[]) AS u(k, d) ORDER BY k COLLATE "C"
       ON CONFLICT (key) DO UPDATE SET in_use = GREATEST(c.in_use + excluded.in_use, 0)`,
      [c.map(([k]) => k), c.map(([, d]) => d)],
    );
  const n = [...nodes].filter(([, d]) => d.r !== 0 || d.w !== 0 || d.ir !== 0 || d.iw !== 0);
  if (n.length > 0) {
    const parts = n.map(([row]) => row.split(sep) as [string, string]);
    await client.query(
      `INSERT INTO permit_locks AS l (domain, node, r, w, ir, iw)
       SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::int[], $6::int[]) AS u(d, n, r, w, ir, iw)
       ORDER BY d COLLATE "C", n COLLATE "C"
       ON CONFLICT (domain, node) DO UPDATE SET r = GREATEST(l.r + excluded.r, 0), w = GREATEST(l.w + excluded.w, 0),
         ir = GREATEST(l.ir + excluded.ir, 0), iw = GREATEST(l.iw + excluded.iw, 0)`,
      [
        parts.map((p) => p[0]),
        parts.map((p) => p[1]),
        n.map(([, d]) => d.r),
        n.map(([, d]) => d.w),
        n.map(([, d]) => d.ir),
        n.map(([, d]) => d.iw),
      ],
    );
  }
}

/** What deleted permits took, as deltas to take off. */
export function takenBy(
  rows: readonly { keys: string[]; locks: string[] }[],
  sep: string,
  counters = new Map<string, number>(),
  nodes = new Map<string, NodeRow>(),
) {
  for (const old of rows) {
    for (const k of old.keys) counters.set(k, (counters.get(k) ?? 0) - 1);
    for (const e of old.locks) {
      const i = e.lastIndexOf(sep);
      const row = e.slice(0, i);
      const d = nodes.get(row) ?? { r: 0, w: 0, ir: 0, iw: 0 };
      d[e.slice(i + 1) as keyof NodeRow] -= 1;
      nodes.set(row, d);
    }
  }
  return { counters, nodes };
}

/** A PostgreSQL array literal of text. */
export function pgArray(items: readonly string[]): string {
  return `{${items.map((s) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).join(',')}}`;
}
