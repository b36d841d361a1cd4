/**
 * One run per key across replicas (DESIGN §4, §12): the `KeyLedger` of api/run-keys.ts on PostgreSQL.
 * A submission with a `concurrencyKey` claims its (tenant, key) in one transaction under an advisory
 * lock of the pair (store/postgres/run-keys.ts), after reading the claims before it: two replicas
 * submitting under one key at the same instant are taken one after the other, so `reject` accepts
 * exactly one, `cancel_running` cancels every earlier one, and `queue` holds all but the first. A claim
 * row, not the lock alone: the run is stored after the claim's transaction has ended (by the append
 * path, in a commit shared with other runs), and the claim is what the next submission sees until then.
 * The claims' order is the key's queue: a held run starts once every claim before its own has ended.
 */
import type { PgPool } from '../store/pg-pool.js';
import { StoreError } from '../store/errors.js';
import { claimKey, dropClaim, keyHolders } from '../store/postgres/run-keys.js';

/** A `KeyLedger` (api/run-keys.ts; the API layer sits above this one, so the shape is not imported). */
export class RunKeyClaims {
  constructor(
    private readonly pool: PgPool,
    private readonly instance: () => string | undefined,
  ) {}

  /** Rejects with `store_unavailable` while this replica holds no lease (as admissions do). */
  async claim(c: { tenant: string; key: string; runId: string; onlyIfFree: boolean }): Promise<{ holders: string[]; claimed: boolean }> {
    const instance = this.instance();
    if (instance === undefined)
      throw new StoreError('store_unavailable', 'this replica holds no lease now (it is joining the cluster again); retry later');
    return claimKey(this.pool, { ...c, instance });
  }

  /** A failure is harmless: a claim whose run was never stored counts only while its instance lives (and a while). */
  drop(runId: string): void {
    dropClaim(this.pool, runId).catch(() => {});
  }

  holders(tenant: string, key: string): Promise<string[]> {
    return keyHolders(this.pool, tenant, key);
  }
}
