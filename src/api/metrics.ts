/**
 * Prometheus metrics (prom-client, a registry per server): runs by status, call durations, the time
 * ready calls wait for a limit, and how full each limit is.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Service } from './service.js';

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
    collect() {
      this.reset();
      for (const [status, n] of Object.entries(store.countsByStatus())) this.set({ status }, n);
    },
  });
  const completed = new Counter({ name: 'toolgraph_runs_completed_total', help: 'Runs that ended, by status', labelNames: ['status'], registers: [registry] });
  const duration = new Histogram({
    name: 'toolgraph_call_duration_seconds',
    help: 'Duration of call attempts, by tool and outcome',
    labelNames: ['tool', 'outcome'],
    buckets: BUCKETS,
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
  new Gauge({
    name: 'toolgraph_attempts_running',
    help: 'Attempts running now',
    registers: [registry],
    collect() {
      this.set(engine.runningAttempts());
    },
  });

  const readyAt = new Map<string, number>();
  engine.onEvent((e, view) => {
    const key = `${e.runId}/${e.callId}`;
    const tool = () => view.calls.find((c) => c.id === e.callId)?.tool ?? 'unknown';
    if (e.type === 'call.ready') readyAt.set(key, e.at);
    else if (e.type === 'call.started') {
      const at = readyAt.get(key);
      readyAt.delete(key);
      if (at !== undefined) queueWait.observe({ tool: tool() }, (e.at - at) / 1000);
    } else if (e.type === 'call.succeeded' || (e.type === 'call.failed' && e.data.attempt !== undefined)) {
      duration.observe({ tool: tool(), outcome: e.type === 'call.succeeded' ? 'succeeded' : 'failed' }, ((e.data.durationMs as number | undefined) ?? 0) / 1000);
    } else if (e.type === 'call.cancelled') readyAt.delete(key);
    else if (e.type === 'run.completed') completed.inc({ status: e.data.status as string });
  });
  return { registry };
}
