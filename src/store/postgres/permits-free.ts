/**
 * Giving cluster-wide permits back (DESIGN §12; migration 0004): a replica's own give-backs, the
 * permits of instances whose lease ended (freed once, by whoever notices), and the sweep of rows that
 * count nothing. Lock order as in permits.ts: permit rows, then counters, then lock nodes.
 */
import type pg from 'pg';

/**
 * Gives back permits of `instance` (these calls, or all of them): deletes their rows and takes off what
 * they took, in one transaction, and NOTIFYs `toolgraph_permits` when any was held (unless `notify` is
 * false: the caller tells later, with `tellFreed`). The delete is what makes it once: two that give back
 * the same permit find it once. Returns how many were given back.
 */
export async function giveBack(
  pool: pg.Pool,
  instance: string,
  calls: readonly { runId: string; callId: string }[] | 'all',
  sep: string,
  notify = true,
): Promise<number> {
  return giveBackIn(pool, instance, calls, sep, notify);
}

/** NOTIFYs `toolgraph_permits`: permits of `instance` were given back (see `giveBack`'s `notify`). */
export async function tellFreed(pool: pg.Pool, instance: string): Promise<void> {
  await pool.query(`SELECT pg_notify('toolgraph_permits', $1)`, [instance]);
}

async function giveBackIn(
  client: pg.PoolClient | pg.Pool,
  instance: string,
  calls: readonly { runId: string; callId: string }[] | 'all',
  sep: string,
  notify = true,
): Promise<number> {
  const which =
    calls === 'all'
      ? 'DELETE FROM permits p WHERE p.instance = $3 AND cardinality($1::text[]) = 0 AND cardinality($2::text[]) = 0'
      : `DELETE FROM permits p USING unnest($1::text[], $2::text[]) AS g(run_id, call_id)
         WHERE p.run_id = g.run_id AND p.call_id = g.call_id AND p.instance = $3`;
  const list = calls === 'all' ? [] : calls;
  // One statement, its rows locked in the fixed order: the permits (the delete), then slices, then
  // counters, then lock nodes (each an upsert of sorted rows, referenced in that order below). A call
  // granted from a slice counts nothing by itself (migration 0008): all of an instance gives its slices
  // back instead.
  const slices =
    calls === 'all' ? `DELETE FROM permit_slices WHERE instance = $3 RETURNING key, n` : `SELECT key, n FROM permit_slices WHERE false`;
  const r = await client.query<{ n: string }>(
    `WITH d AS (${which} RETURNING p.keys, p.locks, p.sliced),
     s AS (${slices}),
     k AS (SELECT key, sum(n)::int AS n FROM (
             SELECT key, 1 AS n FROM d, unnest(d.keys) AS key WHERE NOT d.sliced UNION ALL SELECT key, n FROM s) x
           GROUP BY key),
     c AS (INSERT INTO permit_counts AS c (key, in_use) SELECT key, -n FROM k ORDER BY key COLLATE "C"
           ON CONFLICT (key) DO UPDATE SET in_use = GREATEST(c.in_use + excluded.in_use, 0) RETURNING 1),
     e AS (SELECT split_part(x, $4, 1) AS dm, split_part(x, $4, 2) AS nd, split_part(x, $4, 3) AS md FROM d, unnest(d.locks) AS x),
     g AS (SELECT dm, nd, count(*) FILTER (WHERE md = 'r')::int AS r, count(*) FILTER (WHERE md = 'w')::int AS w,
             count(*) FILTER (WHERE md = 'ir')::int AS ir, count(*) FILTER (WHERE md = 'iw')::int AS iw FROM e GROUP BY dm, nd),
     l AS (INSERT INTO permit_locks AS l (domain, node, r, w, ir, iw) SELECT dm, nd, -r, -w, -ir, -iw FROM g
           ORDER BY dm COLLATE "C", nd COLLATE "C"
           ON CONFLICT (domain, node) DO UPDATE SET r = GREATEST(l.r + excluded.r, 0), w = GREATEST(l.w + excluded.w, 0),
             ir = GREATEST(l.ir + excluded.ir, 0), iw = GREATEST(l.iw + excluded.iw, 0) RETURNING 1)
     SELECT x.n, (SELECT count(*) FROM c) AS c, (SELECT count(*) FROM l) AS l,
       CASE WHEN x.n > 0 AND $5 THEN pg_notify('toolgraph_permits', $3) END AS told
     FROM (SELECT (SELECT count(*) FROM d) + (SELECT count(*) FROM s) AS n) x`,
    [list.map((p) => p.runId), list.map((p) => p.callId), instance, sep, notify],
  );
  return Number(r.rows[0]?.n ?? 0);
}

/**
 * Frees the permits of instances whose lease ended (whoever notices: every replica's scan), each
 * instance once: its row is taken `FOR UPDATE SKIP LOCKED` (an ask of that instance still in flight
 * holds it `FOR KEY SHARE`: it is freed at a later scan, with what that ask took) and marked freed in
 * the transaction that gives its permits back. Returns the instances freed.
 */
export async function freeDead(pool: pg.Pool, sep: string, max = 20): Promise<string[]> {
  const dead = (
    await pool.query<{ instance: string }>(
      `SELECT instance FROM replicas WHERE NOT permits_freed AND lease_until <= toolgraph_now() ORDER BY lease_until LIMIT $1`,
      [max],
    )
  ).rows.map((r) => r.instance);
  const freed: string[] = [];
  for (const instance of dead) {
    const done = await transaction(pool, async (client) => {
      const mine = await client.query(
        `SELECT 1 FROM replicas WHERE instance = $1 AND NOT permits_freed AND lease_until <= toolgraph_now() FOR UPDATE SKIP LOCKED`,
        [instance],
      );
      if (mine.rowCount === 0) return false;
      await giveBackIn(client, instance, 'all', sep);
      await client.query('UPDATE replicas SET permits_freed = true WHERE instance = $1', [instance]);
      return true;
    });
    if (done) freed.push(instance);
  }
  return freed;
}

async function transaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    try {
      const out = await fn(client);
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

/**
 * Deletes up to `max` counter and lock rows that count nothing (keys no running call holds: file paths
 * come and go), skipping any an ask holds. Returns how many went. An ask that wants one again makes it.
 */
export async function sweepIdle(pool: pg.Pool, max = 1000): Promise<number> {
  const c = await pool.query(
    `DELETE FROM permit_counts WHERE ctid IN (SELECT ctid FROM permit_counts WHERE in_use = 0 LIMIT $1 FOR UPDATE SKIP LOCKED)`,
    [max],
  );
  const l = await pool.query(
    `DELETE FROM permit_locks WHERE ctid IN
       (SELECT ctid FROM permit_locks WHERE r = 0 AND w = 0 AND ir = 0 AND iw = 0
          AND coalesce((wait_at::json->>'until')::bigint, 0) < toolgraph_now()
          AND coalesce((wait_below::json->>'until')::bigint, 0) < toolgraph_now()
        LIMIT $1 FOR UPDATE SKIP LOCKED)`,
    [max],
  );
  return (c.rowCount ?? 0) + (l.rowCount ?? 0);
}
