/**
 * The trace export thread (src/telemetry/export-thread.ts, export-worker.mjs) with the main thread's
 * feed (trace-feed.ts), against an in-process OTLP receiver: the spans made in the thread from the
 * feed's entries arrive whole (ids, parent, times, attributes, events, links, status, resource) over
 * both protocols; an unsampled parent is followed; the feed's bound drops what the thread has no room
 * for and says so; a thread that dies is started again, told the traces it lost, with the failure
 * reported; and a collector that never answers holds no flush or shutdown past the shutdown's bound.
 */
import { diag, DiagLogLevel } from '@opentelemetry/api';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/core/events.js';
import type { CallView, RunView } from '../../src/core/view.js';
import type { ExecuteRequest } from '../../src/executors/types.js';
import { startTracing } from '../../src/telemetry/index.js';
import { ExportThread } from '../../src/telemetry/export-thread.js';
import { SpanIds } from '../../src/telemetry/run-spans.mjs';
import { TraceFeed } from '../../src/telemetry/trace-feed.js';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  diag.disable();
});

async function receiver(): Promise<OtlpReceiver> {
  const r = await startOtlpReceiver();
  cleanups.push(() => r.close());
  return r;
}

/** A feed over a real export thread. */
function feedOver(url: string, extra: Partial<ConstructorParameters<typeof ExportThread>[0]> = {}): { t: ExportThread; feed: TraceFeed } {
  let feed: TraceFeed | undefined;
  const t = new ExportThread({
    url,
    scope: { name: 'toolgraph', version: '0.1.0' },
    serviceName: 'export-thread-test',
    onRestart: () => feed?.restarted(),
    ...extra,
  });
  cleanups.push(() => t.terminate());
  feed = new TraceFeed(t, new SpanIds());
  return { t, feed };
}

const T0 = 1_700_000_000_000;
const view = { tenant: 'acme', status: 'running', endedAt: null } as unknown as RunView;
let seq = 0;
function tell(
  feed: TraceFeed,
  runId: string,
  type: RunEvent['type'],
  at: number,
  data: Record<string, unknown> = {},
  callId?: string,
  tool = 'work',
): void {
  feed.listener(
    { seq: ++seq, type, runId, at, data, ...(callId !== undefined ? { callId } : {}) } as RunEvent,
    view,
    callId === undefined ? undefined : ({ tool } as CallView),
  );
}
const request = (runId: string, callId: string, attempt: number, tool = 'work') =>
  ({ runId, callId, attempt, tool: { name: tool } }) as ExecuteRequest;
/** A run of one call that succeeds at once. */
function quickRun(feed: TraceFeed, runId: string): void {
  tell(feed, runId, 'run.created', T0, { tenant: 'acme' });
  tell(feed, runId, 'call.started', T0, { attempt: 1 }, 'a');
  tell(feed, runId, 'call.succeeded', T0 + 1, { attempt: 1 }, 'a');
  tell(feed, runId, 'run.completed', T0 + 1, { status: 'succeeded' });
}

