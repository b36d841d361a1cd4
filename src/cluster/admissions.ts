/**
 * `maxActiveRunsPerTenant` across replicas (DESIGN §12): before a run is submitted, its replica takes a
 * ticket in one transaction under an advisory lock of the tenant, counting the tenant's active runs in
 * the store plus the tickets of runs not stored yet (of live instances). Two replicas admitting at the
 * same instant are taken one after the other, so the cap is never passed. The ticket is given back once
 * the run is stored (it then counts as a run) or refused.
 */
import type pg from 'pg';
import { StoreError } from '../store/errors.js';

/** The advisory locks of admissions: this key and the tenant's hash ("tgad"). */
const ADMISSIONS_LOCK = 0x74676164;

export class Admissions {
  constructor(
    private readonly pool: pg.Pool,
    private readonly instance: () => string | undefined,
  ) {}

  /**
   * Takes a ticket for `runId` if the tenant has fewer than `cap` active runs; false when it has not.
   * Rejects with `store_unavailable` while this replica holds no lease (it is joining the cluster again
   * after losing the database): the store is the trouble then, not the tenant's runs.
   */
  async take(tenant: string, runId: string, cap: number): Promise<boolean> {
    const instance = this.instance();
    if (instance === undefined)
      throw new StoreError('store_unavailable', 'this replica holds no lease now (it is joining the cluster again); retry later');
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      try {
        await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [ADMISSIONS_LOCK, tenant]);
        const r = await client.query<{ n: number }>(
          `SELECT (SELECT count(*) FROM runs WHERE tenant = $1 AND status IN ('queued', 'running'))
                + (SELECT count(*) FROM admissions a JOIN replicas p ON p.instance = a.instance
                   WHERE a.tenant = $1 AND p.lease_until > toolgraph_now() AND NOT EXISTS (SELECT 1 FROM runs WHERE id = a.run_id)) AS n`,
          [tenant],
        );
        const ok = Number(r.rows[0]?.n ?? 0) < cap;
        if (ok)
          await client.query('INSERT INTO admissions (run_id, tenant, instance, at) VALUES ($1, $2, $3, toolgraph_now())', [
            runId,
            tenant,
            instance,
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

  /** Gives a ticket back (its run is stored, or was refused); a failure is harmless (see `take`). */
  drop(runId: string): void {
    this.pool.query('DELETE FROM admissions WHERE run_id = $1', [runId]).catch(() => {});
  }
}
