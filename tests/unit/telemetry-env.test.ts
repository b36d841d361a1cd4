// Which tracing the standard OpenTelemetry variables ask for (DESIGN §15), and the errors for ones
// that cannot be used. Pure: nothing of OpenTelemetry is loaded here.
import { describe, expect, it } from 'vitest';
import { tracingOptionsFromEnv, TracingConfigError } from '../../src/telemetry/index.js';

describe('tracingOptionsFromEnv', () => {
  it('asks for no tracing without an endpoint, or when switched off', () => {
    expect(tracingOptionsFromEnv({})).toBeUndefined();
    expect(tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' })).toBeUndefined();
    expect(tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
  });

  it('takes the base endpoint plus /v1/traces, or the traces endpoint as is (which wins)', () => {
    expect(tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toEqual({
      url: 'http://c:4318/v1/traces',
      protocol: 'http/protobuf',
      serviceName: 'toolgraph',
    });
    expect(tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://c/otlp/' })?.url).toBe('https://c/otlp/v1/traces');
    expect(
      tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:1234/custom' })
        ?.url,
    ).toBe('http://t:1234/custom');
  });

  it('takes the protocol (the traces one first) and the service name', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'agents' };
    expect(tracingOptionsFromEnv(env)).toEqual({ url: 'http://c:4318/v1/traces', protocol: 'http/json', serviceName: 'agents' });
    expect(tracingOptionsFromEnv({ ...env, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' })?.protocol).toBe('http/protobuf');
  });

  it('refuses what it cannot use, naming the variable', () => {
    expect(() => tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(
      new TracingConfigError('OTEL_EXPORTER_OTLP_PROTOCOL must be one of http/protobuf, http/json, got "grpc"'),
    );
    expect(() => tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'c:4318' })).toThrow(
      /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http\(s\) URL, got "c:4318"/,
    );
    expect(() => tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' })).toThrow(TracingConfigError);
  });
});
