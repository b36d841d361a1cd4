/**
 * The engine's views of its runs: each run's projection of its stored events, the listeners and waiters
 * on it, and how long an ended run stays (`retainEndedMs`, `retainEndedRuns`). A run whose first event
 * is numbered but not stored yet is "unborn": invisible (`get` and `has` do not know it) until
 * `publish` sees its first event.
 */
import type { RunStatus } from '../core/calls.js';
import { withSeq, type CoreEvent, type RunEvent } from '../core/events.js';
import { isRunEnded } from '../core/state.js';
import { RunProjection, type RunView } from '../core/view.js';
import { tell, type RunListener } from './listeners.js';

interface LiveRun {
  projection: RunProjection;
  seq: number;
  listeners: Set<RunListener>;
  waiters: Set<() => void>;
  endedAt?: number;
}

interface EndedEntry {
  runId: string;
  endedAt: number;
  /** When to look at it: once `retainEndedMs` has passed. */
  due: number;
}

/** Whether a run has ended (the run state machine's word: core/state.ts). */
export const isEnded: (status: RunStatus) => boolean = isRunEnded;

export class RunViews {
  private readonly runs = new Map<string, LiveRun>();
  /** Runs whose first event is numbered but not yet stored: not visible until it is (see `publish`). */
  private readonly unborn = new Map<string, LiveRun>();
  private readonly globalListeners = new Set<RunListener>();
  /** Ended runs, in the order they ended, from `endedHead` on (see `forgetOldRuns`). */
  private readonly endedRuns: EndedEntry[] = [];
  private endedHead = 0;

  constructor(
    private readonly retainEndedMs: number,
    private readonly retainEndedRuns: number,
    /** Told when a run ends (the scheduler lets it go) and when its view is forgotten. */
    private readonly release: (runId: string) => void,
  ) {}

  has(runId: string): boolean {
    return this.runs.has(runId);
  }

  /**
   * The view of a run that has ended for good (not needs_replan): such a run takes no more input, and
   * the scheduler has already let it go (see `publish`), so the engine answers for it.
   */
  endedForGood(runId: string): RunView | undefined {
    const view = this.runs.get(runId)?.projection.view;
    return view && isEnded(view.status) && view.status !== 'needs_replan' ? view : undefined;
  }

  /** Whether the run is here at all: visible, or submitted and not stored yet (unborn). */
  knows(runId: string): boolean {
    return this.runs.has(runId) || this.unborn.has(runId);
  }

  get(runId: string): RunView | undefined {
    return this.runs.get(runId)?.projection.view;
  }

  projection(runId: string): RunProjection | undefined {
    return this.runs.get(runId)?.projection;
  }

  /** Takes a run back from its stored events (visible at once); `forget` undoes it. */
  adopt(events: readonly RunEvent[]): RunView {
    const first = events[0] as RunEvent;
    const live: LiveRun = {
      projection: RunProjection.of(events),
      seq: (events[events.length - 1] as RunEvent).seq,
      listeners: new Set(),
      waiters: new Set(),
    };
    this.runs.set(first.runId, live);
    return live.projection.view;
  }

  forget(runId: string): void {
    this.runs.delete(runId);
    this.unborn.delete(runId);
  }

  /** Resolves with the run's view when it ends, or as it stands after `timeoutMs`. */
  wait(runId: string, timeoutMs = Infinity): Promise<RunView | undefined> {
    const live = this.runs.get(runId);
    if (!live) return Promise.resolve(undefined);
    if (isEnded(live.projection.view.status) || timeoutMs <= 0) return Promise.resolve(live.projection.view);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        if (timer) clearTimeout(timer);
        live.waiters.delete(done);
        resolve(live.projection.view);
      };
      live.waiters.add(done);
      if (Number.isFinite(timeoutMs)) timer = setTimeout(done, timeoutMs);
    });
  }

  /** Listens to one run's events (after they are durable). Returns an unsubscribe function. */
  subscribe(runId: string, listener: RunListener): () => void {
    const live = this.runs.get(runId);
    if (!live) return () => {};
    live.listeners.add(listener);
    return () => live.listeners.delete(listener);
  }

  /** Listens to every run's events. */
  onEvent(listener: RunListener): () => void {
    this.globalListeners.add(listener);
    return () => this.globalListeners.delete(listener);
  }

  /** Forgets every run (see `Engine.abandon`): their waits end first, with the runs as they stand. */
  forgetAll(): void {
    this.wakeAll();
    this.runs.clear();
    this.unborn.clear();
  }

  /** Ends every wait now, with the run as it stands. */
  wakeAll(): void {
    for (const live of this.runs.values()) for (const w of [...live.waiters]) w();
  }

  /** Gives the event of a run its seq (the run's next); a new run starts unborn. */
  number(e: CoreEvent): RunEvent {
    let live = this.runs.get(e.runId) ?? this.unborn.get(e.runId);
    if (!live) {
      live = { projection: new RunProjection(e), seq: 0, listeners: new Set(), waiters: new Set() };
      this.unborn.set(e.runId, live);
    }
    live.seq += 1;
    return withSeq(e, live.seq);
  }

  /** The event is stored: apply it to the view and tell the listeners. */
  publish(e: RunEvent): void {
    let live = this.runs.get(e.runId);
    if (!live) {
      // The run's first event is stored: from now on the run is visible.
      live = this.unborn.get(e.runId) as LiveRun;
      this.unborn.delete(e.runId);
      this.runs.set(e.runId, live);
    }
    if (e.seq > 1) live.projection.apply(e);
    const view = live.projection.view;
    const call = e.callId === undefined ? undefined : live.projection.call(e.callId);
    for (const l of live.listeners) tell(l, e, view, call);
    for (const l of this.globalListeners) tell(l, e, view, call);
    if (e.type === 'run.replanned') delete live.endedAt;
    if (e.type === 'run.completed') {
      live.endedAt = e.at;
      for (const w of [...live.waiters]) w();
      // The scheduler needs an ended run no more (it keeps a needs_replan one): dropping it at once
      // keeps its dispatch loop over live runs only. The view stays here for `retainEndedMs`.
      this.release(e.runId);
      this.endedRuns.push({ runId: e.runId, endedAt: e.at, due: e.at + this.retainEndedMs });
      this.forgetOldRuns(e.at);
    }
  }

  /**
   * Forgets the views of runs that ended more than `retainEndedMs` ago, or beyond the newest
   * `retainEndedRuns`, oldest first, from a queue in the order they ended (so the cost is per forgotten
   * run, not a scan of every run per completion). A run with listeners is looked at again a period
   * later; a needs_replan run stays until a replan, after which it is queued again when it ends again.
   */
  private forgetOldRuns(now: number): void {
    const q = this.endedRuns;
    // Each entry is looked at once per call: one that is put back (listeners) is not looked at again.
    const end = q.length;
    while (this.endedHead < end) {
      const entry = q[this.endedHead] as EndedEntry;
      if (entry.due >= now && q.length - this.endedHead <= this.retainEndedRuns) break;
      this.endedHead++;
      const live = this.runs.get(entry.runId);
      if (!live || live.endedAt !== entry.endedAt || live.projection.view.status === 'needs_replan') continue;
      if (live.listeners.size > 0) {
        q.push({ ...entry, due: now + this.retainEndedMs });
        continue;
      }
      this.runs.delete(entry.runId);
      this.release(entry.runId);
    }
    if (this.endedHead > 1024 && this.endedHead * 2 > q.length) {
      q.splice(0, this.endedHead);
      this.endedHead = 0;
    }
  }
}
