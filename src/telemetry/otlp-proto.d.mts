/** See otlp-proto.mjs. */
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { EndedSpan } from './run-spans.mjs';

/** An OTLP ExportTraceServiceRequest in protobuf: the bytes of `ProtobufTraceSerializer.serializeRequest`. */
export declare function serializeSpans(spans: readonly ReadableSpan[]): Uint8Array;

/** An ended span as the SDK's ReadableSpan (its fields made when read); `serializeSpans` writes it from `span`. */
export declare class Readable {
  constructor(span: EndedSpan, resource: unknown, scope: { name: string; version?: string });
  readonly span: EndedSpan;
}
