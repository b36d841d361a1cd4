/**
 * The service behind the HTTP API: the engine, made durable by the store, plus what only a server
 * needs — admission (admission.ts: 409, 413, 429), idempotency keys, tenant isolation, reading ended
 * runs back from the store, and recovery of unfinished runs on start (DESIGN §8). Its errors are
 * thrown as they are (an `ApiError`, or the scheduler's and the store's own): the one error handler
 * turns each into its HTTP answer (errors.ts).
 */
import type { CallInput } from '../core/calls.js';
import type { RunEvent } from '../core/events.js';
import type { ReviewDecision } from '../core/scheduler.js';
import { RunProjection, type RunView } from '../core/view.js';
import type { Config } from '../contract/config.js';
import type { SubmitRequest } from '../contract/submission.js';
import { Engine, isEnded } from '../engine/engine.js';
import type { Executor } from '../executors/types.js';
import type { Store } from '../store/types.js';
import { admit } from './admission.js';
import { canSee, tenantFor, type Principal } from './auth.js';
import { ApiError } from './errors.js';

export interface ServiceOptions {
  config: Config;
  store: Store;
  executor?: Executor;
  clock?: () => number;
}

/** Ended runs read back from the store, most recent first out. */
class EndedRunCache {
  private readonly map = new Map<string, RunProjection>();

  constructor(private readonly size: number) {}

  get(id: string): RunProjection | undefined {
    const p = this.map.get(id);
    if (p) {
      this.map.delete(id);
      this.map.set(id, p);
    }
    return p;
  }

  set(id: string, p: RunProjection): void {
    this.map.set(id, p);
    if (this.map.size > this.size) this.map.delete(this.map.keys().next().value as string);
  }
}

export class Service {
  readonly config: Config;
  readonly store: Store;
  readonly engine: Engine;
  private readonly cache = new EndedRunCache(200);
  /**
   * Idempotency keys of submissions waiting for their group commit, and the run each will be: the
   * store cannot know these runs yet, and a repeat of the key must get the same run, not a second one.
   */
  private readonly pendingKeys = new Map<string, Promise<RunView>>();

  constructor(opts: ServiceOptions) {
    this.config = opts.config;
    this.store = opts.store;
    this.engine = new Engine({
      config: opts.config,
      sink: opts.store,
      ...(opts.executor ? { executor: opts.executor } : {}),
      ...(opts.clock ? { clock: opts.clock } : {}),
    });
  }

