/**
 * `onConcurrent: queue` (DESIGN §4): a run submitted while an earlier unfinished run of its tenant and
 * `concurrencyKey` exists is held `queued` by the engine; this starts it once it is the first run that
 * holds the key, as the ledger says (run-keys.ts: the store, or the cluster's claims in their order, so
 * an earlier run on another replica counts too).
 *
 * Woken when a run of this engine ends, and every `intervalMs` as a backstop (for an earlier run that
 * ends on another replica, and for runs held before a restart or a takeover). One look at a time.
 */
import type { Engine } from '../engine/engine.js';
import type { KeyLedger } from './run-keys.js';

export interface HeldRunsOptions {
  engine: Engine;
  /** The runs holding each key (run-keys.ts). */
  ledger: KeyLedger;
  /** @default 250 */
  intervalMs?: number;
  /** Told of a look that failed (the store away, say); the next look tries again. */
  onError?: (err: unknown) => void;
}

export class HeldRuns {
  private readonly timer: NodeJS.Timeout;
  private readonly unsubscribe: () => void;
  private looking: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(private readonly o: HeldRunsOptions) {
    this.timer = setInterval(() => this.wake(), o.intervalMs ?? 250);
    this.timer.unref();
    this.unsubscribe = o.engine.onEvent((e) => {
      if (e.type === 'run.completed') this.wake();
    });
  }

  /** Looks now (or right after the look under way). */
  wake(): void {
    if (this.stopped) return;
    if (this.looking) {
      this.again = true;
      return;
    }
    this.looking = this.look()
      .catch((err) => this.o.onError?.(err))
      .finally(() => {
        this.looking = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** Resolves once the look under way (if any) is done: for tests and shutdown. */
  async settled(): Promise<void> {
    await this.looking;
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.unsubscribe();
  }

  private async look(): Promise<void> {
    const held = this.o.engine.heldRuns();
    if (held.length === 0) return;
    const firsts = new Map<string, string | undefined>();
    for (const h of held) {
      const slot = `${h.tenant}\u0000${h.concurrencyKey}`;
      if (!firsts.has(slot)) firsts.set(slot, (await this.o.ledger.holders(h.tenant, h.concurrencyKey))[0]);
      if (firsts.get(slot) === h.runId && !this.stopped) await this.o.engine.release(h.runId);
    }
  }
}
