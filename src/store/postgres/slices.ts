/**
 * The SQL of slices (DESIGN §12 "It scales"; migration 0008; the logic is cluster/permit-slices.ts):
 * giving back part of a slice, listing the calls a replica granted from its slices, and telling the
 * replicas that hold a slice of a key that a call waits for it. A slice grows inside an ask
 * (`PermitTx.write`), and goes whole with its instance (`giveBack(…, 'all')`).
 *
 * Lock order as in permits.ts: permit rows, then slices, then counters (an upsert of sorted rows).
 */
import type pg from 'pg';
import { pgArray, type NewPermit } from './permits.js';

/**
 * Gives back `cut` places of `instance`'s slices (a slice cut to 0 goes) and takes them off their
 * counters, in one statement; NOTIFYs `toolgraph_permits` when any went. A slice that is not there any
 * more (the instance's lease ended and its slices were freed) gives back nothing.
 */
export async function cutSlices(pool: pg.Pool, instance: string, cut: ReadonlyMap<string, { n: number; whole: boolean }>): Promise<void> {
  const list = [...cut].filter(([, c]) => c.n > 0);
  if (list.length === 0) return;
  const whole = list.filter(([, c]) => c.whole);
  const part = list.filter(([, c]) => !c.whole);
  await pool.query(
    `WITH gone AS (DELETE FROM permit_slices s USING unnest($2::text[]) AS u(k) WHERE s.instance = $1 AND s.key = u.k RETURNING s.key, s.n),
     less AS (UPDATE permit_slices s SET n = s.n - u.n FROM unnest($3::text[], $4::int[]) AS u(k, n)
              WHERE s.instance = $1 AND s.key = u.k AND s.n >= u.n RETURNING s.key, u.n),
     k AS (SELECT key, sum(n)::int AS n FROM (SELECT key, n FROM gone UNION ALL SELECT key, n FROM less) x GROUP BY key),
     c AS (INSERT INTO permit_counts AS c (key, in_use) SELECT key, -n FROM k ORDER BY key COLLATE "C"
           ON CONFLICT (key) DO UPDATE SET in_use = GREATEST(c.in_use + excluded.in_use, 0) RETURNING 1)
     SELECT (SELECT count(*) FROM c) AS c, CASE WHEN EXISTS (SELECT 1 FROM k) THEN pg_notify('toolgraph_permits', $1) END AS told`,
    [instance, whole.map(([k]) => k), part.map(([k]) => k), part.map(([, c]) => c.n)],
  );
}

/** A call granted from a slice, to list: `ageMs`, how long ago it was granted (its `since` is the database's clock less that). */
export interface SlicedHolder {
  permit: NewPermit;
  ageMs: number;
}

/**
 * Lists and unlists calls granted from `instance`'s slices (rows that count nothing): deletes the rows
 * of `ended`, then inserts those of `started`, in one statement.
 */
export async function writeHolders(
  pool: pg.Pool,
  instance: string,
  started: readonly SlicedHolder[],
  ended: readonly { runId: string; callId: string }[],
): Promise<void> {
  if (started.length === 0 && ended.length === 0) return;
  const p = started.map((h) => h.permit);
  await pool.query(
    `WITH d AS (DELETE FROM permits p USING unnest($1::text[], $2::text[]) AS g(run_id, call_id)
                WHERE p.run_id = g.run_id AND p.call_id = g.call_id AND p.instance = $3 AND p.sliced RETURNING 1)
     INSERT INTO permits (instance, run_id, call_id, tenant, tool, domain, reads, writes, since, keys, locks, per_key, sliced)
     SELECT $3, u.run_id, u.call_id, u.tenant, u.tool, NULL, '[]', '[]', toolgraph_now() - u.age, u.keys::text[], '{}', u.per_key, true
     FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::int8[])
       AS u(run_id, call_id, tenant, tool, keys, per_key, age)
     WHERE (SELECT count(*) FROM d) >= 0
     ON CONFLICT (run_id, call_id) DO NOTHING`,
    [
      ended.map((x) => x.runId),
      ended.map((x) => x.callId),
      instance,
      p.map((x) => x.runId),
      p.map((x) => x.callId),
      p.map((x) => x.tenant),
      p.map((x) => x.tool),
      p.map((x) => pgArray(x.keys)),
      p.map((x) => x.perKey ?? null),
      started.map((h) => Math.max(0, Math.round(h.ageMs))),
    ],
  );
}

/**
 * Tells the replicas that hold slices of `keys` that a call of `instance` waits for them
 * (`toolgraph_wants`, payload `{ instance, keys, priority }`: each key with the priority of the most
 * urgent call that waits for it): they give back what they hold past their share.
 */
export async function tellWants(pool: pg.Pool, instance: string, keys: ReadonlyMap<string, number>): Promise<void> {
  if (keys.size === 0) return;
  await pool.query(`SELECT pg_notify('toolgraph_wants', $1)`, [
    JSON.stringify({ instance, keys: [...keys.keys()], priority: Object.fromEntries(keys) }),
  ]);
}
