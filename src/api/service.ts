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
import { RunProjection, type RunView, type WorkItem } from '../core/view.js';
import type { Config } from '../contract/config.js';
import type { SubmitRequest } from '../contract/submission.js';
import { Engine, isEnded, newRunId } from '../engine/engine.js';
import { Cluster, type CommandAnswer } from '../cluster/cluster.js';
import type { PostgresStore } from '../store/postgres.js';
import type { Logger } from 'pino';
import type { Executor } from '../executors/types.js';
import { StoreError } from '../store/errors.js';
import type { Store } from '../store/types.js';
import type { Tracing } from '../telemetry/index.js';
import { admit } from './admission.js';
import { canSee, requireOperator, tenantFor, type Principal } from './auth.js';
import { ApiError, httpErrorOf, STORE_RETRY_AFTER, type ApiErrorCode } from './errors.js';
import { limitsBody, type LimitsBody } from './waiting.js';
import { type KeyLedger, storeLedger, submitKeyed } from './run-keys.js';
import { RunKeyClaims } from '../cluster/run-keys.js';
import { HeldRuns } from './held-runs.js';
import type { ClientAnswer } from '../executors/client.js';
import { checkClientCall, staleToken, type ResultTaken } from './client-work.js';

export interface ServiceOptions {
  config: Config;
  store: Store;
  executor?: Executor;
  clock?: () => number;
  /** Traces of runs and attempts (DESIGN §15); see `tracingFromEnv`. */
  tracing?: Tracing;
  /** This process's name among replicas (DESIGN §12); default hostname-pid. */
  replica?: string;
  /**
   * Several replicas on PostgreSQL (DESIGN §12), joined already: runs are owned under a lease, limits
   * are cluster-wide, commands go to a run's owner, and events are read from any replica's appends.
   */
  cluster?: Cluster;
}

/**
 * A service on its store: on PostgreSQL it joins the cluster first (DESIGN §12: several replicas may
 * share the database; one replica is a cluster of one). Rejects when the database cannot be reached.
 */
export async function openService(opts: Omit<ServiceOptions, 'cluster'> & { logger?: Logger }): Promise<Service> {
  if (opts.store.kind !== 'postgres') return new Service(opts);
  const name = opts.replica ?? `${hostname()}-${process.pid}`;
  const cluster = new Cluster({
    store: opts.store as PostgresStore,
    config: opts.config,
    name,
    ...(opts.logger ? { logger: opts.logger } : {}),
  });
  await cluster.join();
  return new Service({ ...opts, replica: name, cluster });
}

/** A command for a run, as it travels to the run's owner (cluster/commands.ts). */
type Command =
  | { kind: 'cancel'; principal: Principal; runId: string; supersededBy?: string }
  | { kind: 'seal'; principal: Principal; runId: string }
  | { kind: 'append'; principal: Principal; runId: string; calls: CallInput[] }
  | { kind: 'replan'; principal: Principal; runId: string; calls: CallInput[] }
  | { kind: 'review'; principal: Principal; runId: string; reviewId: string; decision: Omit<ReviewDecision, 'runId' | 'callId'> }
  | { kind: 'result'; principal: Principal; runId: string; callId: string; token: string; answer: ClientAnswer };

/** What a wait waits for, besides the run's end: a test of its view (and its projection). */
type Until = (view: RunView, projection: RunProjection) => boolean;

