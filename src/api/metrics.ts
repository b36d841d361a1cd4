/**
 * Prometheus metrics (prom-client, a registry per server): runs by status, call durations, the time
 * ready calls wait for a limit, and how full each limit is.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RunView } from '../core/view.js';
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
  // Called for every event of every run: it allocates only for the events it counts.
  engine.onEvent((e, view) => {
    switch (e.type) {
      case 'call.ready':
        readyAt.set(`${e.runId}/${e.callId}`, e.at);
        break;
      case 'call.started': {
        const key = `${e.runId}/${e.callId}`;
        const at = readyAt.get(key);
        readyAt.delete(key);
        if (at !== undefined) queueWait.observe({ tool: toolOf(view, e.callId) }, (e.at - at) / 1000);
        break;
      }
      case 'call.succeeded':
      case 'call.failed':
        if (e.type === 'call.succeeded' || e.data.attempt !== undefined) {
          duration.observe({ tool: toolOf(view, e.callId), outcome: e.type === 'call.succeeded' ? 'succeeded' : 'failed' }, ((e.data.durationMs as number | undefined) ?? 0) / 1000);
        }
        break;
      case 'call.cancelled':
        readyAt.delete(`${e.runId}/${e.callId}`);
        break;
      case 'run.completed':
        completed.inc({ status: e.data.status as string });
        break;
    }
  });
  return { registry };
}

function toolOf(view: RunView, callId: string | undefined): string {
  return view.calls.find((c) => c.id === callId)?.tool ?? 'unknown';
}
