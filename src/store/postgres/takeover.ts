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
  const r = await pool.query<{ id: string; created_seq: string | number }>(
    `WITH orphans AS (
       SELECT r.id FROM runs r LEFT JOIN replicas p ON p.instance = r.owner
       WHERE r.status IN ('queued', 'running', 'needs_replan') AND (r.owner IS NULL OR p.instance IS NULL OR p.lease_until <= toolgraph_now())
       ORDER BY r.created_seq LIMIT $2 FOR UPDATE OF r SKIP LOCKED)
     UPDATE runs SET owner = $1 FROM orphans WHERE runs.id = orphans.id RETURNING runs.id, runs.created_seq`,
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
