// The trace export thread (see ExportThread in export-thread.ts). The main thread notes each span as a
// compact record (light-spans.ts) and sends the ended ones here, in batches; this thread reads each back
// as the SDK's ReadableSpan (the shape the SDK's span processors and exporters take: `readable`), and the
// SDK's BatchSpanProcessor and OTLP/HTTP exporter batch and export them. So the spans' wait in the batch
// queue, the OTLP serializer and the export requests cost the event loop that serves runs nothing. Plain JS, like the store's writer.mjs: a worker thread starts without the
// TypeScript loader that runs the sources under tsx or vitest.
//
// Messages in: { spans: record[] } (answered with { taken: n } once they are queued), { flush: id }
// (answered with the same id once done) and { shutdown: id } (the thread ends once its spans are out).
// Messages out besides: { error: message } (an export failed: OpenTelemetry's global error handler) and
// { warn: message } (the SDK's diagnostics at warn level and above, e.g. spans dropped by a full queue). A record is light-spans.ts's
// `SpanRecord`; keep the two in step.
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { diag, DiagLogLevel } from '@opentelemetry/api';
import { setGlobalErrorHandler } from '@opentelemetry/core';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';

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

const resource = defaultResource().merge(resourceFromAttributes({ 'service.name': serviceName }));
// The listener is there from the start (messages that come while the exporter loads wait for it).
const loading = (async () => {
  // Only the protocol's exporter is loaded.
  const { OTLPTraceExporter } = protocol === 'http/json' ? await import('@opentelemetry/exporter-trace-otlp-http') : await import('@opentelemetry/exporter-trace-otlp-proto');
  const exporter = new OTLPTraceExporter({ url, timeoutMillis: exportTimeoutMs, ...(headers ? { headers } : {}) });
  lowerPriority();
  return new BatchSpanProcessor(exporter, batch ?? {});
})();

const context = (traceId, spanId, traceFlags, isRemote) => (isRemote ? { traceId, spanId, traceFlags, isRemote } : { traceId, spanId, traceFlags });

/** A record as the SDK's ReadableSpan, the shape its batch processor and exporters read. */
function readable(r) {
  const [name, kind, traceId, spanId, parentSpanId, parentRemote, parentFlags, s0, s1, e0, e1, attributes, statusCode, statusMessage, events, links] = r;
  // Only sampled spans are sent (light-spans.ts).
  const own = context(traceId, spanId, 1, false);
  let d0 = e0 - s0;
  let d1 = e1 - s1;
  if (d1 < 0) {
    d0 -= 1;
    d1 += 1e9;
  }
  return {
    name,
    kind,
    spanContext: () => own,
    parentSpanContext: parentSpanId ? context(traceId, parentSpanId, parentFlags, parentRemote) : undefined,
    startTime: [s0, s1],
    endTime: [e0, e1],
    duration: [d0, d1],
    status: statusMessage === undefined ? { code: statusCode } : { code: statusCode, message: statusMessage },
    attributes,
    events: events ? events.map(([n, a, t0, t1]) => ({ name: n, attributes: a, time: [t0, t1], droppedAttributesCount: 0 })) : [],
    links: links ? links.map(([t, s, f, remote, a]) => ({ context: context(t, s, f, remote), attributes: a, droppedAttributesCount: 0 })) : [],
    ended: true,
    resource,
    instrumentationScope: scope,
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  };
}

port.on('message', async (m) => {
  const processor = await loading;
  if (m.spans) {
    for (const r of m.spans) processor.onEnd(readable(r));
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
