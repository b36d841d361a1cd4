/**
 * The trace export thread (src/telemetry/export-thread.ts, export-worker.mjs) on its own, against an
 * in-process OTLP receiver: the spans the main thread notes (light-spans.ts) arrive as noted (ids,
 * parent, times, attributes, events, links, status, resource); an unsampled parent is
 * followed; the thread's bound drops what it cannot take and says so; a thread that dies is started
 * again, with the failure reported; and a collector that never answers holds no flush or shutdown
 * past the shutdown's bound.
 */
import { diag, DiagLogLevel, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/core/events.js';
import type { RunView } from '../../src/core/view.js';
import { startTracing } from '../../src/telemetry/index.js';
import { ExportThread } from '../../src/telemetry/export-thread.js';
import { SpanNoter, type SpanRecord } from '../../src/telemetry/light-spans.js';
import { RunTraceIds } from '../../src/telemetry/spans.js';
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

function thread(url: string, extra: Partial<ConstructorParameters<typeof ExportThread>[0]> = {}): ExportThread {
  const t = new ExportThread({ url, scope: { name: 'toolgraph', version: '0.1.0' }, serviceName: 'export-thread-test', ...extra });
  cleanups.push(() => t.terminate());
  return t;
}

const at = (ms: number): [number, number] => [Math.trunc(ms / 1000), (ms % 1000) * 1e6];

describe.each(['http/protobuf', 'http/json'] as const)('the export thread over %s', (protocol) => {
  it('exports the spans the main thread noted, as noted', async () => {
    const otlp = await receiver();
    const t = thread(otlp.url, { protocol });
    const noter = new SpanNoter(new RunTraceIds(), (r) => t.send(r));
    const parent = trace.setSpanContext(ROOT_CONTEXT, { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1, isRemote: true });
    const run = noter.startSpan('toolgraph.run', { kind: SpanKind.INTERNAL, startTime: at(1_700_000_000_000) }, parent);
    run.setAttributes({ 'toolgraph.run.id': 'run_1', 'toolgraph.tenant': 'acme' });
    const attempt = noter.startSpan('execute_tool work', { kind: SpanKind.INTERNAL, startTime: at(1_700_000_000_100), links: [{ context: { traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: 1 } }] }, trace.setSpan(parent, run));
    attempt.setAttributes({ 'gen_ai.tool.name': 'work', 'toolgraph.attempt': 2, 'toolgraph.wait_ms': 40 });
    attempt.addEvent('toolgraph.limit_wait', { 'toolgraph.wait_ms': 40 }, at(1_700_000_000_060));
    attempt.setAttribute('error.type', 'tool_error');
    attempt.setStatus({ code: SpanStatusCode.ERROR, message: 'it broke' });
    attempt.end(at(1_700_000_000_250));
    run.setAttribute('toolgraph.run.status', 'failed');
    run.end(at(1_700_000_000_300));
    // Ending twice, or changing an ended span, sends nothing more.
    attempt.end(at(1_700_000_000_999));
    attempt.setAttribute('late', true);
    await t.forceFlush();

    const spans = await otlp.waitFor((s) => s.length >= 2);
    expect(spans).toHaveLength(2);
    const [a, r] = spans as [(typeof spans)[0], (typeof spans)[0]];
    expect(r).toMatchObject({ name: 'toolgraph.run', traceId: '4bf92f3577b34da6a3ce929d0e0e4736', parentSpanId: '00f067aa0ba902b7', spanId: run.spanContext().spanId, kind: 1, startMs: 1_700_000_000_000, endMs: 1_700_000_000_300 });
    expect(r.attributes).toEqual({ 'toolgraph.run.id': 'run_1', 'toolgraph.tenant': 'acme', 'toolgraph.run.status': 'failed' });
    expect(r.resource['service.name']).toBe('export-thread-test');
    expect(a).toMatchObject({ name: 'execute_tool work', traceId: r.traceId, parentSpanId: r.spanId, spanId: attempt.spanContext().spanId, startMs: 1_700_000_000_100, endMs: 1_700_000_000_250, status: { code: 2, message: 'it broke' } });
    expect(a.attributes).toEqual({ 'gen_ai.tool.name': 'work', 'toolgraph.attempt': 2, 'toolgraph.wait_ms': 40, 'error.type': 'tool_error' });
    expect(a.events).toEqual([{ name: 'toolgraph.limit_wait', timeMs: 1_700_000_000_060, attributes: { 'toolgraph.wait_ms': 40 } }]);
    expect(a.links).toEqual([{ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16) }]);
    expect(a.protocol).toBe(protocol === 'http/json' ? 'json' : 'protobuf');
  });
});

