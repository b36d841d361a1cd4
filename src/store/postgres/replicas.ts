/**
 * The SQL of what the cluster says about itself (DESIGN §12; cluster/cluster.ts): its replicas, the
 * owners of runs, and the one read of `GET /v1/limits` (limits.ts).
 */
import type pg from 'pg';
import { LIMITS_SQL, type LimitsRow } from './limits.js';

/** A row of `replicas`, with whether its lease holds and how many unfinished runs it owns. */
export interface ReplicaRow {
  instance: string;
  name: string;
  started_at: number;
  lease_until: number;
  renewed_at: number;
  alive: boolean;
  /** How long the lease still holds by the database's clock (ms); 0 once it ended. */
  left: number;
  owned: number;
}

/** What cluster/cluster.ts reads of the database for the API. */
export interface ReplicasSql {
  /** Every instance that held a lease within the last hour, by name and start. */
  replicas(): Promise<ReplicaRow[]>;
  /** The owner of each of these runs not ended, with the owner's name when its row is still there. */
  owners(runIds: readonly string[]): Promise<{ id: string; owner: string; name: string | null }[]>;
  /** `GET /v1/limits`'s one read: `me`'s own wait summary left out, at most `maxPermits` permits. */
  limits(me: string | null, maxPermits: number): Promise<LimitsRow | undefined>;
}

export function replicasSql(pool: pg.Pool): ReplicasSql {
  return {
    async replicas() {
      const r = await pool.query<ReplicaRow>(
        `SELECT p.instance, p.name, p.started_at, p.lease_until, p.renewed_at, p.lease_until > toolgraph_now() AS alive, GREATEST(p.lease_until - toolgraph_now(), 0) AS left,
           (SELECT count(*)::int FROM runs r WHERE r.owner = p.instance AND r.status IN ('queued', 'running', 'needs_replan')) AS owned
         FROM replicas p WHERE p.lease_until > toolgraph_now() - 3600000 ORDER BY p.name, p.started_at`,
      );
      return r.rows;
    },
    async owners(runIds) {
      const r = await pool.query<{ id: string; owner: string; name: string | null }>(
        `SELECT r.id, r.owner, p.name FROM runs r LEFT JOIN replicas p ON p.instance = r.owner
         WHERE r.id = ANY($1::text[]) AND r.owner IS NOT NULL AND r.status IN ('queued', 'running', 'needs_replan')`,
        [runIds],
      );
      return r.rows;
    },
    async limits(me, maxPermits) {
      const r = await pool.query<LimitsRow>(LIMITS_SQL, [me, maxPermits]);
      return r.rows[0];
    },
  };
}
