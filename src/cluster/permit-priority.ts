/**
 * Priority across replicas for counted limits (DESIGN §4, §12): the most urgent call that waits for a
 * counter (`tool:<t>`, `tenant:<t>`, `resource:<k>`, a keyed group), on whichever replica, gets it
 * first. Without a cluster-wide lock: a call refused by a counter leaves a *mark* on the counter's row
 * (its run's priority, when the run became ready, on the database's clock, and until when the mark holds:
 * refreshed at each ask again, it lapses `ttlMs` after the last, so a waiter that went away frees the
 * way by itself). Waiters go by the lowest level (the run's
 * priority less one per `agingMs` it has waited, at least 1; computed when compared, so it ages while it
 * waits), then the run that became ready first. Each row keeps its most urgent waiters
 * (`MAX_COUNTER_WAITERS`), in that order; a call is granted only if the counter has room for it and for
 * every live waiter of another call that precedes it: of a lower level, or of the same level and ready
 * at least one aging period earlier (`precedes`). So the most urgent waiter is only ever made to wait by
 * running calls and by calls as urgent as it: once one ends, it starts, whichever replica asks first. Within a level, calls
 * that became ready about together take places as they ask (the order in which replicas ask), which costs
 * no hand-off to one replica in particular; one that has waited a period longer goes first.
 *
 * Pure, like permit-waits.ts (the lock queue): the marks are those of the counter rows the ask locked,
 * and the changed ones are written back with it. An ask for a counter with no mark reads the mark with
 * the counter (no round trip more) and writes nothing more.
 */
import type { PermitRequest } from '../core/scheduler.js';

/** A waiter of a counter. */
export interface CounterMark {
  run: string;
  call: string;
  tenant: string;
  /** The run's priority (1..5). */
  priority: number;
  /** When the run became ready (the database's clock): its age and its place in line. */
  readyAt: number;
  until: number;
  /** The instance whose call it is (absent in marks written before it was kept). */
  by?: string;
}

/** The default priority (DESIGN §4). */
export const DEFAULT_PRIORITY = 3;

/** At most this many waiters are kept per counter (the most urgent): places are kept for them only. */
export const MAX_COUNTER_WAITERS = 16;

export class CounterQueue {
  private readonly changedKeys = new Set<string>();

  /** `marks`: the waiters of the counters the ask locked, by key, most urgent first (changed in place). */
  constructor(
    private readonly marks: Map<string, CounterMark[]>,
    private readonly now: number,
    private readonly ttlMs: number,
    private readonly agingMs: number,
    /** The instance that asks: its marks say so. */
    private readonly by?: string,
  ) {}

  /**
   * The live waiters of other calls on `counter` that are more urgent than `r` (most urgent first):
   * `r` may take a place only if the counter has room for it and for each of them.
   */
  ahead(r: PermitRequest, counter: string): CounterMark[] {
    const list = this.marks.get(counter);
    if (!list || list.length === 0) return [];
    const mine = this.markOf(r, list);
    return list.filter((m) => m.until > this.now && !(m.run === r.runId && m.call === r.callId) && this.precedes(m, mine));
  }

  /**
   * Whether waiter `a` has a place kept before `b`: a lower level, or the same level and ready at least
   * one aging period earlier. Calls of one level that became ready about together take free places as
   * they ask (no hand-off waits for one replica in particular), and one that has waited a period longer
   * than the others is not passed by them.
   */
  private precedes(a: CounterMark, b: CounterMark): boolean {
    const la = this.levelOf(a);
    const lb = this.levelOf(b);
    return la !== lb ? la < lb : b.readyAt - a.readyAt >= this.agingMs;
  }

  /** `r` was refused by `counter`: it takes (or refreshes) its place among the counter's waiters. */
  waiting(r: PermitRequest, counter: string): void {
    const mark = this.markOf(r, this.marks.get(counter));
    const list = (this.marks.get(counter) ?? []).filter((m) => m.until > this.now && !(m.run === mark.run && m.call === mark.call));
    list.push(mark);
    list.sort((a, b) => (this.before(a, b) ? -1 : 1));
    this.marks.set(counter, list.slice(0, MAX_COUNTER_WAITERS));
    this.changedKeys.add(counter);
  }

  /** `r` waits no more for `counter` (granted it, or passed it and waits for something else): its place goes. */
  passed(r: PermitRequest, counter: string): void {
    const list = this.marks.get(counter);
    if (!list) return;
    const i = list.findIndex((m) => m.run === r.runId && m.call === r.callId);
    if (i < 0) return;
    list.splice(i, 1);
    this.changedKeys.add(counter);
  }

  /** The counters whose waiters changed, with their waiters now (live ones only). */
  changed(): Map<string, CounterMark[]> {
    return new Map([...this.changedKeys].map((k) => [k, (this.marks.get(k) ?? []).filter((m) => m.until > this.now)]));
  }

  /** A call's level now: its priority less one per `agingMs` since `readyAt`, at least 1. */
  levelOf(m: Pick<CounterMark, 'priority' | 'readyAt'>): number {
    if (m.priority <= 1) return 1;
    const aged = Math.floor((this.now - m.readyAt) / this.agingMs);
    return aged <= 0 ? m.priority : Math.max(1, m.priority - aged);
  }

  /** Whether `a` goes before `b`: a lower level, then ready earlier, then by id (a fixed order). */
  private before(a: CounterMark, b: CounterMark): boolean {
    const la = this.levelOf(a);
    const lb = this.levelOf(b);
    if (la !== lb) return la < lb;
    if (a.readyAt !== b.readyAt) return a.readyAt < b.readyAt;
    return a.run + a.call < b.run + b.call;
  }

  /** `r`'s mark now; its place in line never moves back (a live mark of it on the counter keeps its `readyAt`). */
  private markOf(r: PermitRequest, list?: readonly CounterMark[]): CounterMark {
    let readyAt = this.now - Math.max(0, r.readyMs ?? 0);
    const old = list?.find((m) => m.run === r.runId && m.call === r.callId && m.until > this.now);
    if (old && old.readyAt < readyAt) readyAt = old.readyAt;
    return {
      run: r.runId,
      call: r.callId,
      tenant: r.tenant,
      priority: r.priority ?? DEFAULT_PRIORITY,
      readyAt,
      until: this.now + this.ttlMs,
      ...(this.by !== undefined ? { by: this.by } : {}),
    };
  }
}
