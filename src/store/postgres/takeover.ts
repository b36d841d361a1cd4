/**
 * The SQL of taking runs over (DESIGN §12; cluster/takeover.ts): a replica claims, in small batches,
 * the unfinished runs whose owner's lease ended (`FOR UPDATE SKIP LOCKED`, so two replicas claiming at
 * once split them and never take the same run), oldest first.
 */
import type pg from 'pg';

/** What cluster/cluster.ts's scan asks of the database. */
export interface TakeoverSql {
  /** Makes `instance` the owner of up to `limit` runs whose owner is gone; their ids, oldest first. */
  claim(instance: string, limit: number): Promise<string[]>;
  /** The unfinished runs `instance` owns, oldest first. */
  owned(instance: string): Promise<string[]>;
}

export function takeoverSql(pool: pg.Pool): TakeoverSql {
  return { claim: (instance, limit) => claimOrphans(pool, instance, limit), owned: (instance) => ownedUnfinished(pool, instance) };
}

/** Makes `instance` the owner of up to `limit` runs whose owner is gone; their ids, oldest first. */
export async function claimOrphans(pool: pg.Pool, instance: string, limit: number): Promise<string[]> {
  // The owner's lease is read with a scalar subquery, not a join: under READ COMMITTED, a row that
  // another replica claimed (and committed) after this statement's snapshot is locked here all the
  // same and its condition rechecked on its new version. A recheck through an outer join sees the
  // joined row null-extended and took the run again from its new, live owner (two writers: its
  // appends fenced off, a lease dropped); a scalar subquery is evaluated again on the new owner.
  // The UPDATE checks it once more on the row it changes.
  const dead = (run: string) => `coalesce((SELECT p.lease_until FROM replicas p WHERE p.instance = ${run}.owner), 0) <= toolgraph_now()`;
  const r = await pool.query<{ id: string; created_seq: string | number }>(
    `WITH orphans AS (
       SELECT r.id FROM runs r
       WHERE r.status IN ('queued', 'running', 'needs_replan') AND ${dead('r')}
       ORDER BY r.created_seq LIMIT $2 FOR UPDATE OF r SKIP LOCKED)
     UPDATE runs SET owner = $1 FROM orphans WHERE runs.id = orphans.id AND ${dead('runs')} RETURNING runs.id, runs.created_seq`,
    [instance, limit],
  );
  return r.rows.sort((a, b) => Number(a.created_seq) - Number(b.created_seq)).map((row) => row.id);
}

/** The unfinished runs `instance` owns, oldest first. */
export async function ownedUnfinished(pool: pg.Pool, instance: string): Promise<string[]> {
  const r = await pool.query<{ id: string }>(
    `SELECT id FROM runs WHERE owner = $1 AND status IN ('queued', 'running', 'needs_replan') ORDER BY created_seq`,
    [instance],
  );
  return r.rows.map((row) => row.id);
}
