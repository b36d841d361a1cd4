/**
 * The SQL of one run per key across replicas (DESIGN §4, §12; cluster/run-keys.ts; migration 0006): a
 * claim row per run of a tenant's `concurrencyKey`, taken under an advisory transaction lock of the
 * (tenant, key) pair only, so claims of other keys never wait on each other. The claims' `seq` orders
 * the key's runs: the holders are listed in it.
 */
import type pg from 'pg';

/** The advisory locks of run keys: this key and the hash of tenant and key ("tgrk"). */
const RUN_KEYS_LOCK = 0x7467726b;

/** How long a claim whose run is not stored yet counts (a submission that never ended, say), ms. */
const UNSTORED_CLAIM_MS = 300_000;

/**
 * Whether claim `c` still holds its key: its run is queued or running, or, not stored yet, its instance
 * is alive and the claim young.
 */
const LIVE = `(EXISTS (SELECT 1 FROM runs r WHERE r.id = c.run_id AND r.status IN ('queued', 'running'))
  OR (NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = c.run_id)
      AND c.at > toolgraph_now() - ${UNSTORED_CLAIM_MS}
      AND EXISTS (SELECT 1 FROM replicas p WHERE p.instance = c.instance AND p.lease_until > toolgraph_now())))`;

/**
 * The runs that hold the key, oldest first: unfinished runs of the key stored without a claim (submitted
 * before migration 0006) and then the live claims in their order.
 */
const HOLDERS = `SELECT id FROM (
    SELECT r.id, 0 AS part, r.created_seq AS ord FROM runs r JOIN events e ON e.run_id = r.id AND e.seq = 1
     WHERE r.tenant = $1 AND r.status IN ('queued', 'running') AND e.data::jsonb ->> 'concurrencyKey' = $2
       AND NOT EXISTS (SELECT 1 FROM run_key_claims k WHERE k.run_id = r.id)
    UNION ALL
    SELECT c.run_id, 1, c.seq FROM run_key_claims c WHERE c.tenant = $1 AND c.key = $2 AND ${LIVE}
  ) h ORDER BY part, ord`;

/** The runs holding the tenant's key, in the order they claimed it. */
export async function keyHolders(db: pg.Pool | pg.PoolClient, tenant: string, key: string): Promise<string[]> {
  return (await db.query<{ id: string }>(HOLDERS, [tenant, key])).rows.map((r) => r.id);
}

export interface ClaimRequest {
  tenant: string;
  key: string;
  runId: string;
  instance: string;
  /** Take the claim only when nobody holds the key (`onConcurrent: reject`). */
  onlyIfFree: boolean;
}

/**
 * Under the key's lock: forgets the key's claims that hold it no more, reads its holders and, unless
 * `onlyIfFree` and there are some, claims it for `runId` after them. Returns the holders before it.
 */
export async function claimKey(pool: pg.Pool, c: ClaimRequest): Promise<{ holders: string[]; claimed: boolean }> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [RUN_KEYS_LOCK, `${c.tenant}\u0001${c.key}`]);
      await client.query(`DELETE FROM run_key_claims c WHERE c.tenant = $1 AND c.key = $2 AND NOT ${LIVE}`, [c.tenant, c.key]);
      const holders = await keyHolders(client, c.tenant, c.key);
      const claimed = !(c.onlyIfFree && holders.length > 0);
      if (claimed)
        await client.query('INSERT INTO run_key_claims (run_id, tenant, key, instance, at) VALUES ($1, $2, $3, $4, toolgraph_now())', [
          c.runId,
          c.tenant,
          c.key,
          c.instance,
        ]);
      await client.query('COMMIT');
      return { holders, claimed };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  } finally {
    client.release();
  }
}

/** Drops the claim of a run that was not submitted after all. */
export async function dropClaim(pool: pg.Pool, runId: string): Promise<void> {
  await pool.query('DELETE FROM run_key_claims WHERE run_id = $1', [runId]);
}
