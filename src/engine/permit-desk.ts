/**
 * Where the engine asks for cluster-wide permits (DESIGN §12), when its scheduler is gated: the calls
 * that local limits let start wait here for the cluster's answer. Requests made in one turn of the event
 * loop go in one ask (one transaction on the database); one ask is in flight at a time, and what
 * arrives meanwhile goes in the next. An ask that fails (the database is away) refuses its calls: they
 * ask again when permits free, or on the gate's own retry.
 */
import type { Output, PermitRequest, Scheduler } from '../core/scheduler.js';
import type { WaitReason } from '../core/waiting.js';
import type { PermitAnswer, PermitGate } from './options.js';

/** A refusal that says nothing more (the cluster could not be asked). */
const REFUSED: PermitAnswer = Object.freeze({ granted: false });

export interface PermitAnswers {
  granted(r: PermitRequest): void;
  /** `waitingFor`: what refused it, when the gate said. */
  refused(r: PermitRequest, waitingFor?: WaitReason[]): void;
  /** Permits may have freed: refused calls may ask again. */
  freed(): void;
}

export class PermitDesk {
  private waiting: PermitRequest[] = [];
  private asking = false;
  private scheduled = false;

  constructor(
    private readonly gate: PermitGate,
    private readonly answers: PermitAnswers,
  ) {
    gate.onFreed(() => answers.freed());
  }

  ask(requests: readonly PermitRequest[]): void {
    for (const r of requests) this.waiting.push(r);
    if (this.scheduled || this.asking) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.send();
    });
  }

  release(runId: string, callId: string): void {
    this.gate.release([{ runId, callId }]);
  }

  private async send(): Promise<void> {
    if (this.asking || this.waiting.length === 0) return;
    this.asking = true;
    const batch = this.waiting.splice(0);
    let answers: PermitAnswer[];
    try {
      answers = await this.gate.acquire(batch);
    } catch {
      answers = batch.map(() => REFUSED);
    }
    this.asking = false;
    batch.forEach((r, i) => {
      const a = answers[i] ?? REFUSED;
      if (a.granted) this.answers.granted(r);
      else this.answers.refused(r, a.waitingFor);
    });
    if (this.waiting.length > 0) void this.send();
  }
}

/** What `gatedStarts` needs of the engine. */
export interface GatedEngine {
  scheduler(): Scheduler;
  now(): number;
  closed(): boolean;
  /** Queues a scheduler output for the next commit. */
  step(out: Output): void;
}

/** The engine's desk: a call starts once the cluster grants its permit; a permit nobody waits for any more goes back. */
export function gatedStarts(gate: PermitGate, e: GatedEngine): PermitDesk {
  return new PermitDesk(gate, {
    granted: (r) => {
      const out = e.closed() ? undefined : e.scheduler().permitGranted(e.now(), r.runId, r.callId);
      if (out) e.step(out);
      else gate.release([r]);
    },
    refused: (r, waitingFor) => e.step(e.scheduler().permitRefused(e.now(), r.runId, r.callId, waitingFor)),
    freed: () => {
      if (!e.closed()) e.step(e.scheduler().permitsFreed(e.now()));
    },
  });
}
