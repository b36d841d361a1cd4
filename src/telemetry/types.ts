/**
 * The shapes of traces (DESIGN §15) that the rest of toolgraph sees: the options and the `Tracing`
 * object. Nothing of OpenTelemetry here (see index.ts).
 */
import type { RunEvent } from '../core/events.js';
import type { Engine, RunListener } from '../engine/engine.js';
import type { Executor } from '../executors/types.js';

export type OtlpProtocol = 'http/protobuf' | 'http/json';
export const OTLP_PROTOCOLS: readonly OtlpProtocol[] = ['http/protobuf', 'http/json'];

export interface TracingOptions {
  /** The OTLP/HTTP traces endpoint, used as is (e.g. `http://127.0.0.1:4318/v1/traces`). */
  url: string;
  /**
   * @default 'http/protobuf' (DESIGN §15), also the cheaper: its serializer takes about half the CPU
   * per span of `http/json`'s, and its requests are 2.5 times smaller (bench/RESULTS.md, "Traces").
   */
  protocol?: OtlpProtocol;
  /** The resource's `service.name`. @default 'toolgraph' */
  serviceName?: string;
  /** Extra headers on each export (the exporter also reads `OTEL_EXPORTER_OTLP_HEADERS`). */
  headers?: Record<string, string>;
  /**
   * The batch span processor: spans wait in a bounded queue and go out in batches; once the queue is
   * full, new spans are dropped (a slow or dead collector never holds a run). Defaults are the SDK's
   * (its `OTEL_BSP_*` variables, else 2048 spans, batches of 512, every 5 s, 30 s per export).
   */
  batch?: { maxQueueSize?: number; maxExportBatchSize?: number; scheduledDelayMillis?: number; exportTimeoutMillis?: number };
  /** How long one export request may take. @default 10000 */
  exportTimeoutMs?: number;
  /**
   * Told when an export fails (a collector down, say), at most once a minute, with how many failed
   * since. It becomes OpenTelemetry's global error handler, so it is one per process.
   */
  onExportError?: (message: string, failures: number) => void;
  /**
   * Told when spans are dropped (the export thread fell behind, its queue was full, or a run being
   * traced was let go), at most once a minute, with how many since and the last message.
   */
  onDropped?: (message: string, spans: number) => void;
}

/** Tracing as the service uses it; made by `startTracing`. */
export interface Tracing {
  /** Wraps the engine's executor: each attempt carries its span's `traceparent` (the `http` executor sends it). */
  instrument(executor: Executor): Executor;
  /** Listens to the engine's events; each run and each attempt becomes a span. */
  attach(engine: Pick<Engine, 'onEvent'>): () => void;
  /** The listener `attach` registers (for an engine held another way). */
  readonly listener: RunListener;
  /**
   * Reserves a run id whose run span will be a child of this W3C `traceparent` (an invalid one is
   * ignored: undefined). Call it right before submitting the run under that id.
   */
  continueTrace(traceparent: string): string | undefined;
  /**
   * A run about to be resumed from its events (a restart, a takeover by another replica), given its
   * `run.created`: its spans go on in the trace it began in.
   */
  resumed(created: RunEvent): void;
  /** Exports every ended span now. */
  flush(): Promise<void>;
  /** Flushes (for at most `timeoutMs`, default 2000: a dead collector does not hold an exit) and stops exporting. */
  shutdown(timeoutMs?: number): Promise<void>;
}
