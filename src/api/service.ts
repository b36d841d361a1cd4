/**
 * The service behind the HTTP API: the engine, made durable by the store, plus what only a server
 * needs — admission (admission.ts: 409, 413, 429), idempotency keys, tenant isolation, reading ended
 * runs back from the store, and recovery of unfinished runs on start (DESIGN §8). Its errors are
 * thrown as they are (an `ApiError`, or the scheduler's and the store's own): the one error handler
 * turns each into its HTTP answer (errors.ts).
 */
import { hostname } from 'node:os';
import type { CallInput } from '../core/calls.js';
import type { RunEvent } from '../core/events.js';
import type { ReviewDecision } from '../core/scheduler.js';
import { unrecoverableEnd } from '../core/unrecoverable.js';
import { RunProjection, type RunView } from '../core/view.js';
import type { Config } from '../contract/config.js';
import type { SubmitRequest } from '../contract/submission.js';
import { Engine, isEnded } from '../engine/engine.js';
import type { Executor } from '../executors/types.js';
import type { Store } from '../store/types.js';
import type { Tracing } from '../telemetry/index.js';
import { admit } from './admission.js';
import { canSee, requireOperator, tenantFor, type Principal } from './auth.js';
import { ApiError, STORE_RETRY_AFTER } from './errors.js';
import { limitJson } from './waiting.js';

export interface ServiceOptions {
  config: Config;
  store: Store;
  executor?: Executor;
  clock?: () => number;
  /** Traces of runs and attempts (DESIGN §15); see `tracingFromEnv`. */
  tracing?: Tracing;
  /** This process's name among replicas (DESIGN §12); default hostname-pid. */
  replica?: string;
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
  private readonly clock: () => number;
  readonly replica: string;
  private readonly cache = new EndedRunCache(200);
  /**
   * Idempotency keys of submissions waiting for their group commit, and the run each will be: the
   * store cannot know these runs yet, and a repeat of the key must get the same run, not a second one.
   */
  private readonly pendingKeys = new Map<string, Promise<RunView>>();
  private readonly tracing: Tracing | undefined;

  constructor(opts: ServiceOptions) {
    this.config = opts.config;
    this.store = opts.store;
    this.clock = opts.clock ?? Date.now;
    const tracing = (this.tracing = opts.tracing);
    this.replica = opts.replica ?? `${hostname()}-${process.pid}`;
    this.engine = new Engine({
      config: opts.config,
      sink: opts.store,
      ...(opts.executor ? { executor: opts.executor } : {}),
      ...(opts.clock ? { clock: opts.clock } : {}),
      ...(tracing ? { instrument: (e: Executor) => tracing.instrument(e) } : {}),
    });
    tracing?.attach(this.engine);
  }

