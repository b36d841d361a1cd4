// The export thread's OTLP/protobuf serializer (src/telemetry/otlp-proto.mjs) against OpenTelemetry's
// own (`ProtobufTraceSerializer` of @opentelemetry/otlp-transformer, which the official exporter uses):
// for the same spans, the same bytes. Random spans cover every field the official one writes: ids, trace
// state, parents local and remote, kinds, times, attribute values of every type (strings of any length
// and script, lone surrogates, whole numbers past 2^32 and negative, doubles, bytes, lists, maps, null),
// events, links, status, several resources and scopes.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Readable, serializeSpans } from '../../src/telemetry/otlp-proto.mjs';
import type { EndedSpan } from '../../src/telemetry/run-spans.mjs';

const official = (spans: ReadableSpan[]) => Buffer.from(ProtobufTraceSerializer.serializeRequest(spans) ?? new Uint8Array());
const ours = (spans: ReadableSpan[]) => Buffer.from(serializeSpans(spans));

/** An id in hex, now and then in upper case, of another length or not hex at all (the API's ids are not checked on their way to the serializer). */
const hex = (bytes: number) =>
  fc.oneof(
    { weight: 8, arbitrary: fc.uint8Array({ minLength: bytes, maxLength: bytes }).map((b) => Buffer.from(b).toString('hex')) },
    {
      weight: 1,
      arbitrary: fc.uint8Array({ minLength: bytes, maxLength: bytes }).map((b) => Buffer.from(b).toString('hex').toUpperCase()),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 2 * bytes + 3 }) },
  );
const text = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.string({ minLength: 120, maxLength: 20_000 }),
);
const scalar = fc.oneof(
  text,
  fc.boolean(),
  fc.integer(),
  fc.integer({ min: 0, max: 2 ** 40 }),
  fc.maxSafeInteger(),
  fc.double(),
  fc.constantFrom(2 ** 63, -(2 ** 63), 2 ** 62, -1, 0, 0.5, Number.NaN, Infinity, -Infinity),
  fc.uint8Array({ maxLength: 40 }),
  fc.constant(null),
  fc.constant(undefined),
);
const anyValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalar,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 4 }),
  ),
})).value;
const attributes = fc.dictionary(fc.string({ maxLength: 30 }), anyValue, { maxKeys: 8 });
const hrTime = fc.tuple(fc.integer({ min: 0, max: 4_000_000_000 }), fc.integer({ min: 0, max: 999_999_999 }));
const traceState = fc.option(
  fc.string({ maxLength: 30 }).map((s) => ({ serialize: () => s })),
  { nil: undefined },
);
const context = fc.record({
  traceId: hex(16),
  spanId: hex(8),
  traceFlags: fc.integer({ min: 0, max: 255 }),
  isRemote: fc.option(fc.boolean(), { nil: undefined }),
  traceState,
});

const resources = [
  { attributes: { 'service.name': 'toolgraph', 'telemetry.sdk.language': 'nodejs' } },
  { attributes: { 'service.name': 'другой', n: 3 }, schemaUrl: 'https://opentelemetry.io/schemas/1.28.0' },
  { attributes: {} },
];
const scopes = [
  { name: 'toolgraph', version: '1.0.0' },
  { name: 'other', version: '', schemaUrl: 'https://example.com/s' },
  { name: 'with-attributes', attributes: { a: 1 }, droppedAttributesCount: 2 },
];

const span = fc
  .record({
    name: text,
    kind: fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined }),
    ctx: context,
    parent: fc.option(fc.record({ spanId: fc.oneof(hex(8), fc.constant('')), isRemote: fc.option(fc.boolean(), { nil: undefined }) }), {
      nil: undefined,
    }),
    startTime: hrTime,
    endTime: hrTime,
    attributes: fc.option(attributes, { nil: undefined }),
    events: fc.array(
      fc.record({
        name: text,
        time: hrTime,
        attributes: fc.option(attributes, { nil: undefined }),
        droppedAttributesCount: fc.option(fc.nat(5), { nil: undefined }),
      }),
      { maxLength: 3 },
    ),
    links: fc.array(
      fc.record({
        context,
        attributes: fc.option(attributes, { nil: undefined }),
        droppedAttributesCount: fc.option(fc.nat(5), { nil: undefined }),
      }),
      { maxLength: 3 },
    ),
    status: fc.oneof(fc.record({ code: fc.constantFrom(0, 1) }), fc.record({ code: fc.constant(2), message: text })),
    dropped: fc.tuple(fc.nat(300), fc.nat(3), fc.nat(3)),
    resource: fc.nat(resources.length - 1),
    scope: fc.nat(scopes.length - 1),
  })
  .map(
    (s) =>
      ({
        name: s.name,
        kind: s.kind,
        spanContext: () => s.ctx,
        parentSpanContext: s.parent
          ? { traceId: s.ctx.traceId, spanId: s.parent.spanId, traceFlags: 1, isRemote: s.parent.isRemote }
          : undefined,
        startTime: s.startTime,
        endTime: s.endTime,
        duration: [0, 0],
        attributes: s.attributes,
        events: s.events,
        links: s.links,
        status: s.status,
        droppedAttributesCount: s.dropped[0],
        droppedEventsCount: s.dropped[1],
        droppedLinksCount: s.dropped[2],
        resource: resources[s.resource],
        instrumentationScope: scopes[s.scope],
        ended: true,
      }) as unknown as ReadableSpan,
  );

