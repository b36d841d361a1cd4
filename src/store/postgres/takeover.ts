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
  // The live instances are read once (a hashed NOT IN, so the scan costs little with thousands of
  // runs of live owners), never through an outer join: under READ COMMITTED a row that another replica
  // claimed (and committed) after this statement's snapshot is locked here all the same and its
  // condition rechecked on its new version; a recheck through a join saw the joined row
  // null-extended and took the run again from its new, live owner (two writers: its appends fenced
  // off, a lease dropped). The UPDATE checks each claimed row once more with a scalar subquery, which
  // is evaluated again on the new version (so an owner that joined after the snapshot counts too).
  const r = await pool.query<{ id: string; created_seq: string | number }>(
    `WITH live AS MATERIALIZED (SELECT instance FROM replicas WHERE lease_until > toolgraph_now()),
     orphans AS (
       SELECT r.id FROM runs r
       WHERE r.status IN ('queued', 'running', 'needs_replan') AND (r.owner IS NULL OR r.owner NOT IN (SELECT instance FROM live))
       ORDER BY r.created_seq LIMIT $2 FOR UPDATE OF r SKIP LOCKED)
     UPDATE runs SET owner = $1 FROM orphans
     WHERE runs.id = orphans.id AND coalesce((SELECT p.lease_until FROM replicas p WHERE p.instance = runs.owner), 0) <= toolgraph_now()
     RETURNING runs.id, runs.created_seq`,
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
