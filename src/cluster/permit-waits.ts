/**
 * First come, first served for lock waiters across replicas (DESIGN §4, §12), without a cluster-wide
 * lock: a call refused by a lock leaves a *mark* on the lock rows of its keys (`at`, the key's own
 * node) and of their ancestors (`below`): who waits, for a read or a write, since when (the database's
 * time of its first refusal) and until when the mark holds (refreshed at each ask again; it lapses
 * `ttlMs` after the last, so a waiter that went away frees the way by itself). A call that is younger
 * than a live mark of another run that conflicts with it waits behind that waiter, as one replica's
 * limiter makes a call wait behind an earlier conflicting waiter — unless it is more urgent (a lower
 * level: its run's priority with aging, as for counters, permit-priority.ts): a more urgent call goes
 * before less urgent waiters, and waits behind more urgent ones whatever their age. Each row keeps one
 * mark per place, the first waiter's in that order (a younger writer makes it a write), so the first
 * waiter of a key is only ever made to wait by running calls: once they end, it starts. That is what keeps a writer from being
 * starved by a stream of readers on other replicas (and readers by writers). Pure: the rows are the
 * ones the ask locked, and the changed marks are written back with it.
 */
import type { PermitRequest } from '../core/scheduler.js';

/** What the queue needs of a call's claim (permit-plan.ts `Claim`): who asks, and its lock targets. */
export interface Claim {
  request: PermitRequest;
  locks: readonly { row: string; mode: 'r' | 'w'; ancestors: readonly string[] }[];
}

export interface Mark {
  run: string;
  call: string;
  tenant: string;
  /** The waiter's key (as written), for its `waitingFor`. */
  key: string;
  mode: 'r' | 'w';
  since: number;
  until: number;
  /** The run's priority (absent: 3) and when it became ready (absent: `since`): its level, as for counters (permit-priority.ts). */
  priority?: number;
  readyAt?: number;
}

/** The marks of a lock row: of a waiter of its own node, and of one below it. */
export interface NodeMarks {
  at?: Mark | null;
  below?: Mark | null;
}

/** What `decide` asks of the cross-ask queue. */
export interface WaitQueue {
  /** An older waiter of another run that `c` conflicts with, if any. */
  ahead(c: Claim): Mark | undefined;
  /** `c` was refused by a lock: marks it (or refreshes its marks). */
  waiting(c: Claim): void;
  /** `c` was granted: its marks go. */
  granted(c: Claim): void;
  /** When `c` was first refused by a lock; +Infinity when it does not wait (a newcomer is last in line). */
  sinceOf(c: Claim): number;
}

export class LockQueue implements WaitQueue {
  private readonly changedRows = new Set<string>();

  /**
   * `marks`: those of the rows the ask locked (changed in place); `since`: when each call that waits
   * already (by `callKey`) was first refused.
   */
  constructor(
    private readonly marks: Map<string, NodeMarks>,
    private readonly now: number,
    private readonly ttlMs: number,
    private readonly since: Map<string, number>,
    /** `limits.priorityAgingMs`: a waiter's level drops one per this many ms (none given: no aging). */
    private readonly agingMs = Number.POSITIVE_INFINITY,
  ) {}

  /** A waiter's level now: its priority less one per `agingMs` since it became ready, at least 1. */
  private levelOf(priority: number | undefined, readyAt: number): number {
    const p = priority ?? 3;
    if (p <= 1) return 1;
    const aged = Math.floor((this.now - readyAt) / this.agingMs);
    return aged <= 0 ? p : Math.max(1, p - aged);
  }

  private markLevel(m: Mark): number {
    return this.levelOf(m.priority, m.readyAt ?? m.since);
  }

  private claimLevel(c: Claim): number {
    return this.levelOf(c.request.priority, this.now - Math.max(0, c.request.readyMs ?? 0));
  }

