/**
 * Backpressure across replicas (DESIGN §4, §12): a pause a replica's call got (a 429, a 503 with
 * `Retry-After`, an MCP `retryAfterMs`) is written to `tool_pauses` and NOTIFYed (`toolgraph_pauses`),
 * and every replica tells its engine of the pauses it hears and of those in force when its LISTEN
 * connection is back. The asks of permits read the table themselves (permits.ts); this replica's slices
 * grant no call of a tool paused here (`paused`).
 */
import type { Pause } from '../core/limits.js';
import type { PgPool } from '../store/pg-pool.js';
import * as sql from '../store/postgres/permits.js';
import type { Notifications } from './notifications.js';

export class ClusterPauses {
  private readonly listeners = new Set<(p: Pause) => void>();
  /** Tool → until when (`Date.now()`) a pause of it, or of one of its keys, holds. */
  private readonly tools = new Map<string, number>();

  constructor(
    private readonly pool: PgPool,
    notifications: Notifications,
  ) {
    notifications.on('resync', () => void this.read());
    notifications.on('toolgraph_pauses', (payload) => this.heard(payload));
  }

  /** Records a pause this replica's call got, and tells every replica. */
  pause(p: Pause): void {
    const ms = p.until - Date.now();
    if (ms <= 0) return;
    this.keep(p.tool, p.until);
    sql.writePause(this.pool, { tool: p.tool, key: p.key ?? '', ms, status: p.status ?? null }).catch(() => {
      // The database is away: this replica keeps the pause itself; asks are refused meanwhile anyway.
    });
  }

  /** `listener` is told of every pause in force: those other replicas got, and those there when it (re)connects. */
  onPaused(listener: (p: Pause) => void): void {
    this.listeners.add(listener);
    void this.read();
  }

  /** Whether a pause of `tool` (or of one of its keys) holds at `now` (`Date.now()`). */
  paused(tool: string, now: number): boolean {
    const until = this.tools.get(tool);
    if (until === undefined) return false;
    if (until > now) return true;
    this.tools.delete(tool);
    return false;
  }

  close(): void {
    this.listeners.clear();
  }

  private keep(tool: string, until: number): void {
    this.tools.set(tool, Math.max(this.tools.get(tool) ?? 0, until));
  }

  private heard(payload: string): void {
    try {
      const x = JSON.parse(payload) as { tool?: unknown; key?: unknown; ms?: unknown; status?: unknown };
      if (typeof x.tool !== 'string' || typeof x.ms !== 'number') return;
      this.tell({
        tool: x.tool,
        key: typeof x.key === 'string' ? x.key : '',
        ms: x.ms,
        status: typeof x.status === 'number' ? x.status : null,
      });
    } catch {
      // Not ours.
    }
  }

  private async read(): Promise<void> {
    if (this.listeners.size === 0) return;
    try {
      for (const p of await sql.pausesNow(this.pool)) this.tell(p);
    } catch {
      // The database is away: the next resync reads them again.
    }
  }

  private tell(p: { tool: string; key: string; ms: number; status: number | null }): void {
    if (p.ms <= 0) return;
    const pause: Pause = { tool: p.tool, until: Date.now() + p.ms };
    if (p.key !== '') pause.key = p.key;
    if (p.status !== null) pause.status = p.status;
    this.keep(p.tool, pause.until);
    for (const l of this.listeners) l(pause);
  }
}
