/**
 * The SQL of `GET /v1/limits` across the cluster (DESIGN §7, §12; cluster/limits-view.ts): one read of
 * what every replica holds and waits for. It reads the permits of live instances (for an operator's
 * request, never on an ask's path), oldest first, at most `MAX_PERMITS_READ`.
 */
import type { BucketRow, PermitRow } from './permits.js';

/**
 * One row: the database's time, the permits of live instances (oldest first), every rate bucket, and
 * the wait summaries of the live replicas other than `$1`. `$2`: `MAX_PERMITS_READ`.
 */
export const LIMITS_SQL = `
  WITH now AS (SELECT toolgraph_now() AS t)
  SELECT (SELECT t FROM now) AS now,
    (SELECT coalesce(json_agg(x ORDER BY x.since, x.run_id, x.call_id), '[]'::json) FROM (
       SELECT p.run_id, p.call_id, p.tenant, p.tool, p.domain, p.reads, p.writes, p.since, p.per_key FROM permits p
       JOIN replicas r ON r.instance = p.instance WHERE r.lease_until > (SELECT t FROM now)
       ORDER BY p.since, p.run_id, p.call_id LIMIT $2) x) AS permits,
    (SELECT coalesce(json_agg(b), '[]'::json) FROM rate_buckets b) AS buckets,
    (SELECT coalesce(json_agg(json_build_object('waits', r.waits, 'clock', r.waits_clock, 'at', r.waits_at)), '[]'::json)
       FROM replicas r WHERE r.lease_until > (SELECT t FROM now) AND r.instance IS DISTINCT FROM $1) AS waits`;

export interface LimitsRow {
  now: number;
  permits: PermitRow[];
  buckets: BucketRow[];
  waits: { waits: string; clock: number; at: number }[];
}
