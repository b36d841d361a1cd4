/**
 * `maxActiveRunsPerTenant` across replicas (DESIGN §12): before a run is submitted, its replica takes a
 * ticket in one transaction under an advisory lock of the tenant (store/postgres/admissions.ts),
 * counting the tenant's active runs in the store plus the tickets of runs not stored yet (of live
 * instances), up to the cap. Two replicas admitting for one tenant at the same instant are taken one
 * after the other, so the cap is never passed; other tenants are not touched. The ticket is given back
 * once the run is stored (it then counts as a run) or refused: those of one event-loop turn together.
 */
import type { PgPool } from '../store/pg-pool.js';
import { StoreError } from '../store/errors.js';
import { dropTickets, takeTicket } from '../store/postgres/admissions.js';

/** At most this many tickets given back in one statement. */
const MAX_DROPS = 1000;

export class Admissions {
  private dropping: string[] = [];

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

  /**
   * Gives a ticket back (its run is stored, or was refused), with the others of this event-loop turn in
   * one round trip; a failure is harmless (a ticket whose run exists counts no more, one of an instance
   * whose lease ended neither).
   */
  drop(runId: string): void {
    this.dropping.push(runId);
    if (this.dropping.length === 1) setImmediate(() => this.flush());
    else if (this.dropping.length >= MAX_DROPS) this.flush();
  }

  private flush(): void {
    const list = this.dropping;
    if (list.length === 0) return;
    this.dropping = [];
    dropTickets(this.pool, list).catch(() => {});
  }
}
