/**
 * Events of any replica's runs, for this replica's readers (DESIGN §12): `/v1/runs/{id}/events`,
 * `/v1/stream` and waits. Every append NOTIFYs `toolgraph_events` with the runs it wrote and their last
 * seq (store/postgres-append.ts); a subscription behind that seq reads what it lacks from the store,
 * so it is gapless and in order whichever replica appended. A slow poll (`pollMs`) and a read after
 * every reconnect of the LISTEN connection cover notifications that were missed.
 */
import type { RunEvent } from '../core/events.js';
import type { Store } from '../store/types.js';
import type { Notifications } from './notifications.js';

interface Subscription {
  runId: string;
  last: number;
  deliver: (events: RunEvent[]) => void;
  reading: boolean;
  again: boolean;
  closed: boolean;
}

export class EventFeed {
  private readonly subs = new Map<string, Set<Subscription>>();
  private readonly changed = new Set<(runId: string) => void>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: Store,
    notifications: Notifications,
    private readonly pollMs = 2000,
  ) {
    notifications.on('toolgraph_events', (payload) => this.notified(payload));
    notifications.on('resync', () => this.pullAll());
  }

  /**
   * Delivers the run's events after `afterSeq`, in order, as they are stored (by any replica), until
   * the returned function is called.
   */
  subscribe(runId: string, afterSeq: number, deliver: (events: RunEvent[]) => void): () => void {
    const sub: Subscription = { runId, last: afterSeq, deliver, reading: false, again: false, closed: false };
    let set = this.subs.get(runId);
    if (!set) this.subs.set(runId, (set = new Set()));
    set.add(sub);
    this.arm();
    void this.pull(sub);
    return () => {
      sub.closed = true;
      set.delete(sub);
      if (set.size === 0) this.subs.delete(runId);
    };
  }

  /** Told the id of each run that has new events, whichever replica wrote them. */
  onRunChanged(listener: (runId: string) => void): () => void {
    this.changed.add(listener);
    return () => this.changed.delete(listener);
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private notified(payload: string): void {
    for (const item of payload.split(',')) {
      const at = item.lastIndexOf(':');
      if (at <= 0) continue;
      const runId = item.slice(0, at);
      const seq = Number(item.slice(at + 1));
      for (const sub of this.subs.get(runId) ?? []) if (seq > sub.last) void this.pull(sub);
      for (const l of this.changed) l(runId);
    }
  }

  private arm(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.subs.size === 0) {
        clearInterval(this.timer);
        this.timer = undefined;
        return;
      }
      this.pullAll();
    }, this.pollMs);
    this.timer.unref();
  }

  private pullAll(): void {
    for (const set of this.subs.values()) for (const sub of set) void this.pull(sub);
  }

  private async pull(sub: Subscription): Promise<void> {
    if (sub.reading) {
      sub.again = true;
      return;
    }
    sub.reading = true;
    try {
      do {
        sub.again = false;
        const events = await this.store.events(sub.runId, sub.last);
        if (sub.closed) return;
        const last = events[events.length - 1];
        if (last) {
          sub.last = last.seq;
          sub.deliver(events);
        }
      } while (sub.again && !sub.closed);
    } catch {
      // The store is away: the poll or the next notification reads again.
    } finally {
      sub.reading = false;
    }
  }
}
