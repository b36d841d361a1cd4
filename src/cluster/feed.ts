/**
 * Events of any replica's runs, for this replica's readers (DESIGN §12): `/v1/runs/{id}/events`,
 * `/v1/stream` and waits. While this replica has such a reader it *follows*: it keeps a row in
 * `event_followers` (store/postgres/followers.ts), and while any replica follows, every append NOTIFYs
 * `toolgraph_events` with the runs it wrote and their last seq (store/postgres-append.ts). A
 * subscription behind that seq reads what it lacks from the store, so it is gapless and in order
 * whichever replica appended. A slow poll (`pollMs`) and a read after every reconnect of the LISTEN
 * connection cover notifications that were missed.
 *
 * With no follower an append sends no NOTIFY, so a cluster whose clients read their runs where they
 * submitted them wakes no replica per append. Following starts with the first reader and stops once
 * there has been none for a whole renewal (`renewMs`): readers that come and go do not make it flap.
 * When it starts, appends already under way may not have seen the row: every subscription reads again
 * once the row is written and once more `settleMs` later.
 */
import type { RunEvent } from '../core/events.js';
import type { Store } from '../store/types.js';
import type { Notifications } from './notifications.js';

/** How this replica says that it follows (store/postgres/followers.ts, bound to its own id). */
export interface Following {
  /** Follows for the next `ttlMs`. */
  follow(ttlMs: number): Promise<void>;
  unfollow(): Promise<void>;
}

export interface FeedOptions {
  /** The slow poll of every subscription (ms). */
  pollMs?: number;
  /** How often a follower renews its row (ms); the row holds for three times that. */
  renewMs?: number;
  /** The second read of every subscription after following started (ms). */
  settleMs?: number;
}

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

  private readonly pollMs: number;
  private readonly renewMs: number;
  private readonly settleMs: number;
  /** Whether this replica follows (its row is written, or being written). */
  private following = false;
  private renewTimer: NodeJS.Timeout | undefined;
  /** Whether a reader came since the last renewal. */
  private seen = false;
  private writing: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly store: Store,
    notifications: Notifications,
    private readonly followers: Following,
    opts: FeedOptions = {},
  ) {
    this.pollMs = opts.pollMs ?? 2000;
    this.renewMs = opts.renewMs ?? 20_000;
    this.settleMs = opts.settleMs ?? 250;
    notifications.on('toolgraph_events', (payload) => this.notified(payload));
    notifications.on('resync', () => this.pullAll());
  }

  /** Whether this replica follows every replica's events now (for tests). */
  get follows(): boolean {
    return this.following;
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
    this.follow();
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
    this.follow();
    return () => this.changed.delete(listener);
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.renewTimer = undefined;
    if (this.following) void this.write(() => this.followers.unfollow());
    this.following = false;
  }

  private readers(): boolean {
    return this.subs.size > 0 || this.changed.size > 0;
  }

  /** A reader came: follow, unless this replica does already. */
  private follow(): void {
    this.seen = true;
    if (this.following || this.closed) return;
    this.following = true;
    this.renewTimer = setInterval(() => this.renew(), this.renewMs);
    this.renewTimer.unref();
    this.write(() => this.followers.follow(this.renewMs * 3)).then((written) => {
      if (!written) return; // The database is away: the next renewal writes the row; the poll covers what is missed.
      // Appends that began before the row was written may not announce their runs: read again.
      this.pullAll();
      setTimeout(() => this.pullAll(), this.settleMs).unref();
    });
  }

  /** Renews the row while readers come; stops following after a whole renewal with none. */
  private renew(): void {
    if (this.readers() || this.seen) {
      this.seen = this.readers();
      void this.write(() => this.followers.follow(this.renewMs * 3));
      return;
    }
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.renewTimer = undefined;
    this.following = false;
    void this.write(() => this.followers.unfollow());
  }

  /** The row's writes, one after the other (an unfollow never overtakes the follow after it); whether it was written. */
  private write(op: () => Promise<void>): Promise<boolean> {
    const done = this.writing.then(op).then(
      () => true,
      () => false,
    );
    this.writing = done;
    return done;
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