describe('the export thread', () => {
  it('follows an unsampled parent: its spans say so in their traceparent, and are not exported', async () => {
    const otlp = await receiver();
    const t = thread(otlp.url);
    const noter = new SpanNoter(new RunTraceIds(), (r) => t.send(r));
    const unsampled = trace.setSpanContext(ROOT_CONTEXT, { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 0, isRemote: true });
    const quiet = noter.startSpan('toolgraph.run', {}, unsampled);
    expect(quiet.spanContext().traceFlags).toBe(0);
    expect(quiet.isRecording()).toBe(false);
    quiet.end();
    const root = noter.startSpan('toolgraph.run', {});
    expect(root.spanContext().traceFlags).toBe(1);
    root.end();
    await t.forceFlush();
    const spans = await otlp.waitFor((s) => s.length >= 1);
    expect(spans.map((s) => s.spanId)).toEqual([root.spanContext().spanId]);
  });

  it('drops what the thread has no room for, and says how many (as the SDK says its own drops)', async () => {
    const otlp = await receiver();
    const warnings: string[] = [];
    diag.setLogger({ warn: (m: string) => warnings.push(m), error: () => {}, info: () => {}, debug: () => {}, verbose: () => {} }, DiagLogLevel.WARN);
    const t = thread(otlp.url, { batch: { maxQueueSize: 10, maxExportBatchSize: 10 } });
    const noter = new SpanNoter(new RunTraceIds(), (r) => t.send(r));
    // 25 spans in one go: the thread takes none of them before this loop ends, so 10 are on their way and 15 dropped.
    for (let i = 0; i < 25; i++) noter.startSpan(`s${i}`, {}).end();
    await t.forceFlush();
    noter.startSpan('after', {}).end();
    await t.forceFlush();
    const spans = await otlp.waitFor((s) => s.length >= 11);
    expect(spans.map((s) => s.name)).toEqual([...Array.from({ length: 10 }, (_, i) => `s${i}`), 'after']);
    expect(warnings.map((w) => /Dropped (\d+) spans/.exec(w)?.[1])).toEqual(['15']);
  });

  it('a thread that dies is started again on the next span (after a second); its failure is reported', async () => {
    const otlp = await receiver();
    const errors: string[] = [];
    const t = thread(otlp.url, { onError: (m) => errors.push(m) });
    const noter = new SpanNoter(new RunTraceIds(), (r) => t.send(r));
    noter.startSpan('before', {}).end();
    await t.forceFlush();
    // A record the thread cannot read (links that are not a list) makes it throw, and it ends.
    const broken = ['broken', 0, 'c'.repeat(32), 'd'.repeat(16), '', false, 0, 1, 0, 1, 0, {}, 0, undefined, 0, 5] as unknown as SpanRecord;
    t.send(broken);
    await t.forceFlush();
    await waitUntil(() => errors.length > 0);
    expect(errors[0]).toMatch(/the trace export thread stopped/);
    // Within the second after: dropped. After it: a new thread exports.
    noter.startSpan('dropped', {}).end();
    await new Promise((r) => setTimeout(r, 1100));
    noter.startSpan('after', {}).end();
    await t.forceFlush();
    const spans = await otlp.waitFor((s) => s.some((x) => x.name === 'after'));
    expect(spans.map((s) => s.name)).toEqual(['before', 'after']);
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
    const tracing = await startTracing({ url: `http://127.0.0.1:${(silent.address() as AddressInfo).port}/v1/traces`, exportTimeoutMs: 30_000 });
    cleanups.push(() => tracing.shutdown(100));
    const traceparent = tracing.continueTrace('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
    expect(traceparent).toBeDefined();
    tracing.listener({ seq: 1, type: 'run.created', runId: traceparent as string, at: Date.now(), data: { tenant: 'default' } } as RunEvent, { tenant: 'default', status: 'running', endedAt: null } as unknown as RunView, undefined);
    tracing.listener({ seq: 2, type: 'run.completed', runId: traceparent as string, at: Date.now(), data: { status: 'succeeded' } } as RunEvent, { tenant: 'default', status: 'succeeded', endedAt: Date.now() } as unknown as RunView, undefined);
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
