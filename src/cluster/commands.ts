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
import type { CommandsSql } from '../store/postgres/commands.js';
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
    private readonly sql: CommandsSql,
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
    const id = await this.sql.send(runId, JSON.stringify(body));
    if (id === undefined) return { ok: false, code: 'not_found', message: `no run ${runId}` };
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
          // A pending command whose target is no longer the run's owner goes to the owner now.
          await this.sql.followOwner(id);
          continue;
        }
        // Not taken in time: withdrawn, so it is never applied after its sender gave up.
        const withdrawn = await this.sql.withdraw(id);
        if (withdrawn) {
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
    await this.sql.retarget(runIds, me);
  }

  private async answer(id: number): Promise<CommandAnswer | undefined> {
    const result = await this.sql.answer(id);
    return result === undefined ? undefined : (JSON.parse(result) as CommandAnswer);
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
        const rows = await this.sql.pending(me, 50);
        for (const row of rows) {
          if (!(await this.sql.take(row.id, me))) continue;
          let answer: CommandAnswer;
          try {
            answer = await handler(JSON.parse(row.body));
          } catch (err) {
            answer = { ok: false, code: 'internal', message: (err as Error).message };
          }
          await this.sql.finish(row.id, me, JSON.stringify(answer));
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