  sinceOf(c: Claim): number {
    return this.since.get(callKey(c)) ?? Number.POSITIVE_INFINITY;
  }

  ahead(c: Claim): Mark | undefined {
    const mine = this.sinceOf(c);
    const level = this.claimLevel(c);
    // A more urgent waiter (a lower level) goes first; within a level, the one that asked first.
    const before = (m: Mark) => {
      const lm = this.markLevel(m);
      if (lm !== level) return lm < level;
      return m.since < mine || (m.since === mine && m.call + m.run < c.request.callId + c.request.runId);
    };
    const blocks = (m: Mark | null | undefined, mode: 'r' | 'w'): m is Mark =>
      !!m && m.until > this.now && m.run !== c.request.runId && before(m) && (mode === 'w' || m.mode === 'w');
    for (const l of c.locks) {
      const here = this.marks.get(l.row);
      if (blocks(here?.at, l.mode)) return here?.at as Mark;
      if (blocks(here?.below, l.mode)) return here?.below as Mark;
      for (const a of l.ancestors) {
        const up = this.marks.get(a)?.at;
        if (blocks(up, l.mode)) return up;
      }
    }
    return undefined;
  }

  waiting(c: Claim): void {
    const k = callKey(c);
    const since = this.since.get(k) ?? this.now;
    this.since.set(k, since);
    c.locks.forEach((l, i) => {
      const mark: Mark = {
        run: c.request.runId,
        call: c.request.callId,
        tenant: c.request.tenant,
        key: (l.mode === 'w' ? c.request.writes : c.request.reads)[l.mode === 'w' ? i : i - c.request.writes.length] ?? '*',
        mode: l.mode,
        since,
        until: this.now + this.ttlMs,
        ...(c.request.priority !== undefined ? { priority: c.request.priority } : {}),
        ...(c.request.readyMs !== undefined ? { readyAt: this.now - Math.max(0, c.request.readyMs) } : {}),
      };
      this.put(l.row, 'at', mark);
      for (const a of l.ancestors) this.put(a, 'below', mark);
    });
  }

  granted(c: Claim): void {
    this.since.delete(callKey(c));
    const rows = new Set(c.locks.flatMap((l) => [l.row, ...l.ancestors]));
    for (const row of rows) {
      const m = this.marks.get(row);
      if (!m) continue;
      for (const place of ['at', 'below'] as const) {
        const x = m[place];
        if (x && x.run === c.request.runId && x.call === c.request.callId) {
          m[place] = null;
          this.changedRows.add(row);
        }
      }
    }
  }

  /** Whether mark `a` goes before `b`: a lower level, or the same level and asked first. */
  private precedes(a: Mark, b: Mark): boolean {
    const la = this.markLevel(a);
    const lb = this.markLevel(b);
    return la !== lb ? la < lb : a.since < b.since;
  }

  /** The rows whose marks changed, with their marks now. */
  changed(): Map<string, NodeMarks> {
    return new Map([...this.changedRows].map((row) => [row, this.marks.get(row) as NodeMarks]));
  }

  private put(row: string, place: 'at' | 'below', mark: Mark): void {
    const m = this.marks.get(row) ?? {};
    this.marks.set(row, m);
    const cur = m[place];
    const live = !!cur && cur.until > this.now;
    const same = !!cur && cur.run === mark.run && cur.call === mark.call;
    if (!live || same || this.precedes(mark, cur as Mark)) {
      const mode = live && !same && (cur as Mark).mode === 'w' ? 'w' : mark.mode;
      m[place] = { ...mark, mode: same && (cur as Mark).mode === 'w' ? 'w' : mode };
    } else if (mark.mode === 'w' && (cur as Mark).mode === 'r') m[place] = { ...(cur as Mark), mode: 'w' };
    else return;
    this.changedRows.add(row);
  }
}

/** A call, as the queue knows it. */
export function callKey(c: Claim): string {
  return `${c.request.runId}\u0000${c.request.callId}`;
}
