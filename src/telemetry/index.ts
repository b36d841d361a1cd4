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
import { OTLP_PROTOCOLS, type OtlpProtocol, type Tracing, type TracingOptions } from './types.js';

export { OTLP_PROTOCOLS, type OtlpProtocol, type Tracing, type TracingOptions } from './types.js';

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
export async function tracingFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  extra: Partial<TracingOptions> = {},
): Promise<Tracing | undefined> {
  const opts = tracingOptionsFromEnv(env);
  return opts ? startTracing({ ...opts, ...extra }) : undefined;
}
