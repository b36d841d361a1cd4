/**
 * Several replicas for tests: the bench's harness (src/bench/replicas.ts), which the chaos script and
 * the replica benchmarks start too, and a reader of a run's event stream.
 */
export { ClusterTools, maxOverlap, startCluster, type Attempt, type ClusterOptions, type TestCluster } from '../../src/bench/replicas.js';

/** An event as `/v1/runs/{id}/events` sends it (the fields the tests read). */
export interface StreamedEvent {
  seq: number;
  type: string;
}

/** Reads `/v1/runs/{id}/events` of the replica at `base` until the stream ends (the run ended). */
export async function readRunEvents(base: string, runId: string): Promise<StreamedEvent[]> {
  const out: StreamedEvent[] = [];
  const res = await fetch(`${base}/v1/runs/${runId}/events`);
  if (!res.body) throw new Error('no body');
  const decoder = new TextDecoder();
  let buf = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = block.split('\n').find((l) => l.startsWith('data: '));
      if (data) out.push(JSON.parse(data.slice(6)) as StreamedEvent);
    }
  }
  return out;
}
