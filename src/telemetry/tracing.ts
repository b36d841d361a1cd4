/**
 * The OpenTelemetry side of traces (DESIGN §15), loaded only by `startTracing` (index.ts). The main
 * thread writes down the events that make spans (trace-feed.ts: nothing is registered globally, so
 * several can live in one process) and sends them to a thread of their own (export-thread.ts), where
 * the spans are made (run-spans.mjs), the SDK's batch span processor queues them (bounded) and the
 * SDK's OTLP/HTTP exporter of the protocol asked for (`http/protobuf` or `http/json`) sends them. An
 * export that fails is that processor's business: the spans of that batch are dropped, and no run
 * waits for a collector.
 */
import { sendsTraceparent } from '../executors/index.js';
import type { ExecuteRequest, ExecuteResult, Executor } from '../executors/types.js';
import type { Tracing, TracingOptions } from './types.js';
import { ExportThread } from './export-thread.js';
import { SpanIds } from './run-spans.mjs';
import { TraceFeed } from './trace-feed.js';

/** The version that goes with the tracer's name (the instrumentation scope). */
const SCOPE_VERSION = '0.1.0';

export async function createTracing(opts: TracingOptions): Promise<Tracing> {
  const report = opts.onExportError ? throttled(opts.onExportError, 60_000) : undefined;
  const dropped = opts.onDropped ? throttled(opts.onDropped, 60_000) : undefined;
  let traces: TraceFeed | undefined;
  const thread = new ExportThread({
    ...opts,
    scope: { name: 'toolgraph', version: SCOPE_VERSION },
    ...(report ? { onError: (message: string) => report(message, 1) } : {}),
    ...(dropped ? { onDrop: dropped } : {}),
    onRestart: () => traces?.restarted(),
  });
  const feed = (traces = new TraceFeed(thread, new SpanIds()));
  let stopped: Promise<void> | undefined;

  return {
    listener: feed.listener,
    attach: (engine) => engine.onEvent(feed.listener),
    continueTrace: (traceparent) => feed.continueTrace(traceparent),
    resumed: (created) => feed.resumed(created),
    instrument(inner: Executor): Executor {
      return {
        execute(request: ExecuteRequest): Promise<ExecuteResult> {
          try {
            // Only an executor that sends it gets a traceparent: for the others none is made.
            if (sendsTraceparent(request.tool)) request.traceparent = feed.traceparentFor(request);
            else feed.attempted(request, false);
          } catch {
            // Tracing never fails an attempt.
          }
          return inner.execute(request);
        },
        close: () => inner.close(),
      };
    },
    flush: () => thread.forceFlush(),
    shutdown(timeoutMs = 2000) {
      stopped ??= within(thread.shutdown(), timeoutMs).then(() => thread.terminate());
      return stopped;
    },
  };
}

/** The first report at once, then at most one per `periodMs`, with the count since the last one and the last message. */
function throttled(report: (message: string, count: number) => void, periodMs: number): (message: string, count: number) => void {
  let last = -Infinity;
  let total = 0;
  return (message, count) => {
    total += count;
    const now = Date.now();
    if (now - last < periodMs) return;
    last = now;
    const n = total;
    total = 0;
    try {
      report(message, n);
    } catch {
      // A report cannot throw into the exporter.
    }
  };
}

/** Resolves when `p` settles or after `ms`, whichever comes first; never rejects. */
function within(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    timer.unref();
    p.then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      () => {
        clearTimeout(timer);
        resolve();
      },
    );
  });
}
