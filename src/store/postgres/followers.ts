/**
 * The SQL of event followers (migration 0009; the logic is cluster/feed.ts): a replica that follows
 * every replica's events keeps a row that expires, and appends announce their runs only while one
 * holds (store/postgres-append.ts).
 */
import type pg from 'pg';

/** What cluster/feed.ts writes of its following. */
export interface FollowersSql {
  /** `follower` follows for the next `ttlMs` (the database's clock); rows expired long ago go. */
  follow(follower: string, ttlMs: number): Promise<void>;
  /** `follower` follows no more. */
  unfollow(follower: string): Promise<void>;
}

export function followersSql(pool: pg.Pool): FollowersSql {
  return {
    async follow(follower, ttlMs) {
      await pool.query(
        `WITH gone AS (DELETE FROM event_followers WHERE until < toolgraph_now() - 3600000)
         INSERT INTO event_followers (follower, until) VALUES ($1, toolgraph_now() + $2)
         ON CONFLICT (follower) DO UPDATE SET until = excluded.until`,
        [follower, ttlMs],
      );
    },
    async unfollow(follower) {
      await pool.query('DELETE FROM event_followers WHERE follower = $1', [follower]);
    },
  };
}