/** How long a run that claimed a key on another replica may take to be stored before it counts as never submitted, ms. */
const CLAIMED_RUN_WAIT_MS = 10_000;

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
   * The submission under each idempotency key (by tenant) that is being looked up or stored now: a
   * repeat of the key waits for it, then gets its run, not a second one (`submitOnce`).
   */
  private readonly pendingKeys = new Map<string, Promise<{ run: RunView; created: boolean }>>();
  /** Starts runs held behind an earlier run of their concurrency key (held-runs.ts). */
  private readonly held: HeldRuns;
  /** Where the runs holding each tenant's `concurrencyKey` are found: the store, or the cluster's claims (run-keys.ts). */
  private readonly ledger: KeyLedger;
  /** The submissions under each tenant's `concurrencyKey` under way now (run-keys.ts). */
  private readonly pendingConcurrencyKeys = new Map<string, Promise<unknown>>();
  private readonly tracing: Tracing | undefined;
  readonly cluster: Cluster | undefined;

  constructor(opts: ServiceOptions) {
    this.config = opts.config;
    this.store = opts.store;
    this.clock = opts.clock ?? Date.now;
    const tracing = (this.tracing = opts.tracing);
    this.replica = opts.replica ?? `${hostname()}-${process.pid}`;
    const cluster = (this.cluster = opts.cluster);
    this.engine = new Engine({
      ...(cluster ? { permits: cluster.permits, onLeaseLost: () => cluster.leaseLost() } : {}),
      config: opts.config,
      sink: opts.store,
      clients: true,
      ...(opts.executor ? { executor: opts.executor } : {}),
      ...(opts.clock ? { clock: opts.clock } : {}),
      ...(tracing ? { instrument: (e: Executor) => tracing.instrument(e) } : {}),
    });
    tracing?.attach(this.engine);
    this.ledger = cluster ? new RunKeyClaims(cluster.store.pool, () => cluster.instance) : storeLedger(this.store);
    this.held = new HeldRuns({ engine: this.engine, ledger: this.ledger });
  }

  /**
   * Resumes every run the store says is unfinished, and keeps needs_replan runs ready for a replan. A
   * run the engine cannot take back never stops the start (DESIGN §4): it ends `failed`, its calls
   * `unrecoverable`, after its kept events, and is listed with the reason for the log.
   */
  async recover(): Promise<{ resumed: number; unrecoverable: { runId: string; reason: string }[] }> {
    if (this.cluster) {
      // Several replicas: this one resumes the runs it takes over (an earlier process of its name's at once).
      const unrecoverable: { runId: string; reason: string }[] = [];
      const resumed = await this.cluster.start({
        engine: this.engine,
        resume: async (id) => {
          const u = await this.resume(id);
          if (u) unrecoverable.push(u);
        },
        apply: (body) => this.applyCommand(body as Command),
      });
      return { resumed: resumed - unrecoverable.length, unrecoverable };
    }
    const ids = new Set(await this.store.unfinished());
    let cursor: string | undefined;
    do {
      const page = await this.store.list({ status: ['needs_replan'], limit: 200, ...(cursor ? { cursor } : {}) });
      for (const r of page.items) ids.add(r.id);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    const unrecoverable: { runId: string; reason: string }[] = [];
    for (const id of ids) {
      const u = await this.resume(id).catch((e: unknown) => ({ runId: id, reason: (e as Error).message }));
      if (u) unrecoverable.push(u);
    }
    return { resumed: ids.size - unrecoverable.length, unrecoverable };
  }

  /**
   * Takes one run back from its stored events; one the engine cannot take back ends `failed`
   * (unrecoverable), and is returned with the reason. Throws when the store cannot be read.
   */
  private async resume(id: string): Promise<{ runId: string; reason: string } | undefined> {
    const events = await this.store.events(id);
    try {
      if (events[0]) this.tracing?.resumed(events[0]);
      await this.engine.restore(events);
      return undefined;
    } catch (e) {
      const reason = (e as Error).message;
      try {
        await this.store.append(unrecoverableEnd(events, reason, this.clock()));
        return { runId: id, reason };
      } catch (e2) {
        // Left as it is, for the next start to try again; the server starts all the same.
        return { runId: id, reason: `${reason}; it could not be ended either: ${(e2 as Error).message}` };
      }
    }
  }

  /**
   * Admits and submits a run, stored before this resolves (in a commit of its own). A request with the
   * idempotency key of an earlier run gets that run back (`created: false`). With tracing on, a
   * `traceparent` (W3C) makes the run's span its child.
   */
  async submit(p: Principal, request: SubmitRequest, traceparent?: string): Promise<{ run: RunView; created: boolean }> {
    return this.submitOnce(p, request, traceparent, (s) => this.engine.submit(s));
  }

  /**
   * Admits and submits a run like `submit`, but its events share one commit with the other runs
   * submitted in the same turn of the event loop (`Engine.submitGrouped`): what a server under load
   * uses, one fsync for many runs. Resolves once the run is stored.
   */
  async submitGrouped(p: Principal, request: SubmitRequest, traceparent?: string): Promise<{ run: RunView; created: boolean }> {
    return this.submitOnce(p, request, traceparent, (s) => this.engine.submitGrouped(s));
  }

  /**
   * One submission under an idempotency key at a time in this process: a repeat waits for the one
   * before it to be stored (or refused), then finds its run. A repeat on another replica that raced
   * this one is refused by the store's unique index, and gets the run that won.
   */
  private async submitOnce(
    p: Principal,
    request: SubmitRequest,
    traceparent: string | undefined,
    submit: (s: SubmitRequest) => Promise<RunView>,
  ): Promise<{ run: RunView; created: boolean }> {
    const s = this.forTenant(p, request);
    this.writable();
    const key = s.idempotencyKey;
    if (key === undefined) return { run: await this.admittedKeyed(p, this.traced(s, traceparent), submit), created: true };
    const slot = `${s.tenant}\u0000${key}`;
    const before = this.pendingKeys.get(slot);
    const once = (async () => {
      await before?.catch(() => undefined);
      const existing = await this.store.findByIdempotencyKey(s.tenant, key);
      if (existing) return { run: await this.view(p, existing), created: false };
      try {
        return { run: await this.admittedKeyed(p, this.traced(s, traceparent), submit), created: true };
      } catch (err) {
        const won =
          err instanceof StoreError && err.code === 'duplicate_idempotency_key'
            ? await this.store.findByIdempotencyKey(s.tenant, key)
            : undefined;
        if (won === undefined) throw err;
        return { run: await this.view(p, won), created: false };
      }
    })();
    this.pendingKeys.set(slot, once);
    try {
      return await once;
    } finally {
      if (this.pendingKeys.get(slot) === once) this.pendingKeys.delete(slot);
    }
  }

  /** Admits and submits `s` under its `concurrencyKey`, if it has one (run-keys.ts). */
  private admittedKeyed(
    p: Principal,
    s: SubmitRequest & { tenant: string },
    submit: (s: SubmitRequest) => Promise<RunView>,
  ): Promise<RunView> {
    return submitKeyed({
      ledger: this.ledger,
      request: s,
      pending: this.pendingConcurrencyKeys,
      cancel: async (runId, supersededBy) => {
        const view = await this.claimedView(p, runId);
        if (view) await this.owned(view, { kind: 'cancel', principal: p, runId, supersededBy });
      },
      submit: (r) => this.admitted(r, submit),
    });
  }

  /**
   * The view of a run that holds a key: on several replicas its claim may come before its run is
   * stored (its submission is under way on another replica), so a missing run is looked for again for
   * a while; undefined if it never shows (its submission failed, and gave its claim back).
   */
  private async claimedView(p: Principal, runId: string): Promise<RunView | undefined> {
    const deadline = this.clock() + CLAIMED_RUN_WAIT_MS;
    for (;;) {
      try {
        return await this.view(p, runId);
      } catch (err) {
        if (!(err instanceof ApiError && err.code === 'not_found') || this.cluster === undefined) throw err;
        if (this.clock() > deadline) return undefined;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  }

  /** Admits `s` (across the cluster with several replicas) and submits it. */
  private admitted(s: SubmitRequest & { tenant: string }, submit: (s: SubmitRequest) => Promise<RunView>): Promise<RunView> {
    if (this.cluster) return this.admitInCluster(s, submit);
    this.admitNew(s);
    return submit(s);
  }

  /**
   * A write while the store is away is refused before it changes anything (503 with `Retry-After`):
   * the engine still holds what it could not store, and stores it once the store is back.
   */
  private writable(): void {
    if (this.engine.storeUnavailable() !== undefined || (this.cluster !== undefined && this.cluster.instance === undefined)) {
      throw new ApiError('store_unavailable', 'the store cannot be reached now; nothing was changed; retry later', undefined, {
        'retry-after': STORE_RETRY_AFTER,
      });
    }
  }

  /** The request with the tenant the principal acts for (403 for another tenant than its key's). */
  private forTenant(p: Principal, request: SubmitRequest): SubmitRequest & { tenant: string } {
    const tenant = tenantFor(p, request.tenant);
    return request.tenant === tenant ? (request as SubmitRequest & { tenant: string }) : { ...request, tenant };
  }

  /** With tracing on, the request under a run id whose run span continues `traceparent` (DESIGN §15). */
  private traced<S extends SubmitRequest>(s: S, traceparent: string | undefined): S {
    const runId = traceparent === undefined || s.runId !== undefined ? undefined : this.tracing?.continueTrace(traceparent);
    return runId === undefined ? s : { ...s, runId, traceparent: traceparent as string };
  }

  private admitNew(s: SubmitRequest & { tenant: string }, stored = 0): void {
    admit(
      { kind: 'submit', tenant: s.tenant, calls: s.calls, activeRuns: () => Math.max(stored, this.engine.activeRuns(s.tenant)) },
      this.config.limits,
    );
  }

  /**
   * Several replicas: admits, then submits. Under `maxActiveRunsPerTenant` the run first takes a ticket
   * (cluster/admissions.ts) that counts every replica's active runs and the runs admitted but not stored
   * yet, one admission of the tenant at a time: the cap holds across replicas.
   */
  private async admitInCluster(s: SubmitRequest & { tenant: string }, submit: (s: SubmitRequest) => Promise<RunView>): Promise<RunView> {
    this.admitNew(s);
    const cap = this.config.limits.maxActiveRunsPerTenant;
    const cluster = this.cluster as Cluster;
    if (cap === undefined) return submit(s);
    const runId = s.runId ?? newRunId();
    if (!(await cluster.admissions.take(s.tenant, runId, cap))) this.admitNew(s, cap);
    try {
      return await submit({ ...s, runId });
    } finally {
      cluster.admissions.drop(runId);
    }
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
  async wait(p: Principal, runId: string, waitMs: number, until?: Until): Promise<RunView> {
    const first = await this.projection(p, runId);
    const view = first.view;
    if (waitMs <= 0 || isEnded(view.status) || until?.(view, first)) return view;
    if (!this.engine.has(runId)) return this.cluster ? this.waitElsewhere(runId, view, waitMs, until) : view;
    if (!until) return (await this.engine.wait(runId, waitMs)) ?? view;
    return new Promise<RunView>((resolve) => {
      const finish = (v: RunView) => {
        clearTimeout(timer);
        unsubscribe();
        resolve(v);
      };
      // Subscribing right after reading the view (same tick): no event falls between them.
      const unsubscribe = this.engine.subscribe(runId, (_e, v) => {
        const p = this.engine.projection(runId);
        if (isEnded(v.status) || (p !== undefined && until(v, p))) finish(v);
      });
      const timer = setTimeout(() => finish(this.engine.get(runId) ?? view), waitMs);
    });
  }

  /**
   * `GET /v1/limits` (operator only): every limit and lock in use, with its holders and waiters. With
   * several replicas, cluster-wide (cluster/limits-view.ts), but for `global` and `perRun`: this one's.
   */
  async limits(p: Principal): Promise<LimitsBody> {
    requireOperator(p);
    const local = this.engine.limitsInUse();
    const items = this.cluster ? await this.cluster.limits(local, this.engine.waitCounts()) : local;
    return limitsBody(items);
  }

  /** `wait` for a run another replica runs: its events are followed through the store (cluster/feed.ts). */
  private waitElsewhere(runId: string, view: RunView, waitMs: number, until?: Until): Promise<RunView> {
    const feed = (this.cluster as Cluster).feed;
    return new Promise<RunView>((resolve) => {
      let current = view;
      // The run's view, folded from the events the feed delivers (every one, from the first): no other read.
      let projection: RunProjection | undefined;
      const finish = () => {
        clearTimeout(timer);
        unsubscribe();
        resolve(current);
      };
      const unsubscribe = feed.subscribe(runId, 0, (events) => {
        if (projection) for (const e of events) projection.apply(e);
        else projection = RunProjection.of(events);
        current = projection.view;
        if (isEnded(current.status) || until?.(current, projection)) finish();
      });
      const timer = setTimeout(finish, waitMs);
    });
  }

  /**
   * `GET /v1/runs/{id}/work` (DESIGN §17): the calls of client tools that wait for their agent's
   * result, read from the run's events (so from any replica); with `waitMs`, waits until there is one,
   * the run ends, or that time passes.
   */
  async work(p: Principal, runId: string, waitMs = 0): Promise<{ items: WorkItem[] }> {
    await this.wait(p, runId, waitMs, (_v, projection) => projection.work().length > 0);
    return { items: (await this.projection(p, runId)).work() };
  }

  /**
   * `POST /v1/runs/{id}/calls/{callId}/result`: an agent's answer for its client tool's call, taken by
   * the run's owner (this replica, or the owner through a command) if `token` is the waiting attempt's.
   */
  async result(p: Principal, runId: string, callId: string, token: string, answer: ClientAnswer): Promise<ResultTaken> {
    let view = await this.view(p, runId);
    // A call appended to an open run: its agent may have read its `call.started` from the store before
    // this engine applied that commit (DESIGN §17); the store has the call then.
    if (!view.calls.some((c) => c.id === callId)) view = (await this.stored(runId))?.view ?? view;
    checkClientCall(view, callId, this.config.catalog);
    return this.owned(view, { kind: 'result', principal: p, runId, callId, token, answer }) as Promise<ResultTaken>;
  }

  async events(p: Principal, runId: string, afterSeq: number): Promise<RunEvent[]> {
    await this.projection(p, runId);
    return this.store.events(runId, afterSeq);
  }

  // ---- commands: applied where the run is owned (DESIGN §12: `owned` carries them there) ---------

  /** Appends calls to an open run (409 once it is sealed or over). */
  async append(p: Principal, runId: string, calls: CallInput[]): Promise<RunView> {
    return this.ownedRun(await this.view(p, runId), { kind: 'append', principal: p, runId, calls });
  }

  /** Seals an open run; sealing a sealed run changes nothing. */
  async seal(p: Principal, runId: string): Promise<RunView> {
    return this.ownedRun(await this.view(p, runId), { kind: 'seal', principal: p, runId });
  }

  async cancel(p: Principal, runId: string): Promise<RunView> {
    return this.ownedRun(await this.view(p, runId), { kind: 'cancel', principal: p, runId });
  }

  async replan(p: Principal, runId: string, calls: CallInput[]): Promise<RunView> {
    return this.ownedRun(await this.view(p, runId), { kind: 'replan', principal: p, runId, calls });
  }

  async review(p: Principal, reviewId: string, d: Omit<ReviewDecision, 'runId' | 'callId'>): Promise<RunView> {
    const r = await this.store.review(reviewId);
    if (!r || !canSee(p, r.tenant)) throw new ApiError('not_found', `no review ${reviewId}`);
    if (r.status !== 'pending') throw new ApiError('conflict', `review ${reviewId} was decided already (${r.decision})`);
    return this.ownedRun(await this.view(p, r.runId), { kind: 'review', principal: p, runId: r.runId, reviewId, decision: d });
  }

  /**
   * Applies a command here, or, with several replicas, sends it to the run's owner when another replica
   * runs it (a run not ended that this engine does not hold), and answers what the owner answered.
   */
  private async owned(view: RunView, c: Command): Promise<unknown> {
    if (!this.cluster || this.engine.has(view.id) || (isEnded(view.status) && view.status !== 'needs_replan')) return this.here(view, c);
    const answer = await this.cluster.commands.send(view.id, c);
    if (answer.ok) return answer.value;
    const code = answer.code as ApiErrorCode;
    throw new ApiError(
      code,
      answer.message,
      undefined,
      code === 'store_unavailable' || code === 'owner_unavailable' ? { 'retry-after': STORE_RETRY_AFTER } : {},
    );
  }

  private ownedRun(view: RunView, c: Command): Promise<RunView> {
    return this.owned(view, c) as Promise<RunView>;
  }

  /** A command sent here by another replica: applied as `owned` would, if this replica runs the run. */
  private async applyCommand(c: Command): Promise<CommandAnswer> {
    try {
      let view = await this.view(c.principal, c.runId);
      if (!this.engine.has(view.id) && this.cluster) {
        // Taken over, maybe, but not resumed yet: the scan resumes it.
        await this.cluster.scan();
        view = await this.view(c.principal, c.runId);
      }
      if (!this.engine.has(view.id) && !(isEnded(view.status) && view.status !== 'needs_replan')) {
        throw new ApiError('owner_unavailable', `run ${c.runId} is not run by this replica now; retry later`);
      }
      return { ok: true, value: await this.here(view, c) };
    } catch (err) {
      const { body } = httpErrorOf(err);
      return { ok: false, code: body.error.code, message: body.error.message };
    }
  }

  private async here(view: RunView, c: Command): Promise<unknown> {
    const runId = view.id;
    switch (c.kind) {
      case 'append':
        admit({ kind: 'append', run: view, calls: c.calls }, this.config.limits);
        this.writable();
        return this.engine.append(runId, c.calls);
      case 'seal':
        if (view.stream === undefined) throw new ApiError('conflict', `run ${runId} was not opened with "open": true`);
        if (view.stream === 'sealed' || isEnded(view.status)) return view;
        this.writable();
        return this.engine.seal(runId);
      case 'cancel':
        if (!isEnded(view.status)) {
          this.writable();
          await this.engine.cancel(runId, c.supersededBy);
        }
        return this.view(c.principal, runId);
      case 'replan':
        admit({ kind: 'replan', run: view, calls: c.calls }, this.config.limits);
        this.writable();
        return this.engine.replan(runId, c.calls);
      case 'review': {
        const r = await this.store.review(c.reviewId);
        if (r?.status !== 'pending') throw new ApiError('conflict', `review ${c.reviewId} was decided already (${r?.decision})`);
        if (!this.engine.has(r.runId)) throw new ApiError('conflict', `run ${r.runId} is not active`);
        this.writable();
        return this.engine.review({ ...c.decision, runId: r.runId, callId: r.callId });
      }
      case 'result': {
        this.writable();
        const taken = this.engine.answer(runId, c.callId, c.token, c.answer);
        if (!taken.accepted) throw staleToken(runId, c.callId);
        return { runId, callId: c.callId, attempt: taken.attempt } satisfies ResultTaken;
      }
    }
  }

  /**
   * Stops the engine (see `Engine.close`), then, with several replicas, leaves the cluster: what this
   * replica still ran is taken over at once by another. The store stays open (its owner closes it).
   */
  async close(opts: { drainMs?: number } = {}): Promise<void> {
    this.held.stop();
    await this.held.settled();
    await this.engine.close(opts);
    await this.cluster?.close(true);
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
