/** What every route of the API is given: the service, the metrics, and the server's own state. */
import type { Metrics } from './metrics.js';
import type { Service } from './service.js';

export interface AppContext {
  service: Service;
  metrics: Metrics;
  /** SSE heartbeat period (ms). */
  heartbeatMs: number;
  /** Whether the server is closing: new runs are refused (503). */
  shuttingDown: () => boolean;
}
