/** The SQL of the wait summaries replicas publish for each other (DESIGN §12; cluster/wait-summary.ts). */
import type pg from 'pg';

/** Writes `instance`'s summary (`text`, JSON) made at `clock` on its own clock, stamped with the database's time. */
export type PublishWaits = (instance: string, text: string, clock: number) => Promise<void>;

export function publishWaitsSql(pool: pg.Pool): PublishWaits {
  return async (instance, text, clock) => {
    await pool.query('UPDATE replicas SET waits = $2, waits_clock = $3, waits_at = toolgraph_now() WHERE instance = $1', [
      instance,
      text,
      clock,
    ]);
  };
}
