/**
 * What this replica's calls wait for, published for the others (DESIGN §7 `GET /v1/limits`, §12): a
 * compact summary, per limit or lock, of how many ready calls wait for it and since when the longest
 * of them waits, in this replica's row of `replicas` (migration 0003). `GET /v1/limits` on any replica
 * adds up the summaries of the live replicas (limits-view.ts); a replica whose lease ended counts no
 * more.
 *
 * The summary is looked at every `everyMs` and written only when it changed: while the same calls wait
 * for the same limits it stays the same, since it carries when they began waiting, on this replica's
 * clock, with the database's time of the write to turn them into ages (so replicas' clocks may differ).
 */
import type { WaitCounts } from '../core/scheduler.js';
import { WAIT_KINDS, type WaitKind } from '../core/waiting.js';
import type { PublishWaits } from '../store/postgres/wait-summary.js';

/** At most this many limits per replica are published (those waited for longest). */
export const MAX_PUBLISHED = 500;

/** One limit or lock that calls of a replica wait for. */
export interface PublishedWait {
  kind: WaitKind;
  key?: string;
  domain?: string;
  /** How many calls wait for it. */
  n: number;
  /** When the longest of them began waiting, on the publisher's clock. */
  since: number;
}

/** The entries of a summary (the shared limits and locks), longest waits first, at most `MAX_PUBLISHED`. */
export function summaryOf(counts: WaitCounts): PublishedWait[] {
  const out: PublishedWait[] = [];
  for (const [id, w] of counts) {
    const [kind, a, b] = id.split('\u0000') as [WaitKind, string | undefined, string | undefined];
    // `global` and `perRun` are each replica's own: not shared, so not published.
    if (!(WAIT_KINDS as readonly string[]).includes(kind) || kind === 'global' || kind === 'perRun') continue;
    if (kind === 'lock') out.push({ kind, key: b ?? '', domain: a ?? '', n: w.n, since: w.since });
    else out.push({ kind, ...(a !== undefined ? { key: a } : {}), n: w.n, since: w.since });
  }
  out.sort((x, y) => x.since - y.since || x.n - y.n);
  return out.slice(0, MAX_PUBLISHED);
}

/** Where the summary comes from: the engine's waiters now, and its clock. */
export type WaitSource = () => { counts: WaitCounts; now: number };

export class WaitPublisher {
  private timer: NodeJS.Timeout | undefined;
  private last: { instance: string; text: string } | undefined;
  private busy = false;

  constructor(
    private readonly write: PublishWaits,
    private readonly instance: () => string | undefined,
    private readonly everyMs = 250,
  ) {}

  start(source: WaitSource): void {
    this.stop();
    const tick = (delay: number) => {
      this.timer = setTimeout(() => {
        void this.publish(source).then((tookMs) => this.timer && tick(this.next(tookMs)));
      }, delay);
      this.timer.unref();
    };
    tick(this.everyMs);
  }

  /**
   * The pause before the next look: `everyMs`, or longer when counting took long (tens of thousands of
   * waiting calls), so that looking costs at most ~2% of the replica's time.
   */
  private next(tookMs: number): number {
    return Math.min(5000, Math.max(this.everyMs, Math.round(tookMs * 50)));
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * Writes the summary if it changed since the last write (or the instance did); never throws.
   * Resolves with how long making it took (ms), the database's round trip left out.
   */
  async publish(source: WaitSource): Promise<number> {
    const instance = this.instance();
    if (instance === undefined || this.busy) return 0;
    const started = performance.now();
    const { counts, now } = source();
    const text = JSON.stringify(summaryOf(counts));
    const tookMs = performance.now() - started;
    if (this.last?.instance === instance && this.last.text === text) return tookMs;
    this.busy = true;
    try {
      await this.write(instance, text, Math.round(now));
      this.last = { instance, text };
    } catch {
      // The database is away: the next look tries again.
      this.last = undefined;
    } finally {
      this.busy = false;
    }
    return tookMs;
  }
}
