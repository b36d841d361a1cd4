/**
 * `maxActiveRunsPerTenant` across replicas (DESIGN §12): before a run is submitted, its replica takes a
 * ticket in one transaction under an advisory lock of the tenant (store/postgres/admissions.ts),
 * counting the tenant's active runs in the store plus the tickets of runs not stored yet (of live
 * instances), up to the cap. Two replicas admitting for one tenant at the same instant are taken one
 * after the other, so the cap is never passed; other tenants are not touched. The ticket is given back
 * once the run is stored (it then counts as a run) or refused.
 */
import type { PgPool } from '../store/pg-pool.js';
import { StoreError } from '../store/errors.js';
import { dropTicket, takeTicket } from '../store/postgres/admissions.js';

export class Admissions {
  constructor(
    private readonly pool: PgPool,
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
    return takeTicket(this.pool, { tenant, runId, cap, instance });
  }

  /** Gives a ticket back (its run is stored, or was refused); a failure is harmless (see `take`). */
  drop(runId: string): void {
    dropTicket(this.pool, runId).catch(() => {});
  }
}