  /** Resumes every run the store says is unfinished, and keeps needs_replan runs ready for a replan. */
  recover(): { resumed: number } {
    const ids = new Set(this.store.unfinished());
    let cursor: string | undefined;
    do {
      const page = this.store.list({ status: ['needs_replan'], limit: 200, ...(cursor ? { cursor } : {}) });
      for (const r of page.items) ids.add(r.id);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    for (const id of ids) this.engine.restore(this.store.events(id));
    return { resumed: ids.size };
  }

  /**
   * Admits and submits a run, stored before this returns (in a commit of its own). A request with the
   * idempotency key of an earlier run gets that run back (`created: false`).
   */
  submit(p: Principal, request: SubmitRequest): { run: RunView; created: boolean } {
    const s = this.forTenant(p, request);
    if (s.idempotencyKey !== undefined) {
      // A grouped submission with this key may be waiting for its commit: store it first, so the
      // lookup below finds it.
      this.engine.commitQueued();
      const existing = this.store.findByIdempotencyKey(s.tenant, s.idempotencyKey);
      if (existing) return { run: this.view(p, existing), created: false };
    }
    this.admitNew(s);
    return { run: this.engine.submit(s), created: true };
  }

  /**
   * Admits and submits a run like `submit`, but its events share one commit with the other runs
   * submitted in the same turn of the event loop (`Engine.submitGrouped`): what a server under load
   * uses, one fsync for many runs. Resolves once the run is stored.
   */
  async submitGrouped(p: Principal, request: SubmitRequest): Promise<{ run: RunView; created: boolean }> {
    const s = this.forTenant(p, request);
    if (s.idempotencyKey === undefined) {
      this.admitNew(s);
      return { run: await this.engine.submitGrouped(s), created: true };
    }
    const key = `${s.tenant}\u0000${s.idempotencyKey}`;
    const pending = this.pendingKeys.get(key);
    const existing = this.store.findByIdempotencyKey(s.tenant, s.idempotencyKey) ?? (pending && (await pending).id);
    if (existing) return { run: this.view(p, existing), created: false };
    this.admitNew(s);
    const submitted = this.engine.submitGrouped(s);
    this.pendingKeys.set(key, submitted);
    try {
      return { run: await submitted, created: true };
    } finally {
      // Stored by now (or refused): the store answers for the key from here on.
      this.pendingKeys.delete(key);
    }
  }

  /** The request with the tenant the principal acts for (403 for another tenant than its key's). */
  private forTenant(p: Principal, request: SubmitRequest): SubmitRequest & { tenant: string } {
    const tenant = tenantFor(p, request.tenant);
    return request.tenant === tenant ? (request as SubmitRequest & { tenant: string }) : { ...request, tenant };
  }

  private admitNew(s: SubmitRequest & { tenant: string }): void {
    admit({ kind: 'submit', tenant: s.tenant, calls: s.calls, activeRuns: () => this.engine.activeRuns(s.tenant) }, this.config.limits);
  }

  /** Appends calls to an open run (409 once it is sealed or over). */
  append(p: Principal, runId: string, calls: CallInput[]): RunView {
    admit({ kind: 'append', run: this.view(p, runId), calls }, this.config.limits);
    return this.engine.append(runId, calls);
  }

  /** Seals an open run; sealing a sealed run changes nothing. */
  seal(p: Principal, runId: string): RunView {
    const view = this.view(p, runId);
    if (view.stream === undefined) throw new ApiError('conflict', `run ${runId} was not opened with "open": true`);
    if (view.stream === 'sealed' || isEnded(view.status)) return view;
    return this.engine.seal(runId);
  }

  /** The run as the principal may see it; 404 for a run of another tenant, as for a missing one. */
  view(p: Principal, runId: string): RunView {
    return this.projection(p, runId).view;
  }

  projection(p: Principal, runId: string): RunProjection {
    const live = this.engine.projection(runId);
    const projection = live ?? this.stored(runId);
    if (!projection || !canSee(p, projection.view.tenant)) throw new ApiError('not_found', `no run ${runId}`);
    return projection;
  }

  /**
   * Waits up to `waitMs` for the run to end (or for `until` to hold of it); the run as it then
   * stands.
   */
  async wait(p: Principal, runId: string, waitMs: number, until?: (view: RunView) => boolean): Promise<RunView> {
    const view = this.view(p, runId);
    if (waitMs <= 0 || isEnded(view.status) || !this.engine.has(runId) || until?.(view)) return view;
    if (!until) return (await this.engine.wait(runId, waitMs)) ?? view;
    return new Promise<RunView>((resolve) => {
      const finish = (v: RunView) => {
        clearTimeout(timer);
        unsubscribe();
        resolve(v);
      };
      // Subscribing right after reading the view (same tick): no event falls between them.
      const unsubscribe = this.engine.subscribe(runId, (_e, v) => {
        if (isEnded(v.status) || until(v)) finish(v);
      });
      const timer = setTimeout(() => finish(this.engine.get(runId) ?? view), waitMs);
    });
  }

  events(p: Principal, runId: string, afterSeq: number): RunEvent[] {
    this.projection(p, runId);
    return this.store.events(runId, afterSeq);
  }

  cancel(p: Principal, runId: string): RunView {
    const view = this.view(p, runId);
    if (!isEnded(view.status)) this.engine.cancel(runId);
    return this.view(p, runId);
  }

  replan(p: Principal, runId: string, calls: CallInput[]): RunView {
    admit({ kind: 'replan', run: this.view(p, runId), calls }, this.config.limits);
    return this.engine.replan(runId, calls);
  }

  review(p: Principal, reviewId: string, d: Omit<ReviewDecision, 'runId' | 'callId'>): RunView {
    const r = this.store.review(reviewId);
    if (!r || !canSee(p, r.tenant)) throw new ApiError('not_found', `no review ${reviewId}`);
    if (r.status !== 'pending') throw new ApiError('conflict', `review ${reviewId} was decided already (${r.decision})`);
    if (!this.engine.has(r.runId)) throw new ApiError('conflict', `run ${r.runId} is not active`);
    return this.engine.review({ ...d, runId: r.runId, callId: r.callId });
  }

  private stored(runId: string): RunProjection | undefined {
    const cached = this.cache.get(runId);
    if (cached) return cached;
    const events = this.store.events(runId);
    if (events.length === 0) return undefined;
    const p = RunProjection.of(events);
    if (isEnded(p.view.status)) this.cache.set(runId, p);
    return p;
  }
}
