// The trace export thread (see ExportThread in export-thread.ts). The main thread writes each event
// that makes, ends or times a span as a few values (entries: run-spans.mjs) and sends them here in
// batches; `RunSpans` makes the spans from them, and the SDK's BatchSpanProcessor and OTLP/HTTP exporter
// batch and export them, each read as the SDK's ReadableSpan (`readable`). So the spans' making, their
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
const hrTime = (ms) => [Math.trunc(ms / 1000), Math.round((ms % 1000) * 1e6)];

/** An ended span (run-spans.mjs) as the SDK's ReadableSpan, the shape its batch processor and exporters read. */
function readable(s) {
  const own = context(s.traceId, s.spanId, 1, false);
  const startTime = hrTime(s.start);
  const endTime = hrTime(s.end);
  let d0 = endTime[0] - startTime[0];
  let d1 = endTime[1] - startTime[1];
  if (d1 < 0) {
    d0 -= 1;
    d1 += 1e9;
  }
  return {
    name: s.name,
    kind: 0,
    spanContext: () => own,
    parentSpanContext: s.parentSpanId ? context(s.traceId, s.parentSpanId, s.parentFlags, s.parentRemote) : undefined,
    startTime,
    endTime,
    duration: [d0, d1],
    status: s.status,
    attributes: s.attributes,
    events: s.events.length === 0 ? s.events : s.events.map((e) => ({ name: e.name, attributes: e.attributes, time: hrTime(e.at), droppedAttributesCount: 0 })),
    links: s.links.length === 0 ? s.links : s.links.map((l) => ({ context: context(l.traceId, l.spanId, l.flags, l.remote), attributes: {}, droppedAttributesCount: 0 })),
    ended: true,
    resource,
    instrumentationScope: scope,
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  };
}

let processor;
const spans = new RunSpans((s) => processor.onEnd(readable(s)));

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
