/**
 * The engine's side of hooks (DESIGN §14): the scheduler asks for a call's hooks in its output
 * (`Output.hooks`); once that output is stored the engine launches them here, and each answer goes
 * back to the scheduler with the next group commit, like an attempt's end. A call's hooks run one
 * request at a time; `close` aborts what still runs (its call is resumed after a restart, where its
 * hooks are asked again: their decision was never stored).
 */
import { setMaxListeners } from 'node:events';
import type { HookAnswer, HookDecision, HookRequest } from '../core/hooks.js';
import type { Config } from '../contract/config.js';
import { createHookRunner, type HookRunner } from '../hooks/index.js';

const NONE: HookAnswer[] = [];

export class HookGate {
  /** Answers not taken yet (`answered`). */
  private answers: HookAnswer[] = [];
  /** Requests running, by `on/run/call`: each answers once. */
  private readonly running = new Map<string, number>();
  /** Aborts every hook still running, on `close` (one signal for all: a call's own hooks are not aborted). */
  private readonly stop = new AbortController();
  private launched = 0;
  private closed = false;

  constructor(
    private readonly runner: HookRunner,
    /** Told when an answer comes (never after `close`): take it with `answered`. */
    private readonly wake: () => void,
    /** Whether `close` closes the runner (the one the gate made). */
    private readonly owns = false,
    /** The engine's clock (a decision's `startedAt` is on the run's clock, DESIGN §8). */
    private readonly clock: () => number = Date.now,
  ) {
    // Every running request listens to it: as many as run at once, by design.
    setMaxListeners(0, this.stop.signal);
  }

  /** A gate over the config's hooks, or undefined when it has none (and no runner is given). */
  static of(config: Config, runner: HookRunner | undefined, clock: () => number, wake: () => void): HookGate | undefined {
    if (runner) return new HookGate(runner, wake, false, clock);
    if (!config.hooks || config.hooks.length === 0) return undefined;
    const maxInFlight = config.limits.hooksInFlight;
    return new HookGate(
      createHookRunner(config.hooks, { clock, ...(maxInFlight !== undefined ? { maxInFlight } : {}) }),
      wake,
      true,
      clock,
    );
  }

  /** The answers that came since the last call, in the order they came. */
  answered(): HookAnswer[] {
    if (this.answers.length === 0) return NONE;
    const out = this.answers;
    this.answers = [];
    return out;
  }

  launch(req: HookRequest): void {
    if (this.closed) return;
    const key = `${req.on}/${req.runId}/${req.callId}`;
    const id = ++this.launched;
    this.running.set(key, id);
    const done = (decisions: HookDecision[]) => {
      if (this.running.get(key) !== id) return;
      this.running.delete(key);
      if (this.closed) return;
      this.answers.push({ on: req.on, runId: req.runId, callId: req.callId, index: req.index, decisions });
      this.wake();
    };
    this.runner.run(req, this.stop.signal).then(done, (err: unknown) => {
      // The runner never throws; if it did, nothing it would have decided is known: as `onError: deny`.
      const error = `the hook runner failed: ${err instanceof Error ? err.message : String(err)}`;
      const base = { hook: 'runner', startedAt: this.clock(), durationMs: 0, error };
      done([
        req.on === 'before_call' ? { ...base, decision: 'deny', reason: error } : { ...base, decision: 'fail', fail: { message: error } },
      ]);
    });
  }

  /** Drops what runs now: its answers are not told (the engine let its runs go, `Engine.abandon`). */
  forget(): void {
    this.running.clear();
    this.answers = [];
  }

  /** How many requests run now. */
  get size(): number {
    return this.running.size;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stop.abort();
    this.running.clear();
    if (this.owns) await this.runner.close();
  }
}
