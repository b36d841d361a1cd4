/**
 * The SQL of commands carried to a run's owner (DESIGN §12; cluster/commands.ts): a row of `commands`
 * per command, targeted at an instance, NOTIFYing it (`toolgraph_commands`) and its sender
 * (`toolgraph_command_done`) in the same statement as the write.
 */
import type pg from 'pg';

/** A command waiting for its target. */
export interface PendingCommand {
  id: number;
  body: string;
}

/** What cluster/commands.ts asks of the database. */
export interface CommandsSql {
  /** Writes a command for the owner of `runId` and tells it; its id, or undefined when there is no such run. */
  send(runId: string, body: string): Promise<number | undefined>;
  /** The answer (JSON) once the command is done with one; undefined before, or once withdrawn. */
  answer(id: number): Promise<string | undefined>;
  /** Ends a command not taken yet, unanswered; false when it was taken already. */
  withdraw(id: number): Promise<boolean>;
  /** A pending command whose target is no longer its run's owner goes to the owner (told). */
  followOwner(id: number): Promise<void>;
  /** The unfinished commands of these runs go to `instance` (told), running ones included. */
  retarget(runIds: readonly string[], instance: string): Promise<void>;
  /** The oldest `limit` commands pending for `instance`. */
  pending(instance: string, limit: number): Promise<PendingCommand[]>;
  /** Takes a pending command (so it is applied once); false when another took or withdrew it. */
  take(id: number, instance: string): Promise<boolean>;
  /** Writes the answer (JSON) of a command `instance` applied, and tells its sender. */
  finish(id: number, instance: string, answer: string): Promise<void>;
}

export function commandsSql(pool: pg.Pool): CommandsSql {
  return {
    async send(runId, body) {
      const sent = await pool.query<{ id: number; target: string }>(
        `WITH c AS (INSERT INTO commands (run_id, target, body, status, created_at)
           SELECT id, coalesce(owner, ''), $2, 'pending', toolgraph_now() FROM runs WHERE id = $1 RETURNING id, target)
         SELECT c.id, c.target, pg_notify('toolgraph_commands', c.target) FROM c`,
        [runId, body],
      );
      const row = sent.rows[0];
      return row ? Number(row.id) : undefined;
    },
    async answer(id) {
      const r = await pool.query<{ status: string; result: string | null }>('SELECT status, result FROM commands WHERE id = $1', [id]);
      const row = r.rows[0];
      if (row?.status !== 'done' || row.result === null || row.result === 'null') return undefined;
      return row.result;
    },
    async withdraw(id) {
      const r = await pool.query(`UPDATE commands SET status = 'done', result = 'null' WHERE id = $1 AND status = 'pending'`, [id]);
      return r.rowCount === 1;
    },
    async followOwner(id) {
      await pool.query(
        `WITH c AS (UPDATE commands c SET target = r.owner FROM runs r
           WHERE c.id = $1 AND c.status = 'pending' AND r.id = c.run_id AND r.owner IS NOT NULL AND r.owner <> c.target RETURNING c.target)
         SELECT pg_notify('toolgraph_commands', c.target) FROM c`,
        [id],
      );
    },
    async retarget(runIds, instance) {
      await pool.query(
        `WITH c AS (UPDATE commands SET target = $2, status = 'pending' WHERE run_id = ANY($1::text[]) AND status <> 'done' RETURNING 1)
         SELECT pg_notify('toolgraph_commands', $2) WHERE EXISTS (SELECT 1 FROM c)`,
        [runIds, instance],
      );
    },
    async pending(instance, limit) {
      const r = await pool.query<PendingCommand>(
        `SELECT id, body FROM commands WHERE target = $1 AND status = 'pending' ORDER BY id LIMIT $2`,
        [instance, limit],
      );
      return r.rows.map((row) => ({ id: Number(row.id), body: row.body }));
    },
    async take(id, instance) {
      const r = await pool.query(`UPDATE commands SET status = 'running' WHERE id = $1 AND status = 'pending' AND target = $2`, [
        id,
        instance,
      ]);
      return r.rowCount === 1;
    },
    async finish(id, instance, answer) {
      await pool.query(
        `WITH c AS (UPDATE commands SET status = 'done', result = $2 WHERE id = $1 AND target = $3 RETURNING id)
         SELECT pg_notify('toolgraph_command_done', c.id::text) FROM c`,
        [id, answer, instance],
      );
    },
  };
}