/** Spans as run-spans.mjs ends them (times in epoch ms, fractions too), held by a `Readable`. */
const msTime = fc.oneof(
  fc.integer({ min: 1_700_000_000_000, max: 1_900_000_000_000 }),
  fc.double({ min: 1_700_000_000_000, max: 1_900_000_000_000, noNaN: true }),
);
const flat = fc.dictionary(fc.string({ maxLength: 30 }), fc.oneof(text, fc.integer(), fc.double(), fc.boolean()), { maxKeys: 8 });
const endedSpan = fc
  .record({
    name: text,
    traceId: hex(16),
    spanId: hex(8),
    parentSpanId: fc.oneof(hex(8), fc.constant('')),
    parentRemote: fc.boolean(),
    parentFlags: fc.constantFrom(0, 1),
    start: msTime,
    end: msTime,
    attributes: flat,
    status: fc.oneof(fc.constant({ code: 0 as const }), fc.record({ code: fc.constant(2 as const), message: text })),
    events: fc.array(fc.record({ name: text, at: msTime, attributes: flat }), { maxLength: 3 }),
    links: fc.array(fc.record({ traceId: hex(16), spanId: hex(8), flags: fc.constantFrom(0, 1), remote: fc.boolean() }), { maxLength: 2 }),
  })
  .map((s) => s as EndedSpan);

/** A span as the export thread makes them (export-worker.mjs's `readable`). */
function toolSpan(i: number, extra: Record<string, string | number> = {}): ReadableSpan {
  const ctx = {
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    spanId: `00f067aa0ba902${(i % 256).toString(16).padStart(2, '0')}`,
    traceFlags: 1,
  };
  return {
    name: 'execute_tool echo',
    kind: 0,
    spanContext: () => ctx,
    parentSpanContext: { traceId: ctx.traceId, spanId: '53995c3f42cd8ad8', traceFlags: 1 },
    startTime: [1_764_633_600, 123_000_000 + i],
    endTime: [1_764_633_600, 125_000_000 + i],
    duration: [0, 2_000_000],
    status: { code: 0 },
    attributes: {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'echo',
      'gen_ai.tool.call.id': `c${i}`,
      'toolgraph.run.id': 'run_0123456789',
      'toolgraph.attempt': 1,
      'toolgraph.wait_ms': 0,
      ...extra,
    },
    events: [],
    links: [],
    ended: true,
    resource: resources[0],
    instrumentationScope: scopes[0],
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  } as unknown as ReadableSpan;
}

describe('OTLP/protobuf serializer (otlp-proto.mjs)', () => {
  it('writes the bytes of the official serializer for random spans', () => {
    fc.assert(
      fc.property(fc.array(span, { maxLength: 12 }), (spans) => {
        expect(ours(spans).equals(official(spans))).toBe(true);
      }),
      { numRuns: 400 },
    );
  });

  it('writes a Readable from the span it holds, as the official serializer writes what its getters give', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(endedSpan, fc.nat(1)), { maxLength: 12 }), (list) => {
        const spans = list.map(
          ([s, r]) =>
            new Readable(s, resources[r] as unknown as ReadableSpan['resource'], scopes[r] as { name: string }) as unknown as ReadableSpan,
        );
        expect(ours(spans).equals(official(spans))).toBe(true);
      }),
      { numRuns: 400 },
    );
  });

  it('writes the bytes of the official serializer for the spans the export thread makes, in a batch of 512', () => {
    const spans = Array.from({ length: 512 }, (_, i) => toolSpan(i));
    const bytes = ours(spans);
    expect(bytes.length).toBeGreaterThan(512 * 150);
    expect(bytes.equals(official(spans))).toBe(true);
  });

  it('grows its buffer for a batch past it, and the bytes of one request are its own', () => {
    const big = Array.from({ length: 8 }, (_, i) => toolSpan(i, { 'error.type': 'x'.repeat(700_000 + i) }));
    const small = [toolSpan(1)];
    const first = ours(small);
    const large = ours(big);
    expect(large.length).toBeGreaterThan(5_600_000);
    expect(large.equals(official(big))).toBe(true);
    const again = ours(small);
    expect(again.equals(official(small))).toBe(true);
    expect(first.equals(again)).toBe(true);
    // The bytes handed out stay as they were while the next request is written.
    const held = serializeSpans(small);
    const copy = Buffer.from(held);
    serializeSpans([toolSpan(2, { 'error.type': 'y'.repeat(300) })]);
    expect(Buffer.from(held).equals(copy)).toBe(true);
  });

  it('writes an empty request for no spans, as the official one', () => {
    expect(ours([]).length).toBe(0);
    expect(official([]).length).toBe(0);
  });
});
