/**
 * An OTLP/HTTP trace receiver for tests: a node:http server on 127.0.0.1:0 that takes
 * `POST /v1/traces` in either protocol — `application/x-protobuf` (decoded with protobufjs from the
 * OTLP trace messages below, a subset of opentelemetry-proto's `trace.proto`, `common.proto` and
 * `resource.proto` with their field numbers) or `application/json` (OTLP/JSON) — and keeps every span
 * in one plain shape. Tests wait for spans with `waitFor(pred)`, never with sleeps.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import protobuf from 'protobufjs';

const PROTO = `
syntax = "proto3";
package otlp;
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; string schema_url = 3; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; string schema_url = 3; }
message InstrumentationScope { string name = 1; string version = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  bytes parent_span_id = 4;
  string name = 5;
  int32 kind = 6;
  fixed64 start_time_unix_nano = 7;
  fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9;
  uint32 dropped_attributes_count = 10;
  repeated Event events = 11;
  uint32 dropped_events_count = 12;
  repeated Link links = 13;
  uint32 dropped_links_count = 14;
  Status status = 15;
  fixed32 flags = 16;
  message Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }
  message Link { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; repeated KeyValue attributes = 4; uint32 dropped_attributes_count = 5; fixed32 flags = 6; }
}
message Status { string message = 2; int32 code = 3; }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue {
  oneof value {
    string string_value = 1;
    bool bool_value = 2;
    int64 int_value = 3;
    double double_value = 4;
    ArrayValue array_value = 5;
    KeyValueList kvlist_value = 6;
    bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
`;

const Request = protobuf.parse(PROTO, { keepCase: false }).root.lookupType('otlp.ExportTraceServiceRequest');

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client, … */
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
  events: { name: string; timeMs: number; attributes: Record<string, unknown> }[];
  links: { traceId: string; spanId: string }[];
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  resource: Record<string, unknown>;
  /** How it came: 'protobuf' or 'json'. */
  protocol: 'protobuf' | 'json';
}

interface AnyValueJson {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string | { toNumber(): number };
  doubleValue?: number;
  arrayValue?: { values?: AnyValueJson[] };
}

function value(v: AnyValueJson | undefined): unknown {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return typeof v.intValue === 'object' ? v.intValue.toNumber() : Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(value);
  return undefined;
}

function attrs(list: { key: string; value?: AnyValueJson }[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of list ?? []) out[kv.key] = value(kv.value);
  return out;
}

function hex(id: unknown): string {
  if (id === undefined || id === null) return '';
  if (typeof id === 'string') return id; // OTLP/JSON writes ids as hex
  return Buffer.from(id as Uint8Array).toString('hex');
}

function ms(nanos: unknown): number {
  if (nanos === undefined || nanos === null) return 0;
  if (typeof nanos === 'object' && 'toString' in nanos) return Number(BigInt((nanos as { toString(): string }).toString()) / 1_000_000n);
  return Number(BigInt(nanos as string | number) / 1_000_000n);
}

/** The spans of one export request, in either protocol's decoded (camelCase) shape. */
function spansOf(req: any, protocol: 'protobuf' | 'json'): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const resource = attrs(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          name: s.name,
          kind: s.kind ?? 0,
          startMs: ms(s.startTimeUnixNano),
          endMs: ms(s.endTimeUnixNano),
          attributes: attrs(s.attributes),
          events: (s.events ?? []).map((e: any) => ({ name: e.name, timeMs: ms(e.timeUnixNano), attributes: attrs(e.attributes) })),
          links: (s.links ?? []).map((l: any) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
          status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' },
          resource,
          protocol,
        });
      }
    }
  }
  return out;
}

export interface OtlpReceiver {
  /** The traces endpoint: `http://127.0.0.1:PORT/v1/traces`. */
  url: string;
  spans: ReceivedSpan[];
  /** Content types of the requests received. */
  contentTypes: string[];
  /** Resolves with the spans once `pred` holds of the spans received so far (rejects after `timeoutMs`). */
  waitFor(pred: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  let waiters: { pred: (s: ReceivedSpan[]) => boolean; resolve: () => void }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const type = String(req.headers['content-type'] ?? '');
      contentTypes.push(type);
      try {
        if (req.url !== '/v1/traces' || req.method !== 'POST') throw new Error(`unexpected ${req.method} ${req.url}`);
        const decoded = type.includes('json')
          ? spansOf(JSON.parse(body.toString('utf8')), 'json')
          : spansOf(Request.toObject(Request.decode(body), { longs: String }), 'protobuf');
        spans.push(...decoded);
        res.writeHead(200, { 'content-type': type.includes('json') ? 'application/json' : 'application/x-protobuf' });
        res.end(type.includes('json') ? '{}' : Buffer.alloc(0));
      } catch (e) {
        res.writeHead(400, { 'content-type': 'text/plain' });
        res.end(String(e));
      }
      const ready = waiters.filter((w) => w.pred(spans));
      waiters = waiters.filter((w) => !ready.includes(w));
      for (const w of ready) w.resolve();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1/traces`,
    spans,
    contentTypes,
    waitFor(pred, timeoutMs = 10_000) {
      if (pred(spans)) return Promise.resolve(spans);
      return new Promise<ReceivedSpan[]>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters = waiters.filter((w) => w !== waiter);
          reject(new Error(`the spans expected did not arrive within ${timeoutMs} ms; got: ${spans.map((s) => s.name).join(', ')}`));
        }, timeoutMs);
        const waiter = {
          pred,
          resolve: () => {
            clearTimeout(timer);
            resolve(spans);
          },
        };
        waiters.push(waiter);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
