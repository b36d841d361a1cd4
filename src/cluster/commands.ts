/**
 * Commands that reach a replica other than the run's owner (DESIGN §12): cancel, review decisions,
 * replan, append and seal. The replica that got the request writes a row of `commands` targeted at the
 * run's owner and NOTIFYs it; the owner applies it as if it had got the request itself, writes the
 * answer, and NOTIFYs back. So the answer is what one replica gives (202, 409, 404…).
 *
 * - A command is taken (`running`) before it is applied, so it is applied once; its sender gives up
 *   after `timeoutMs` only if it was not taken yet (503 `owner_unavailable`: nothing was done).
 * - A run taken over takes its commands with it (`retarget`), running ones included: a command whose
 *   owner died while applying it is applied again by the next owner (at least once; every command is
 *   safe to repeat or answers 409).
 * - Notifications wake both sides; both also poll slowly, so a lost notification is a delay.
 */
import type pg from 'pg';
import type { Notifications } from './notifications.js';

/** What the owner answers: the body of a success, or an error of the API's catalog. */
export type CommandAnswer = { ok: true; value: unknown } | { ok: false; code: string; message: string };

export type CommandHandler = (body: unknown) => Promise<CommandAnswer>;

const POLL_MS = 500;

export class Commands {
  private readonly waiting = new Map<number, () => void>();
  private serving = false;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private handler: CommandHandler | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly instance: () => string | undefined,
    notifications: Notifications,
    private readonly timeoutMs: number,
  ) {
    notifications.on('toolgraph_commands', (target) => {
      if (target === this.instance()) void this.serve();
    });
    notifications.on('toolgraph_command_done', (id) => this.waiting.get(Number(id))?.());
    notifications.on('resync', () => {
      void this.serve();
      for (const wake of this.waiting.values()) wake();
    });
  }

  /** Starts applying the commands sent to this replica. */
  start(handler: CommandHandler): void {
    this.handler = handler;
    const tick = () => {
      void this.serve();
      this.timer = setTimeout(tick, POLL_MS * 2);
      this.timer.unref();
    };
    tick();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.handler = undefined;
  }

  /** Sends a command to the owner of `runId` and waits for its answer. */
  async send(runId: string, body: unknown): Promise<CommandAnswer> {
    const sent = await this.pool.query<{ id: number; target: string }>(
      `WITH c AS (INSERT INTO commands (run_id, target, body, status, created_at)
         SELECT id, coalesce(owner, ''), $2, 'pending', toolgraph_now() FROM runs WHERE id = $1 RETURNING id, target)
       SELECT c.id, c.target, pg_notify('toolgraph_commands', c.target) FROM c`,
      [runId, JSON.stringify(body)],
    );
    const row = sent.rows[0];
    if (!row) return { ok: false, code: 'not_found', message: `no run ${runId}` };
    const id = Number(row.id);
    const deadline = Date.now() + this.timeoutMs;
    try {
      for (;;) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, POLL_MS);
          this.waiting.set(id, () => {
            clearTimeout(timer);
            resolve();
          });
        });
        const answer = await this.answer(id);
        if (answer) return answer;
        if (Date.now() < deadline) {
          await this.followOwner(id);
          continue;
        }
        // Not taken in time: withdrawn, so it is never applied after its sender gave up.
        const withdrawn = await this.pool.query(
          `UPDATE commands SET status = 'done', result = 'null' WHERE id = $1 AND status = 'pending'`,
          [id],
        );
        if (withdrawn.rowCount === 1) {
          return {
            ok: false,
            code: 'owner_unavailable',
            message: `the replica that owns run ${runId} did not take the command in ${this.timeoutMs} ms; nothing was done; retry later`,
          };
        }
      }
    } finally {
      this.waiting.delete(id);
    }
  }

  /** Commands of runs this replica took over are its own now (see the top of the file). */
  async retarget(runIds: readonly string[]): Promise<void> {
    const me = this.instance();
    if (me === undefined || runIds.length === 0) return;
    await this.pool.query(
      `WITH c AS (UPDATE commands SET target = $2, status = 'pending' WHERE run_id = ANY($1::text[]) AND status <> 'done' RETURNING 1)
       SELECT pg_notify('toolgraph_commands', $2) WHERE EXISTS (SELECT 1 FROM c)`,
      [runIds, me],
    );
  }

  private async answer(id: number): Promise<CommandAnswer | undefined> {
    const r = await this.pool.query<{ status: string; result: string | null }>('SELECT status, result FROM commands WHERE id = $1', [id]);
    const row = r.rows[0];
    if (row?.status !== 'done' || row.result === null || row.result === 'null') return undefined;
    return JSON.parse(row.result) as CommandAnswer;
  }

  /** A pending command whose target is no longer the run's owner goes to the owner now. */
  private async followOwner(id: number): Promise<void> {
    await this.pool.query(
      `WITH c AS (UPDATE commands c SET target = r.owner FROM runs r
         WHERE c.id = $1 AND c.status = 'pending' AND r.id = c.run_id AND r.owner IS NOT NULL AND r.owner <> c.target RETURNING c.target)
       SELECT pg_notify('toolgraph_commands', c.target) FROM c`,
      [id],
    );
  }

  /** Applies the commands sent to this replica, oldest first, one at a time. */
  private async serve(): Promise<void> {
    if (this.serving) {
      this.again = true;
      return;
    }
    this.serving = true;
    try {
      do {
        this.again = false;
        const me = this.instance();
        const handler = this.handler;
        if (me === undefined || handler === undefined) return;
        const rows = (
          await this.pool.query<{ id: number; body: string }>(
            `SELECT id, body FROM commands WHERE target = $1 AND status = 'pending' ORDER BY id LIMIT 50`,
            [me],
          )
        ).rows;
        for (const row of rows) {
          const taken = await this.pool.query(
            `UPDATE commands SET status = 'running' WHERE id = $1 AND status = 'pending' AND target = $2`,
            [row.id, me],
          );
          if (taken.rowCount !== 1) continue;
          let answer: CommandAnswer;
          try {
            answer = await handler(JSON.parse(row.body));
          } catch (err) {
            answer = { ok: false, code: 'internal', message: (err as Error).message };
          }
          await this.pool.query(
            `WITH c AS (UPDATE commands SET status = 'done', result = $2 WHERE id = $1 AND target = $3 RETURNING id)
             SELECT pg_notify('toolgraph_command_done', c.id::text) FROM c`,
            [row.id, JSON.stringify(answer), me],
          );
        }
        if (rows.length === 50) this.again = true;
      } while (this.again);
    } catch {
      // The database is away: the next notification or poll tries again.
    } finally {
      this.serving = false;
    }
  }
}
