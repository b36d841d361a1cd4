/**
 * The SQL of a replica's lease (DESIGN §12; cluster/lease.ts): a row of `replicas` per instance whose
 * `lease_until` is pushed ahead on the database's clock (`toolgraph_now()`).
 */
import type pg from 'pg';

/** What cluster/lease.ts asks of the database. */
export interface LeaseSql {
  /** Adds `instance` with a lease of `leaseMs`, and ends the leases of earlier instances of `name`. */
  join(instance: string, name: string, leaseMs: number): Promise<void>;
  /** Pushes the lease ahead by `leaseMs`; false when it had ended already. */
  renew(instance: string, leaseMs: number): Promise<boolean>;
  /** Whether an instance of `name` holds a lease now. */
  held(name: string): Promise<boolean>;
  /** Whether a later instance of its name ended `instance`'s lease (a join sets it to 0). */
  replaced(instance: string): Promise<boolean>;
  /** Ends the lease now. */
  end(instance: string): Promise<void>;
}

export function leaseSql(pool: pg.Pool): LeaseSql {
  return {
    async join(instance, name, leaseMs) {
      await pool.query(
        `WITH me AS (INSERT INTO replicas (instance, name, started_at, lease_until, renewed_at)
           VALUES ($1, $2, toolgraph_now(), toolgraph_now() + $3, toolgraph_now()) RETURNING started_at)
         UPDATE replicas SET lease_until = 0 WHERE name = $2 AND instance <> $1 AND lease_until > 0`,
        [instance, name, leaseMs],
      );
    },
    async renew(instance, leaseMs) {
      const r = await pool.query(
        'UPDATE replicas SET lease_until = toolgraph_now() + $2, renewed_at = toolgraph_now() WHERE instance = $1 AND lease_until > toolgraph_now()',
        [instance, leaseMs],
      );
      return r.rowCount !== 0;
    },
    async replaced(instance) {
      const r = await pool.query<{ replaced: boolean }>('SELECT lease_until = 0 AS replaced FROM replicas WHERE instance = $1', [instance]);
      return r.rows[0]?.replaced === true;
    },
    async held(name) {
      const r = await pool.query<{ held: boolean }>(
        'SELECT EXISTS (SELECT 1 FROM replicas WHERE name = $1 AND lease_until > toolgraph_now()) AS held',
        [name],
      );
      return r.rows[0]?.held === true;
    },
    async end(instance) {
      await pool.query('UPDATE replicas SET lease_until = 0 WHERE instance = $1', [instance]);
    },
  };
}
