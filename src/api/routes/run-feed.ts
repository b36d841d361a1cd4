/**
 * `GET /v1/stream[?tenant=T]`: Server-Sent Events of run-level changes, for the dashboard's live list.
 * Everything the principal may see (an operator: every tenant, or `tenant` when given; an agent: its
 * own tenant). Events:
 *
 * - `event: run` — `{ id, tenant, status, failure, tags, createdAt, endedAt, callCount, callCounts,
 *   diagnostics, waitingSince }` (the fields of a `GET /v1/runs` item, plus the number of calls in each
 *   status, the codes of the run's diagnostics, since when its longest-waiting call waits, and with
 *   several replicas `owner`) when a run is created, replanned or completed, and when its calls change
 *   status, at most a few times per second per run;
 * - `event: counts` — `{ counts: { <run status>: n } }` once on connect, then when runs start or end;
 * - `: ping` comments every heartbeat.
 *
 * One feed per server listens to the engine while at least one client is connected; it coalesces a
 * run's bursts of events (one engine step often ends many calls) and sends one summary per run and
 * period to every client that may see it. A client that stops reading is disconnected.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CALL_STATUSES, type CallStatus } from '../../core/calls.js';
import type { RunEvent } from '../../core/events.js';
import type { RunView } from '../../core/view.js';
import { canSee, type Principal } from '../auth.js';
import { ApiError } from '../errors.js';
import { headOfEventStream, openEventStream } from '../sse.js';
import { StreamQuery } from '../../contract/requests.js';
import type { AppContext } from '../context.js';
import type { Service } from '../service.js';
import { parseRequestPart } from '../request-part.js';
import { withOwner } from '../owners.js';

/** At most this often per run (ms): 4 updates per second. */
const RUN_INTERVAL_MS = 250;
const COUNTS_INTERVAL_MS = 500;
const MAX_BUFFERED = 4 * 1024 * 1024;
const RUN_LEVEL = new Set(['run.created', 'run.started', 'run.replanned', 'run.needs_replan', 'run.completed']);

export interface RunFeedItem {
  id: string;
  tenant: string;
  status: RunView['status'];
  failure: RunView['failure'];
  tags: Record<string, string>;
  createdAt: string;
  endedAt: string | null;
  callCount: number;
  callCounts: Record<CallStatus, number>;
  diagnostics: string[];
  /** Since when its longest-waiting ready call waits for a limit or lock (ISO), else null. */
  waitingSince: string | null;
}

export function runFeedItem(view: RunView): RunFeedItem {
  const callCounts = Object.fromEntries(CALL_STATUSES.map((s) => [s, 0])) as Record<CallStatus, number>;
  let waitingSince: string | null = null;
  for (const c of view.calls) {
    callCounts[c.status]++;
    if (c.waitingSince !== undefined && c.status === 'ready' && (waitingSince === null || c.waitingSince < waitingSince))
      waitingSince = c.waitingSince;
  }
  return {
    id: view.id,
    tenant: view.tenant,
    status: view.status,
    failure: view.failure,
    tags: view.tags,
    createdAt: view.createdAt,
    endedAt: view.endedAt,
    callCount: view.calls.length,
    callCounts,
    diagnostics: view.diagnostics.map((d) => d.code),
    waitingSince,
  };
}

interface Client {
  principal: Principal;
  /** Only this tenant's runs (and counts). */
  tenant: string | undefined;
  write(chunk: string): void;
  close(): void;
}

interface Pending {
  /** Undefined for a run that changed on any replica (several replicas): read when it goes out. */
  view: RunView | undefined;
  /** Several replicas: the replica that owns the run (null once it ended), read with the view. */
  owner?: string | null;
  timer: NodeJS.Timeout | undefined;
  /** When the next summary may go out. */
  dueAt: number;
  last: number;
}

class RunFeed {
  private readonly clients = new Set<Client>();
  private readonly runs = new Map<string, Pending>();
  private unsubscribe: (() => void) | undefined;
  private countsTimer: NodeJS.Timeout | undefined;
  private countsLast = 0;

  constructor(private readonly service: Service) {}

  async add(client: Client): Promise<void> {
    const counts = await this.counts(client);
    this.clients.add(client);
    if (!this.unsubscribe) {
      const cluster = this.service.cluster;
      // Several replicas (DESIGN §12): every replica's runs, as their appends are announced.
      this.unsubscribe = cluster
        ? cluster.feed.onRunChanged((runId) => this.onChanged(runId))
        : this.service.engine.onEvent((e, view) => this.onEvent(e, view));
    }
    client.write(`event: counts\ndata: ${JSON.stringify({ counts })}\n\n`);
  }

  remove(client: Client): void {
    this.clients.delete(client);
    if (this.clients.size > 0) return;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    for (const p of this.runs.values()) if (p.timer) clearTimeout(p.timer);
    this.runs.clear();
    if (this.countsTimer) clearTimeout(this.countsTimer);
    this.countsTimer = undefined;
  }

  closeAll(): void {
    for (const c of [...this.clients]) c.close();
  }

