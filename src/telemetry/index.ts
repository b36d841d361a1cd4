/**
 * Traces (DESIGN §15): what the rest of toolgraph sees of them. This module imports nothing of
 * OpenTelemetry: `startTracing` loads the implementation (tracing.ts, and with it the OpenTelemetry
 * packages) with a dynamic import, and `tracingFromEnv` does so only when an OTLP endpoint is
 * configured by the standard environment variables. Without one, no OpenTelemetry module is loaded.
 *
 * @example
 * const tracing = await tracingFromEnv(process.env); // undefined without OTEL_EXPORTER_OTLP_*ENDPOINT
 * const service = new Service({ config, store, ...(tracing ? { tracing } : {}) });
 */
import type { Engine, RunListener } from '../engine/engine.js';
import type { Executor } from '../executors/types.js';

export type OtlpProtocol = 'http/protobuf' | 'http/json';
export const OTLP_PROTOCOLS: readonly OtlpProtocol[] = ['http/protobuf', 'http/json'];

export interface TracingOptions {
  /** The OTLP/HTTP traces endpoint, used as is (e.g. `http://127.0.0.1:4318/v1/traces`). */
  url: string;
  /** @default 'http/protobuf' */
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
  /** Exports every ended span now. */
  flush(): Promise<void>;
  /** Flushes (for at most `timeoutMs`, default 2000: a dead collector does not hold an exit) and stops exporting. */
  shutdown(timeoutMs?: number): Promise<void>;
}

export class TracingConfigError extends Error {}

/**
 * The tracing options the standard OpenTelemetry variables ask for, or undefined when they ask for
 * none: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (plus
 * `/v1/traces`); `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL`;
 * `OTEL_SERVICE_NAME`. `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off.
 */
export function tracingOptionsFromEnv(env: NodeJS.ProcessEnv): TracingOptions | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  if (env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none') return undefined;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!traces && !base) return undefined;
  const url = traces || `${(base as string).replace(/\/+$/, '')}/v1/traces`;
  const name = traces ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TracingConfigError(`${name} must be an http(s) URL, got ${JSON.stringify(traces || base)}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new TracingConfigError(`${name} must be an http(s) URL, got ${JSON.stringify(traces || base)}`);
  }
  const protocolVar = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = env[protocolVar]?.trim() || 'http/protobuf';
  if (!(OTLP_PROTOCOLS as readonly string[]).includes(protocol)) {
    throw new TracingConfigError(`${protocolVar} must be one of ${OTLP_PROTOCOLS.join(', ')}, got ${JSON.stringify(protocol)}`);
  }
  return { url, protocol: protocol as OtlpProtocol, serviceName: env.OTEL_SERVICE_NAME?.trim() || 'toolgraph' };
}

/** Loads the OpenTelemetry packages and starts exporting traces. */
export async function startTracing(opts: TracingOptions): Promise<Tracing> {
  const { createTracing } = await import('./tracing.js');
  return createTracing(opts);
}

/**
 * `startTracing` with the options of the environment (and `extra`), or undefined (nothing loaded)
 * when it asks for none. Throws `TracingConfigError` for a variable it cannot use.
 */
export async function tracingFromEnv(env: NodeJS.ProcessEnv = process.env, extra: Partial<TracingOptions> = {}): Promise<Tracing | undefined> {
  const opts = tracingOptionsFromEnv(env);
  return opts ? startTracing({ ...opts, ...extra }) : undefined;
}
