/**
 * Prometheus metrics (prom-client, a registry per server): runs by status, call durations, the time
 * ready calls wait for a limit (all, and by the kind of limit that held them back), how full each
 * limit is, how many calls wait behind each, and hooks' durations and decisions.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Service } from './service.js';
import { clusterMetrics } from './cluster-metrics.js';

export interface Metrics {
  registry: Registry;
}

const BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export function createMetrics(service: Service): Metrics {
  const registry = new Registry();
  const { engine, store } = service;
  new Gauge({
    name: 'toolgraph_runs',
    help: 'Runs in the store, by status',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      const counts = await store.countsByStatus();
      this.reset();
      for (const [status, n] of Object.entries(counts)) this.set({ status }, n);
    },
  });
  const completed = new Counter({
    name: 'toolgraph_runs_completed_total',
    help: 'Runs that ended, by status',
    labelNames: ['status'],
    registers: [registry],
  });
  const completedOf = children((status: string) => completed.labels(status));
  const duration = new Histogram({
    name: 'toolgraph_call_duration_seconds',
    help: 'Duration of call attempts, by tool and outcome',
    labelNames: ['tool', 'outcome'],
    buckets: BUCKETS,
    registers: [registry],
  });
  const hookDuration = new Histogram({
    name: 'toolgraph_hook_duration_seconds',
    help: 'Time each hook took (DESIGN §14), by hook, event and decision',
    labelNames: ['hook', 'on', 'decision'],
    buckets: BUCKETS,
    registers: [registry],
  });
  const hookDecisions = new Counter({
    name: 'toolgraph_hook_decisions_total',
    help: 'Hook decisions, by hook, event and decision; `failed` says whether the hook itself failed (onError decided)',
    labelNames: ['hook', 'on', 'decision', 'failed'],
    registers: [registry],
  });
  const queueWait = new Histogram({
    name: 'toolgraph_queue_wait_seconds',
    help: 'Time from ready to started: how long limits held a call back',
    labelNames: ['tool'],
    buckets: BUCKETS,
    registers: [registry],
  });
  new Gauge({
    name: 'toolgraph_client_calls_waiting',
    help: 'Attempts of client tools (DESIGN §17) that wait for their agent in this replica',
    registers: [registry],
    collect() {
      this.set(engine.clientsWaiting());
    },
  });
  new Gauge({
    name: 'toolgraph_limit_used',
    help: 'Running calls counted against each limit',
    labelNames: ['limit'],
    registers: [registry],
    collect() {
      this.reset();
      for (const u of engine.limitUsage()) this.set({ limit: u.name }, u.used);
    },
  });
  new Gauge({
    name: 'toolgraph_limit_capacity',
    help: 'The ceiling of each limit',
    labelNames: ['limit'],
    registers: [registry],
    collect() {
      this.reset();
      for (const u of engine.limitUsage()) this.set({ limit: u.name }, u.limit);
    },
  });
  const limitWait = new Histogram({
    name: 'toolgraph_limit_wait_seconds',
    help: 'Time from ready to started of calls a limit or lock held back, by the kind that held them last (call.waiting)',
    labelNames: ['kind'],
    buckets: BUCKETS,
    registers: [registry],
  });
  new Gauge({
    name: 'toolgraph_limit_waiting',
    help: 'Ready calls waiting now behind each limit (per-run limits and locks summed by kind: their keys are unbounded)',
    labelNames: ['kind', 'limit'],
    registers: [registry],
    collect() {
      this.reset();
      const sums = new Map<string, { kind: string; limit: string; n: number }>();
      const add = (kind: string, key: string | undefined, n: number) => {
        const limit = kind === 'perRun' || kind === 'lock' || key === undefined ? '' : key;
        const id = `${kind}\u0000${limit}`;
        const sum = sums.get(id) ?? { kind, limit, n: 0 };
        sum.n += n;
        sums.set(id, sum);
      };
      for (const l of engine.limitsInUse()) add(l.kind, l.key, l.waiting);
      // Waiters of a limit this replica does not keep itself (several replicas: a rate the cluster
      // refused a call for), by what they were told.
      const listed = new Set(sums.keys());
      for (const [id, w] of engine.waitCounts().counts) {
        const [kind, key] = id.split('\u0000') as [string, string | undefined];
        if (kind === 'lock' || kind === 'perRun' || listed.has(`${kind}\u0000${key ?? ''}`)) continue;
        add(kind, key, w.n);
      }
      for (const { kind, limit, n } of sums.values()) this.set({ kind, limit }, n);
    },
  });
  new Gauge({
    name: 'toolgraph_attempts_running',
    help: 'Attempts running now',
    registers: [registry],
    collect() {
      this.set(engine.runningAttempts());
    },
  });

  // When each call became ready, per run (a run's entry goes when the run ends).
  const readyAt = new Map<string, Map<string, number>>();
  // The kind of limit each waiting call waits for (its latest call.waiting), per run.
  const waitKind = new Map<string, Map<string, string>>();
  const limitWaitOf = children((kind: string) => limitWait.labels(kind));
  // One child per label value: observing through a child skips prom-client's hashing of the labels.
  const waitOf = children((tool: string) => queueWait.labels(tool));
  const succeededOf = children((tool: string) => duration.labels(tool, 'succeeded'));
  const failedOf = children((tool: string) => duration.labels(tool, 'failed'));
  // Called for every event of every run: it allocates only for the events it counts.
  engine.onEvent((e, _view, call) => {
    const tool = call?.tool ?? 'unknown';
    switch (e.type) {
      case 'call.ready': {
        let m = readyAt.get(e.runId);
        if (!m) readyAt.set(e.runId, (m = new Map()));
        m.set(e.callId as string, e.at);
        break;
      }
      case 'call.waiting': {
        const kind = e.data.waitingFor[0]?.kind;
        let m = waitKind.get(e.runId);
        if (!m) waitKind.set(e.runId, (m = new Map()));
        if (kind) m.set(e.callId as string, kind);
        else m.delete(e.callId as string);
        break;
      }
      case 'call.hook': {
        const d = e.data;
        hookDuration.labels(d.hook, d.on, d.decision).observe(d.durationMs / 1000);
        hookDecisions.labels(d.hook, d.on, d.decision, d.error === undefined ? 'false' : 'true').inc();
        // The wait for limits starts once before_call decided: hook time is not a wait.
        if (d.on === 'before_call') readyAt.get(e.runId)?.set(e.callId as string, e.at);
        break;
      }
      case 'call.started': {
        const m = readyAt.get(e.runId);
        const at = m?.get(e.callId as string);
        if (at === undefined) break;
        m?.delete(e.callId as string);
        waitOf(tool).observe((e.at - at) / 1000);
        const kinds = waitKind.get(e.runId);
        const kind = kinds?.get(e.callId as string);
        if (kind !== undefined) {
          kinds?.delete(e.callId as string);
          limitWaitOf(kind).observe((e.at - at) / 1000);
        }
        break;
      }
      case 'call.succeeded':
        succeededOf(tool).observe(e.data.durationMs / 1000);
        break;
      case 'call.failed':
        if (e.data.attempt !== undefined) failedOf(tool).observe((e.data.durationMs ?? 0) / 1000);
        break;
      case 'call.cancelled':
        readyAt.get(e.runId)?.delete(e.callId as string);
        waitKind.get(e.runId)?.delete(e.callId as string);
        break;
      case 'run.completed':
        readyAt.delete(e.runId);
        waitKind.delete(e.runId);
        completedOf(e.data.status).inc();
        break;
    }
  });
  if (service.cluster) clusterMetrics(registry, service.cluster);
  return { registry };
}

/** `make` memoized by its one argument (tools and statuses are few: the catalog's and §6's). */
function children<T>(make: (label: string) => T): (label: string) => T {
  const made = new Map<string, T>();
  return (label) => {
    let child = made.get(label);
    if (child === undefined) made.set(label, (child = make(label)));
    return child;
  };
}