describe.each(['http/protobuf', 'http/json'] as const)('the export thread over %s', (protocol) => {
  it("exports the spans made from the feed's entries, whole", async () => {
    const otlp = await receiver();
    const { t, feed } = feedOver(otlp.url, { protocol });
    const runId = feed.continueTrace('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') as string;
    tell(feed, runId, 'run.created', T0, { tenant: 'acme' });
    tell(feed, runId, 'call.ready', T0 + 60, {}, 'a');
    tell(feed, runId, 'call.started', T0 + 100, { attempt: 2 }, 'a');
    const tp = feed.traceparentFor(request(runId, 'a', 2));
    tell(feed, runId, 'call.failed', T0 + 250, { attempt: 2, error: { code: 'tool_error', message: 'it broke' } }, 'a');
    tell(feed, runId, 'run.completed', T0 + 300, { status: 'needs_replan' });
    tell(feed, runId, 'run.replanned', T0 + 400);
    tell(feed, runId, 'run.completed', T0 + 500, { status: 'failed' });
    await t.forceFlush();

    const spans = await otlp.waitFor((s) => s.length >= 3);
    expect(spans).toHaveLength(3);
    const [a, r, r2] = spans as [(typeof spans)[0], (typeof spans)[0], (typeof spans)[0]];
    expect(r).toMatchObject({
      name: 'toolgraph.run',
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentSpanId: '00f067aa0ba902b7',
      kind: 1,
      startMs: T0,
      endMs: T0 + 300,
    });
    expect(r.attributes).toEqual({ 'toolgraph.run.id': runId, 'toolgraph.tenant': 'acme', 'toolgraph.run.status': 'needs_replan' });
    expect(r.resource['service.name']).toBe('export-thread-test');
    expect(tp).toBe(`00-4bf92f3577b34da6a3ce929d0e0e4736-${a.spanId}-01`);
    expect(a).toMatchObject({
      name: 'execute_tool work',
      traceId: r.traceId,
      parentSpanId: r.spanId,
      startMs: T0 + 100,
      endMs: T0 + 250,
      status: { code: 2, message: 'it broke' },
    });
    expect(a.attributes).toEqual({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'work',
      'gen_ai.tool.call.id': 'a',
      'toolgraph.run.id': runId,
      'toolgraph.attempt': 2,
      'toolgraph.wait_ms': 40,
      'error.type': 'tool_error',
    });
    expect(a.events).toEqual([{ name: 'toolgraph.limit_wait', timeMs: T0 + 60, attributes: { 'toolgraph.wait_ms': 40 } }]);
    expect(r2).toMatchObject({
      name: 'toolgraph.run',
      traceId: r.traceId,
      parentSpanId: '00f067aa0ba902b7',
      startMs: T0 + 400,
      endMs: T0 + 500,
      status: { code: 2, message: 'the run failed' },
    });
    expect(r2.links).toEqual([{ traceId: r.traceId, spanId: r.spanId }]);
    expect(a.protocol).toBe(protocol === 'http/json' ? 'json' : 'protobuf');
  });
});

