/**
 * The OpenTelemetry side of traces (DESIGN §15), loaded only by `startTracing` (index.ts). The main
 * thread notes spans (light-spans.ts: nothing is registered globally, so several can live in one
 * process) and sends the ended ones to a thread of their own (export-thread.ts), where the SDK's batch
 * span processor queues them (bounded) and the SDK's OTLP/HTTP exporter of the protocol asked for
 * (`http/protobuf` or `http/json`) sends them. An export that fails is that processor's
 * business: the spans of that batch are dropped, and no run waits for a collector.
 */
import type { ExecuteRequest, ExecuteResult, Executor } from '../executors/types.js';
import type { Tracing, TracingOptions } from './types.js';
import { ExportThread } from './export-thread.js';
import { SpanNoter } from './light-spans.js';
import { RunTraceIds, RunTraces } from './spans.js';

/** The version that goes with the tracer's name (the instrumentation scope). */
const SCOPE_VERSION = '0.1.0';

export async function createTracing(opts: TracingOptions): Promise<Tracing> {
  const ids = new RunTraceIds();
  const report = opts.onExportError ? throttled(opts.onExportError, 60_000) : undefined;
  const thread = new ExportThread({ ...opts, scope: { name: 'toolgraph', version: SCOPE_VERSION }, ...(report ? { onError: report } : {}) });
  const traces = new RunTraces(new SpanNoter(ids, (record) => thread.send(record)), Date.now, ids);
  let stopped: Promise<void> | undefined;

  return {
    listener: traces.listener,
    attach: (engine) => engine.onEvent(traces.listener),
    continueTrace: (traceparent) => traces.continueTrace(traceparent),
    resumed: (created) => traces.resumed(created),
    instrument(inner: Executor): Executor {
      return {
        execute(request: ExecuteRequest): Promise<ExecuteResult> {
          try {
            request.traceparent = traces.traceparentFor(request);
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

/** The first error at once, then at most one report per `periodMs`, with the count since the last one. */
function throttled(report: (message: string, failures: number) => void, periodMs: number): (message: string) => void {
  let last = -Infinity;
  let failures = 0;
  return (message) => {
    failures++;
    const now = Date.now();
    if (now - last < periodMs) return;
    last = now;
    const n = failures;
    failures = 0;
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
