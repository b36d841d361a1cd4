// The trace export thread (see ExportThread in export-thread.ts). The main thread writes each event
// that makes, ends or times a span as a few values (entries: run-spans.mjs) and sends them here in
// batches; `RunSpans` makes the spans from them, and the SDK's BatchSpanProcessor and OTLP/HTTP exporter
// batch and export them, each read as the SDK's ReadableSpan (`Readable`, otlp-proto.mjs). So the spans' making, their
// wait in the batch queue, the OTLP serializer and the export requests cost the event loop that serves
// runs nothing. Plain JS, like the store's writer.mjs: a worker thread starts without the TypeScript
// loader that runs the sources under tsx or vitest.
//
// Messages in: a list of entries as JSON text, its first value the base of their times (answered with
// { taken: n }, how many values, once their spans are made and queued); { flush: id } (answered with the
// same id once done); { shutdown: id } (the thread ends once its spans are out). Messages out besides:
// { error: message } (an export failed: OpenTelemetry's global error handler) and { warn: message } (the
// SDK's diagnostics at warn level and above, e.g. spans dropped by a full queue, and spans let go
// unended: run-spans.mjs's FORGET).
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { diag, DiagLogLevel } from '@opentelemetry/api';
import { setGlobalErrorHandler } from '@opentelemetry/core';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Readable, serializeSpans } from './otlp-proto.mjs';
import { RunSpans } from './run-spans.mjs';

const { url, protocol, headers, serviceName, exportTimeoutMs, batch, scope, nice } = workerData;

// Once its modules are loaded (see `loading`), this thread runs at a lower CPU priority, `nice` more
// than the process's (Linux: a thread has a nice value of its own): a batch of spans that wakes it does
// not preempt the thread that serves runs, and it takes mostly the CPU that thread leaves. On a machine
// with no CPU to spare, its queue fills and spans are dropped, as with a slow collector.
function lowerPriority() {
  if (!nice) return;
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    setPriority(tid, Math.min(19, getPriority(tid) + nice));
  } catch {
    // Not Linux, or not allowed: the thread keeps the process's priority.
  }
}

if (!parentPort) throw new Error('export-worker.mjs runs as a worker thread');
const port = parentPort;

const tell = (/** @type {unknown} */ message) => port.postMessage({ warn: String(message) });
diag.setLogger({ error: tell, warn: tell, info() {}, debug() {}, verbose() {} }, DiagLogLevel.WARN);
setGlobalErrorHandler((err) => port.postMessage({ error: err instanceof Error ? err.message : String(err) }));

const resource = defaultResource().merge(resourceFromAttributes({ 'service.name': serviceName }));
// The listener is there from the start (messages that come while the exporter loads wait for it).
const loading = (async () => {
  const config = { url, timeoutMillis: exportTimeoutMs, ...(headers ? { headers } : {}) };
  const exporter =
    protocol === 'http/json'
      ? new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter(config)
      : await protobufExporter(config);
  lowerPriority();
  return new BatchSpanProcessor(exporter, batch ?? {});
})();

/**
 * The OTLP/HTTP exporter of `@opentelemetry/exporter-trace-otlp-proto` (0.223), built as that package builds it
 * (the same HTTP delegate: its headers, timeout, retries, compression and environment variables; the
 * same exporter metrics), but for its serializer: otlp-proto.mjs writes the same bytes for less CPU.
 */
/**
 * @param {{ url: string, timeoutMillis: number, headers?: Record<string, string> }} config
 */
async function protobufExporter(config) {
  const [
    { OTLPExporterBase },
    { createOtlpHttpExportDelegate, convertLegacyHttpOptions },
    { ProtobufTraceSerializer, TraceExporterMetricsHelper },
  ] = await Promise.all([
    import('@opentelemetry/otlp-exporter-base'),
    import('@opentelemetry/otlp-exporter-base/node-http'),
    import('@opentelemetry/otlp-transformer'),
  ]);
  const serializer = {
    serializeRequest: serializeSpans,
    deserializeResponse: (/** @type {Uint8Array} */ bytes) => ProtobufTraceSerializer.deserializeResponse(bytes),
  };
  const options = convertLegacyHttpOptions(config, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' });
  return new OTLPExporterBase(
    createOtlpHttpExportDelegate(options, serializer, 'otlp_http_span_exporter', TraceExporterMetricsHelper, undefined),
  );
}

/** @type {BatchSpanProcessor | undefined} */
let processor;
// Spans are made only once the processor is there (the listener below awaits it first).
const spans = new RunSpans((s) => processor?.onEnd(new Readable(s, resource, scope)));

port.on('message', async (m) => {
  processor ??= await loading;
  if (typeof m === 'string') {
    // JSON text: the base of the entries' times, then the entries.
    const q = JSON.parse(m);
    spans.apply(q, q[0], 1);
    port.postMessage({ taken: q.length - 1 });
    if (spans.dropped > 0) {
      tell(`Dropped ${spans.dropped} spans started before their run was let go (maxQueueSize reached on their way to the export thread)`);
      spans.dropped = 0;
    }
  } else if (m.flush !== undefined) {
    await processor.forceFlush().catch(() => {});
    port.postMessage({ flushed: m.flush });
  } else if (m.shutdown !== undefined) {
    await processor.shutdown().catch(() => {});
    // The thread ends by itself (its 'exit' handlers run): that is the answer.
    port.close();
  }
});
