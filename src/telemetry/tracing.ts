/**
 * The OpenTelemetry side of traces (DESIGN §15), loaded only by `startTracing` (index.ts): a tracer
 * provider of its own (nothing is registered globally, so several can live in one process), a batch
 * span processor with a bounded queue, and the OTLP/HTTP exporter of the protocol asked for
 * (`http/protobuf` or `http/json`). An export that fails is the processor's business: the spans of that
 * batch are dropped, and no run waits for a collector.
 */
import { setGlobalErrorHandler } from '@opentelemetry/core';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ExecuteRequest, ExecuteResult, Executor } from '../executors/types.js';
import type { Tracing, TracingOptions } from './types.js';
import { RunTraceIds, RunTraces } from './spans.js';

/** The version that goes with the tracer's name (the instrumentation scope). */
const SCOPE_VERSION = '0.1.0';

export async function createTracing(opts: TracingOptions): Promise<Tracing> {
  const exporterConfig = {
    url: opts.url,
    timeoutMillis: opts.exportTimeoutMs ?? 10_000,
    ...(opts.headers ? { headers: opts.headers } : {}),
  };
  // Only the protocol's exporter is loaded.
  const { OTLPTraceExporter } = (opts.protocol ?? 'http/protobuf') === 'http/json' ? await import('@opentelemetry/exporter-trace-otlp-http') : await import('@opentelemetry/exporter-trace-otlp-proto');
  const exporter = new OTLPTraceExporter(exporterConfig);
  const ids = new RunTraceIds();
  const provider = new BasicTracerProvider({
    idGenerator: ids,
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': opts.serviceName ?? 'toolgraph' })),
    spanProcessors: [new BatchSpanProcessor(exporter, opts.batch ?? {})],
  });
  if (opts.onExportError) setGlobalErrorHandler(throttled(opts.onExportError, 60_000));
  const traces = new RunTraces(provider.getTracer('toolgraph', SCOPE_VERSION), Date.now, ids);
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
    flush: () => provider.forceFlush(),
    shutdown(timeoutMs = 2000) {
      stopped ??= within(provider.shutdown(), timeoutMs);
      return stopped;
    },
  };
}

/** The first error at once, then at most one report per `periodMs`, with the count since the last one. */
function throttled(report: (message: string, failures: number) => void, periodMs: number): (err: unknown) => void {
  let last = -Infinity;
  let failures = 0;
  return (err) => {
    failures++;
    const now = Date.now();
    if (now - last < periodMs) return;
    last = now;
    const message = err instanceof Error ? err.message : String(err);
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
