/**
 * The SQL of `maxActiveRunsPerTenant` across replicas (DESIGN §12; cluster/admissions.ts): a ticket per
 * run admitted and not stored yet, taken under an advisory lock of its tenant only, so admissions of
 * different tenants never wait on each other. The count stops at the cap: the tenant's active runs are
 * read from the index on (tenant, status) at most `cap` of them, so an admission costs the same however
 * many runs the tenant has.
 */
import type pg from 'pg';

/** The advisory locks of admissions: this key and the tenant's hash ("tgad"). */
const ADMISSIONS_LOCK = 0x74676164;

/** Takes a ticket for `runId` if `tenant` has fewer than `cap` active runs (tickets of live instances included). */
export async function takeTicket(pool: pg.Pool, t: { tenant: string; runId: string; cap: number; instance: string }): Promise<boolean> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [ADMISSIONS_LOCK, t.tenant]);
      const r = await client.query<{ n: number }>(
        `SELECT (SELECT count(*) FROM (SELECT 1 FROM runs WHERE tenant = $1 AND status = 'queued' LIMIT $2) q)
              + (SELECT count(*) FROM (SELECT 1 FROM runs WHERE tenant = $1 AND status = 'running' LIMIT $2) r)
              + (SELECT count(*) FROM (SELECT 1 FROM admissions a JOIN replicas p ON p.instance = a.instance
                 WHERE a.tenant = $1 AND p.lease_until > toolgraph_now() AND NOT EXISTS (SELECT 1 FROM runs WHERE id = a.run_id) LIMIT $2) a) AS n`,
        [t.tenant, t.cap],
      );
      const ok = Number(r.rows[0]?.n ?? 0) < t.cap;
      if (ok)
        await client.query('INSERT INTO admissions (run_id, tenant, instance, at) VALUES ($1, $2, $3, toolgraph_now())', [
          t.runId,
          t.tenant,
          t.instance,
        ]);
      await client.query('COMMIT');
      return ok;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  } finally {
    client.release();
  }
}

/** Gives a ticket back. */
export async function dropTicket(pool: pg.Pool, runId: string): Promise<void> {
  await pool.query('DELETE FROM admissions WHERE run_id = $1', [runId]);
}