describe('the export thread', () => {
  it('follows an unsampled parent: its traceparents say so, and its spans are not exported', async () => {
    const otlp = await receiver();
    const { t, feed } = feedOver(otlp.url);
    const quiet = feed.continueTrace('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00') as string;
    expect(feed.traceparentFor(request(quiet, 'a', 1))).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-00$/);
    quickRun(feed, quiet);
    quickRun(feed, 'root');
    await t.forceFlush();
    const spans = await otlp.waitFor((s) => s.length >= 2);
    await t.forceFlush();
    expect(spans.map((s) => s.attributes['toolgraph.run.id'])).toEqual(['root', 'root']);
  });

  it('past its bound, new runs go untraced and a run traced is let go; the spans dropped are said (as the SDK says its own)', async () => {
    const otlp = await receiver();
    const warnings: string[] = [];
    diag.setLogger(
      { warn: (m: string) => warnings.push(m), error: () => {}, info: () => {}, debug: () => {}, verbose: () => {} },
      DiagLogLevel.WARN,
    );
    // 18 values on their way before new runs go untraced, 36 before runs traced are let go.
    const drops: number[] = [];
    const { t, feed } = feedOver(otlp.url, { maxValues: 18, onDrop: (_m, spans) => void drops.push(spans) });
    // All in one go: the thread takes nothing before this ends. `long` starts (13 values: its NAME,
    // CREATED and STARTED entries), `r0` starts under 18 (21 more: 34), the next 24 runs do not (2
    // spans each); `long`'s attempt ends (4 more: 38), and it is let go at its end (its run span is
    // dropped).
    tell(feed, 'long', 'run.created', T0, { tenant: 'acme' });
    tell(feed, 'long', 'call.started', T0, { attempt: 1 }, 'a');
    for (let i = 0; i < 25; i++) quickRun(feed, `r${i}`);
    tell(feed, 'long', 'call.succeeded', T0 + 2, { attempt: 1 }, 'a');
    tell(feed, 'long', 'run.completed', T0 + 3, { status: 'succeeded' });
    await t.forceFlush();
    quickRun(feed, 'after');
    await t.forceFlush();
    const spans = await otlp.waitFor((s) => s.length >= 4);
    expect(spans.map((s) => `${s.attributes['toolgraph.run.id']} ${s.name}`)).toEqual([
      'r0 execute_tool work',
      'r0 toolgraph.run',
      'long execute_tool work',
      'after execute_tool work',
      'after toolgraph.run',
    ]);
    // 48 spans of the runs never traced (said when there was room again); the thread let go of `long`'s run span.
    expect(warnings.map((w) => /Dropped (\d+) spans/.exec(w)?.[1])).toEqual(['48', '1']);
    // The same counts go to `onDrop` (which serve logs, at most once a minute).
    expect(drops).toEqual([48, 1]);
  });

  it('a thread that dies is started again on the next run (after a second), told of the traces it lost; its failure is reported', async () => {
    const otlp = await receiver();
    const errors: string[] = [];
    const { t, feed } = feedOver(otlp.url, { onError: (m) => errors.push(m) });
    quickRun(feed, 'before');
    const continued = feed.continueTrace('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') as string;
    tell(feed, continued, 'run.created', T0, { tenant: 'acme' });
    await t.forceFlush();
    // An entry the thread cannot read makes it throw, and it ends.
    t.q.push(99, 'broken');
    t.wrote();
    await t.forceFlush();
    await waitUntil(() => errors.length > 0);
    expect(errors[0]).toMatch(/the trace export thread stopped/);
    // Within the second after: not traced. After it: a new thread, which hears of the continued run again.
    quickRun(feed, 'dropped');
    await new Promise((r) => setTimeout(r, 1100));
    quickRun(feed, 'after');
    // What the dead thread had started of the continued run is lost; what comes after is in its trace.
    tell(feed, continued, 'call.started', T0 + 5, { attempt: 1 }, 'b');
    tell(feed, continued, 'call.succeeded', T0 + 6, { attempt: 1 }, 'b');
    tell(feed, continued, 'run.completed', T0 + 7, { status: 'succeeded' });
    await t.forceFlush();
    const spans = await otlp.waitFor((s) => s.filter((x) => x.attributes['toolgraph.run.id'] === continued).length >= 2);
    expect(spans.filter((s) => s.name === 'toolgraph.run').map((s) => s.attributes['toolgraph.run.id'])).toEqual([
      'before',
      'after',
      continued,
    ]);
    const [attempt, run] = spans.filter((s) => s.attributes['toolgraph.run.id'] === continued);
    expect(run).toMatchObject({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentSpanId: '00f067aa0ba902b7',
      startMs: T0 + 5,
      endMs: T0 + 7,
    });
    expect(run?.attributes['toolgraph.tenant']).toBe('acme');
    expect(attempt).toMatchObject({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', parentSpanId: run?.spanId });
  });
});

describe('tracing over the export thread', () => {
  it('a collector that never answers holds neither a flush nor a shutdown past its bound', async () => {
    // Takes each connection and never answers on it.
    const sockets: Socket[] = [];
    const silent = createServer((s) => void sockets.push(s));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    cleanups.push(async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    });
    const tracing = await startTracing({
      url: `http://127.0.0.1:${(silent.address() as AddressInfo).port}/v1/traces`,
      exportTimeoutMs: 30_000,
    });
    cleanups.push(() => tracing.shutdown(100));
    const traceparent = tracing.continueTrace('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
    expect(traceparent).toBeDefined();
    tracing.listener(
      { seq: 1, type: 'run.created', runId: traceparent as string, at: Date.now(), data: { tenant: 'default' } } as RunEvent,
      { tenant: 'default', status: 'running', endedAt: null } as unknown as RunView,
      undefined,
    );
    tracing.listener(
      { seq: 2, type: 'run.completed', runId: traceparent as string, at: Date.now(), data: { status: 'succeeded' } } as RunEvent,
      { tenant: 'default', status: 'succeeded', endedAt: Date.now() } as unknown as RunView,
      undefined,
    );
    let flushed = false;
    const flush = tracing.flush().then(() => void (flushed = true));
    await waitUntil(() => sockets.length > 0);
    expect(flushed).toBe(false);
    const t0 = performance.now();
    await tracing.shutdown(300);
    await flush;
    expect(flushed).toBe(true);
    expect(performance.now() - t0).toBeLessThan(2000);
  });
});

async function waitUntil(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}
