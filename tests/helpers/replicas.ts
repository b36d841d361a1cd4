/**
 * Several replicas for tests: the bench's harness (src/bench/replicas.ts), which the chaos script and
 * the replica benchmarks start too, and a reader of a run's event stream.
 */
import { sse } from './server.js';

export { ClusterTools, maxOverlap, startCluster, type Attempt, type ClusterOptions, type TestCluster } from '../../src/bench/replicas.js';

/** An event as `/v1/runs/{id}/events` sends it (the fields the tests read). */
export interface StreamedEvent {
  seq: number;
  type: string;
}

/** Reads `/v1/runs/{id}/events` of the replica at `base` until the stream ends (the run ended). */
export async function readRunEvents(base: string, runId: string): Promise<StreamedEvent[]> {
  const stream = await sse(`${base}/v1/runs/${runId}/events`);
  return (await stream.ended).map((e) => e.data as StreamedEvent);
}