  /**
   * Resumes every run the store says is unfinished, and keeps needs_replan runs ready for a replan. A
   * run the engine cannot take back never stops the start (DESIGN §4): it ends `failed`, its calls
   * `unrecoverable`, after its kept events, and is listed with the reason for the log.
   */
  async recover(): Promise<{ resumed: number; unrecoverable: { runId: string; reason: string }[] }> {
    const ids = new Set(await this.store.unfinished());
    let cursor: string | undefined;
    do {
      const page = await this.store.list({ status: ['needs_replan'], limit: 200, ...(cursor ? { cursor } : {}) });
      for (const r of page.items) ids.add(r.id);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    const unrecoverable: { runId: string; reason: string }[] = [];
    for (const id of ids) {
      let events: RunEvent[] = [];
      try {
        events = await this.store.events(id);
        await this.engine.restore(events);
      } catch (e) {
        const reason = (e as Error).message;
        try {
          await this.store.append(unrecoverableEnd(events, reason, this.clock()));
          unrecoverable.push({ runId: id, reason });
        } catch (e2) {
          // Left as it is, for the next start to try again; the server starts all the same.
          unrecoverable.push({ runId: id, reason: `${reason}; it could not be ended either: ${(e2 as Error).message}` });
        }
      }
    }
    return { resumed: ids.size - unrecoverable.length, unrecoverable };
  }

  /**
   * Admits and submits a run, stored before this resolves (in a commit of its own). A request with the
   * idempotency key of an earlier run gets that run back (`created: false`). With tracing on, a
   * `traceparent` (W3C) makes the run's span its child.
   */
  async submit(p: Principal, request: SubmitRequest, traceparent?: string): Promise<{ run: RunView; created: boolean }> {
    const s = this.forTenant(p, request);
    this.writable();
    if (s.idempotencyKey !== undefined) {
      // A grouped submission with this key may be waiting for its commit: store it first, so the
      // lookup below finds it.
      await this.engine.commitQueued();
      const existing = await this.store.findByIdempotencyKey(s.tenant, s.idempotencyKey);
      if (existing) return { run: await this.view(p, existing), created: false };
    }
    this.admitNew(s);
    return { run: await this.engine.submit(this.traced(s, traceparent)), created: true };
  }

  /**
   * Admits and submits a run like `submit`, but its events share one commit with the other runs
   * submitted in the same turn of the event loop (`Engine.submitGrouped`): what a server under load
   * uses, one fsync for many runs. Resolves once the run is stored.
   */
  async submitGrouped(p: Principal, request: SubmitRequest, traceparent?: string): Promise<{ run: RunView; created: boolean }> {
    const s = this.forTenant(p, request);
    this.writable();
    if (s.idempotencyKey === undefined) {
      this.admitNew(s);
      return { run: await this.engine.submitGrouped(this.traced(s, traceparent)), created: true };
    }
    const key = `${s.tenant}\u0000${s.idempotencyKey}`;
    const pending = this.pendingKeys.get(key);
    const existing = (await this.store.findByIdempotencyKey(s.tenant, s.idempotencyKey)) ?? (pending && (await pending).id);
    if (existing) return { run: await this.view(p, existing), created: false };
    // The key may have been taken while the store was asked.
    const raced = this.pendingKeys.get(key);
    if (raced) return { run: await this.view(p, (await raced).id), created: false };
    this.admitNew(s);
    const submitted = this.engine.submitGrouped(this.traced(s, traceparent));
    this.pendingKeys.set(key, submitted);
    try {
      return { run: await submitted, created: true };
    } finally {
      // Stored by now (or refused): the store answers for the key from here on.
      this.pendingKeys.delete(key);
    }
  }

  /**
   * A write while the store is away is refused before it changes anything (503 with `Retry-After`):
   * the engine still holds what it could not store, and stores it once the store is back.
   */
  private writable(): void {
    if (this.engine.storeUnavailable() !== undefined) {
      throw new ApiError('store_unavailable', 'the store cannot be reached now; nothing was changed; retry later', undefined, { 'retry-after': STORE_RETRY_AFTER });
    }
  }

  /** The request with the tenant the principal acts for (403 for another tenant than its key's). */
  private forTenant(p: Principal, request: SubmitRequest): SubmitRequest & { tenant: string } {
    const tenant = tenantFor(p, request.tenant);
    return request.tenant === tenant ? (request as SubmitRequest & { tenant: string }) : { ...request, tenant };
  }

  /** With tracing on, the request under a run id whose run span continues `traceparent` (DESIGN §15). */
  private traced(s: SubmitRequest, traceparent: string | undefined): SubmitRequest {
    const runId = traceparent === undefined || s.runId !== undefined ? undefined : this.tracing?.continueTrace(traceparent);
    return runId === undefined ? s : { ...s, runId };
  }

  private admitNew(s: SubmitRequest & { tenant: string }): void {
    admit({ kind: 'submit', tenant: s.tenant, calls: s.calls, activeRuns: () => this.engine.activeRuns(s.tenant) }, this.config.limits);
  }

  /** Appends calls to an open run (409 once it is sealed or over). */
  async append(p: Principal, runId: string, calls: CallInput[]): Promise<RunView> {
    admit({ kind: 'append', run: await this.view(p, runId), calls }, this.config.limits);
    this.writable();
    return this.engine.append(runId, calls);
  }

  /** Seals an open run; sealing a sealed run changes nothing. */
  async seal(p: Principal, runId: string): Promise<RunView> {
    const view = await this.view(p, runId);
    if (view.stream === undefined) throw new ApiError('conflict', `run ${runId} was not opened with "open": true`);
    if (view.stream === 'sealed' || isEnded(view.status)) return view;
    this.writable();
    return this.engine.seal(runId);
  }

  /** The run as the principal may see it; 404 for a run of another tenant, as for a missing one. */
  async view(p: Principal, runId: string): Promise<RunView> {
    return (await this.projection(p, runId)).view;
  }

  async projection(p: Principal, runId: string): Promise<RunProjection> {
    const live = this.engine.projection(runId);
    const projection = live ?? (await this.stored(runId));
    if (!projection || !canSee(p, projection.view.tenant)) throw new ApiError('not_found', `no run ${runId}`);
    return projection;
  }

  /**
   * Waits up to `waitMs` for the run to end (or for `until` to hold of it); the run as it then
   * stands.
   */
  async wait(p: Principal, runId: string, waitMs: number, until?: (view: RunView) => boolean): Promise<RunView> {
    const view = await this.view(p, runId);
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

  /**
   * `GET /v1/limits` (operator only): every limit and lock in use, with its holders and waiters. This
   * process's; the one place to make it cluster-wide.
   */
  async limits(p: Principal): Promise<{ items: ReturnType<typeof limitJson>[] }> {
    requireOperator(p);
    return { items: this.engine.limitsInUse().map(limitJson) };
  }

  async events(p: Principal, runId: string, afterSeq: number): Promise<RunEvent[]> {
    await this.projection(p, runId);
    return this.store.events(runId, afterSeq);
  }

  async cancel(p: Principal, runId: string): Promise<RunView> {
    const view = await this.view(p, runId);
    if (!isEnded(view.status)) {
      this.writable();
      await this.engine.cancel(runId);
    }
    return this.view(p, runId);
  }

  async replan(p: Principal, runId: string, calls: CallInput[]): Promise<RunView> {
    admit({ kind: 'replan', run: await this.view(p, runId), calls }, this.config.limits);
    this.writable();
    return this.engine.replan(runId, calls);
  }

  async review(p: Principal, reviewId: string, d: Omit<ReviewDecision, 'runId' | 'callId'>): Promise<RunView> {
    const r = await this.store.review(reviewId);
    if (!r || !canSee(p, r.tenant)) throw new ApiError('not_found', `no review ${reviewId}`);
    if (r.status !== 'pending') throw new ApiError('conflict', `review ${reviewId} was decided already (${r.decision})`);
    if (!this.engine.has(r.runId)) throw new ApiError('conflict', `run ${r.runId} is not active`);
    this.writable();
    return this.engine.review({ ...d, runId: r.runId, callId: r.callId });
  }

  private async stored(runId: string): Promise<RunProjection | undefined> {
    const cached = this.cache.get(runId);
    if (cached) return cached;
    const events = await this.store.events(runId);
    if (events.length === 0) return undefined;
    const p = RunProjection.of(events);
    if (isEnded(p.view.status)) this.cache.set(runId, p);
    return p;
  }
}