  private onEvent(e: RunEvent, view: RunView): void {
    const now = Date.now();
    let p = this.runs.get(e.runId);
    if (!p) {
      p = { view, timer: undefined, dueAt: 0, last: 0 };
      this.runs.set(e.runId, p);
    }
    p.view = view;
    if (e.type === 'run.created' || e.type === 'run.completed' || e.type === 'run.replanned') this.countsChanged();
    // Run-level changes go out at once (after the engine's current step); call changes coalesce.
    const at = RUN_LEVEL.has(e.type) ? now : Math.max(now, p.last + RUN_INTERVAL_MS);
    if (p.timer && at >= p.dueAt) return;
    if (p.timer) clearTimeout(p.timer);
    p.dueAt = at;
    const runId = e.runId;
    p.timer = setTimeout(() => this.flushRun(runId), at - now);
    p.timer.unref();
  }

  /** A run changed on some replica: its summary goes out at most every RUN_INTERVAL_MS, read then. */
  private onChanged(runId: string): void {
    const now = Date.now();
    let p = this.runs.get(runId);
    if (!p) {
      p = { view: undefined, timer: undefined, dueAt: 0, last: 0 };
      this.runs.set(runId, p);
    }
    if (p.timer) return;
    const at = Math.max(now, p.last + RUN_INTERVAL_MS);
    p.dueAt = at;
    p.timer = setTimeout(() => void this.flushRemote(runId), at - now);
    p.timer.unref();
  }

  private async flushRemote(runId: string): Promise<void> {
    const p = this.runs.get(runId);
    if (!p) return;
    let view: RunView;
    let owner: string | null;
    try {
      view = (await this.service.projection({ role: 'operator' }, runId)).view;
      owner = (await withOwner(this.service, view)).owner;
    } catch {
      this.runs.delete(runId);
      return;
    }
    if (p.view?.status !== view.status) this.countsChanged();
    p.view = view;
    p.owner = owner;
    this.flushRun(runId);
  }

  private flushRun(runId: string): void {
    const p = this.runs.get(runId);
    if (!p?.view) return;
    p.timer = undefined;
    p.last = Date.now();
    const view = p.view;
    const item = p.owner === undefined ? runFeedItem(view) : { ...runFeedItem(view), owner: p.owner };
    const data = `event: run\ndata: ${JSON.stringify(item)}\n\n`;
    for (const c of this.clients) if (this.sees(c, view.tenant)) c.write(data);
    if (view.endedAt !== null) this.runs.delete(runId);
  }

  private countsChanged(): void {
    if (this.countsTimer) return;
    const delay = Math.max(0, this.countsLast + COUNTS_INTERVAL_MS - Date.now());
    this.countsTimer = setTimeout(() => {
      this.countsLast = Date.now();
      void this.sendCounts().finally(() => (this.countsTimer = undefined));
    }, delay);
    this.countsTimer.unref();
  }

  private scope(c: Client): string | undefined {
    return c.principal.role === 'agent' ? c.principal.tenant : c.tenant;
  }

  /** Each client's counts, asked of the store once per scope; a store that is away skips this round. */
  private async sendCounts(): Promise<void> {
    const byScope = new Map<string, string>();
    for (const c of [...this.clients]) {
      const scope = this.scope(c) ?? '';
      let data = byScope.get(scope);
      if (data === undefined) {
        try {
          data = `event: counts\ndata: ${JSON.stringify({ counts: await this.counts(c) })}\n\n`;
        } catch {
          return;
        }
        byScope.set(scope, data);
      }
      c.write(data);
    }
  }

  private counts(c: Client): Promise<Record<string, number>> {
    return this.service.store.countsByStatus(this.scope(c));
  }

  private sees(c: Client, tenant: string): boolean {
    return canSee(c.principal, tenant) && (c.tenant === undefined || c.tenant === tenant);
  }
}

export function runFeedRoutes(app: FastifyInstance, ctx: AppContext): void {
  const feed = new RunFeed(ctx.service);
  app.addHook('onClose', async () => feed.closeAll());

  app.get('/v1/stream', async (req: FastifyRequest, reply: FastifyReply) => {
    const q = parseRequestPart(StreamQuery, req.query, 'query');
    const p = req.principal;
    if (p.role === 'agent' && q.tenant !== undefined && q.tenant !== p.tenant) {
      throw new ApiError('forbidden', `this key cannot follow runs of tenant ${q.tenant}`);
    }
    if (ctx.shuttingDown()) throw new ApiError('shutting_down', 'the server is shutting down');
    if (req.method === 'HEAD') return headOfEventStream(reply);

    const res = openEventStream(req, reply, 'retry: 2000\n: stream open\n\n');

    let closed = false;
    const client: Client = {
      principal: p,
      tenant: q.tenant,
      write(chunk) {
        if (closed) return;
        res.write(chunk);
        if (res.writableLength > MAX_BUFFERED) res.destroy();
      },
      close() {
        if (closed) return;
        closed = true;
        clearInterval(heartbeat);
        feed.remove(client);
        res.end();
      },
    };
    const heartbeat = setInterval(() => client.write(': ping\n\n'), ctx.heartbeatMs);
    heartbeat.unref();
    req.raw.on('close', () => client.close());
    res.on('error', () => client.close());
    await feed.add(client);
  });
}
