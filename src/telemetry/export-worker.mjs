// The trace export thread (see ExportThread in export-thread.ts). The main thread notes each span as a
// compact record (light-spans.ts) and sends the ended ones here, in batches; this thread makes each span
// with the SDK's own tracer (the same ids, times, parent, attributes, events, links and status), and the
// SDK's BatchSpanProcessor and OTLP/HTTP exporter batch and export them. So the SDK's per-span work, the
// spans' wait in the batch queue, the OTLP serializer and the export requests cost the event loop that
// serves runs nothing. Plain JS, like the store's writer.mjs: a worker thread starts without the
// TypeScript loader that runs the sources under tsx or vitest.
//
// Messages in: { spans: record[] } (answered with { taken: n } once they are queued), { flush: id }
// (answered with the same id once done) and { shutdown: id } (the thread ends once its spans are out). Messages out besides: { error: message }
// (an export failed: OpenTelemetry's global error handler) and { warn: message } (the SDK's diagnostics
// at warn level and above, e.g. spans dropped by a full queue). A record is light-spans.ts's
// `SpanRecord`; keep the two in step.
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { diag, DiagLogLevel, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { setGlobalErrorHandler } from '@opentelemetry/core';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';

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

const port = parentPort;

const tell = (message) => port.postMessage({ warn: String(message) });
diag.setLogger({ error: tell, warn: tell, info() {}, debug() {}, verbose() {} }, DiagLogLevel.WARN);
setGlobalErrorHandler((err) => port.postMessage({ error: err instanceof Error ? err.message : String(err) }));

/** The tracer's ids are the record's: set just before each span starts. */
const ids = {
  traceId: '',
  spanId: '',
  generateTraceId: () => ids.traceId,
  generateSpanId: () => ids.spanId,
};
// The listener is there from the start (messages that come while the exporter loads wait for it).
const loading = (async () => {
  // Only the protocol's exporter is loaded.
  const { OTLPTraceExporter } = protocol === 'http/json' ? await import('@opentelemetry/exporter-trace-otlp-http') : await import('@opentelemetry/exporter-trace-otlp-proto');
  const exporter = new OTLPTraceExporter({ url, timeoutMillis: exportTimeoutMs, ...(headers ? { headers } : {}) });
  const processor = new BatchSpanProcessor(exporter, batch ?? {});
  const provider = new BasicTracerProvider({
    idGenerator: ids,
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': serviceName })),
    spanProcessors: [processor],
  });
  lowerPriority();
  return { processor, tracer: provider.getTracer(scope.name, scope.version) };
})();

function make(tracer, r) {
  const [name, kind, traceId, spanId, parentSpanId, parentRemote, parentFlags, s0, s1, e0, e1, attributes, statusCode, statusMessage, events, links] = r;
  ids.traceId = traceId;
  ids.spanId = spanId;
  const parent = parentSpanId ? trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: parentSpanId, traceFlags: parentFlags, isRemote: parentRemote }) : ROOT_CONTEXT;
  const options = { kind, startTime: [s0, s1] };
  if (links) options.links = links.map(([t, s, f, remote, a]) => ({ context: { traceId: t, spanId: s, traceFlags: f, isRemote: remote }, attributes: a }));
  // Only sampled spans are sent (light-spans.ts); the SDK's default sampler, parent-based, agrees.
  const span = tracer.startSpan(name, options, parent);
  span.setAttributes(attributes);
  if (events) for (const [n, a, t0, t1] of events) span.addEvent(n, a, [t0, t1]);
  if (statusCode !== 0) span.setStatus(statusMessage === undefined ? { code: statusCode } : { code: statusCode, message: statusMessage });
  span.end([e0, e1]);
}

port.on('message', async (m) => {
  const { processor, tracer } = await loading;
  if (m.spans) {
    for (const r of m.spans) make(tracer, r);
    port.postMessage({ taken: m.spans.length });
  } else if (m.flush !== undefined) {
    await processor.forceFlush().catch(() => {});
    port.postMessage({ flushed: m.flush });
  } else if (m.shutdown !== undefined) {
    await processor.shutdown().catch(() => {});
    // The thread ends by itself (its 'exit' handlers run): that is the answer.
    port.close();
  }
});
