// OTLP/protobuf for the export thread (export-worker.mjs): an ExportTraceServiceRequest written from the
// SDK's ReadableSpans in one pass into one reused buffer. The bytes are those of OpenTelemetry's own
// `ProtobufTraceSerializer` (@opentelemetry/otlp-transformer) for the same spans, field by field and in
// the same order (tests/unit/otlp-proto.test.ts checks it on random spans); only the work differs.
// The official serializer sizes the request in a first pass and writes it in a second, and turns every
// hex id into a new Uint8Array in each: 40% of the export thread's CPU went there (bench/RESULTS.md,
// "Traces"). Here each message's length is written in place once its body is (a
// byte or two kept for it, the body moved in the rare case it needs more), and ids go from hex to bytes
// straight into the buffer. The official OTLP/HTTP exporter sends the bytes (export-worker.mjs).
// Plain JS, like run-spans.mjs: the thread starts without the TypeScript loader. Its types are the
// JSDoc below, checked by `tsc` (checkJs).

/** @typedef {import('@opentelemetry/sdk-trace-base').ReadableSpan} ReadableSpan */
/** @typedef {import('@opentelemetry/api').HrTime} HrTime */
/** @typedef {import('@opentelemetry/api').SpanContext} SpanContext */
/** @typedef {import('./run-spans.mjs').EndedSpan} EndedSpan */
/** @typedef {{ name: string, version?: string, schemaUrl?: string, attributes?: Record<string, unknown>, droppedAttributesCount?: number }} Scope */

const INITIAL = 256 * 1024;
/** A buffer grown past this by a large batch is let go after it, not kept for the next. */
const KEEP_AT_MOST = 4 * 1024 * 1024;
const MIN_64_BIT_INT = -(2 ** 63);
const MAX_64_BIT_INT = 2 ** 63;
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

let buf = new Uint8Array(INITIAL);
let view = new DataView(buf.buffer);
let pos = 0;
const encoder = new TextEncoder();

/**
 * @param {number} n bytes more
 */
function ensure(n) {
  if (pos + n <= buf.length) return;
  let size = buf.length * 2;
  while (size < pos + n) size *= 2;
  const next = new Uint8Array(size);
  next.set(buf.subarray(0, pos));
  buf = next;
  view = new DataView(buf.buffer);
}

/**
 * @param {number} v
 * @returns {number}
 */
function varintSize(v) {
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5;
}

/**
 * A varint of a whole number in 0..2^32-1 (tags, lengths, counts).
 * @param {number} v
 */
function uvarint(v) {
  ensure(5);
  while (v > 0x7f) {
    buf[pos++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[pos++] = v;
}

/**
 * Any number as protobuf's writer does (int64: two's complement of negatives, 10 bytes).
 * @param {number} value
 */
function varint(value) {
  if (value >= 0 && value <= 0xffffffff) return uvarint(value >>> 0);
  let low;
  let high;
  if (value >= 0) {
    low = value >>> 0;
    high = (value / 0x100000000) >>> 0;
  } else {
    const abs = Math.abs(value);
    low = ~(abs >>> 0) >>> 0;
    high = ~((abs / 0x100000000) >>> 0) >>> 0;
    low = (low + 1) >>> 0;
    if (low === 0) high = (high + 1) >>> 0;
  }
  ensure(10);
  while (high > 0 || low > 0x7f) {
    buf[pos++] = (low & 0x7f) | 0x80;
    low = ((low >>> 7) | (high << 25)) >>> 0;
    high >>>= 7;
  }
  buf[pos++] = low & 0x7f;
}

/**
 * @param {number} field
 * @param {number} wire
 */
function tag(field, wire) {
  uvarint((field << 3) | wire);
}

/**
 * Starts a length-delimited body after its tag: `reserve` bytes kept for its length.
 * @param {number} field
 * @param {number} reserve
 * @returns {number}
 */
function open(field, reserve) {
  tag(field, 2);
  ensure(reserve);
  const at = pos;
  pos += reserve;
  return at;
}

/**
 * Writes the length of the body started at `at` (by `open` with `reserve`), moving the body if its length takes another number of bytes.
 * @param {number} at
 * @param {number} reserve
 */
function close(at, reserve) {
  const length = pos - at - reserve;
  const size = varintSize(length);
  if (size !== reserve) {
    ensure(size - reserve);
    buf.copyWithin(at + size, at + reserve, pos);
    pos += size - reserve;
  }
  let v = length;
  let p = at;
  while (v > 0x7f) {
    buf[p++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[p] = v;
}

/**
 * @param {number} field
 * @param {string} s
 */
function string(field, s) {
  tag(field, 2);
  const n = s.length;
  if (n < 0x80) {
    ensure(n + 1);
    const at = pos++;
    let p = pos;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c > 0x7f) {
        pos = at;
        return utf8(s);
      }
      buf[p++] = c;
    }
    buf[at] = n;
    pos = p;
    return;
  }
  utf8(s);
}

/**
 * A string's length and UTF-8 bytes (lone surrogates as U+FFFD, as TextEncoder writes them).
 * @param {string} s
 */
function utf8(s) {
  const most = s.length * 3;
  const reserve = varintSize(most);
  ensure(reserve + most);
  const at = pos;
  pos += reserve;
  pos += encoder.encodeInto(s, buf.subarray(pos, pos + most)).written;
  close(at, reserve);
}

/**
 * A hex digit's value (other characters as the SDK reads them: each gives some value, never an error).
 * @param {number} c
 * @returns {number}
 */
function hexValue(c) {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  return c - 55;
}

/** `hexValue` of the ASCII characters: a table, not branches that random digits mispredict. */
const HEX = Int32Array.from({ length: 128 }, (_, c) => hexValue(c));
const digit = (/** @type {number} */ c) => (c < 128 ? /** @type {number} */ (HEX[c]) : hexValue(c));

/**
 * An id given in hex (as the API gives it), as bytes.
 * @param {number} field
 * @param {string} hex
 */
function hexBytes(field, hex) {
  tag(field, 2);
  const n = hex.length >>> 1;
  uvarint(n);
  ensure(n);
  for (let i = 0; i < 2 * n; i += 2) buf[pos++] = (digit(hex.charCodeAt(i)) << 4) | digit(hex.charCodeAt(i + 1));
}

/**
 * @param {number} field
 * @param {Uint8Array} b
 */
function bytes(field, b) {
  tag(field, 2);
  uvarint(b.length);
  ensure(b.length);
  buf.set(b, pos);
  pos += b.length;
}

/**
 * @param {number} v
 */
function fixed32(v) {
  ensure(4);
  view.setUint32(pos, v >>> 0, true);
  pos += 4;
}

/**
 * HrTime [s, ns] as fixed64 nanoseconds.
 * @param {number} field
 * @param {HrTime} t
 */
function hrTime(field, t) {
  fixed64Nanos(field, t[0], t[1]);
}

/** Epoch milliseconds as an HrTime's seconds and nanoseconds (`Readable`'s times, and `msTime`). */
const msSeconds = (/** @type {number} */ ms) => Math.trunc(ms / 1000);
const msNanos = (/** @type {number} */ ms) => Math.round((ms % 1000) * 1e6);

/**
 * Epoch milliseconds as fixed64 nanoseconds: the bytes of the HrTime `Readable` gives for them.
 * @param {number} field
 * @param {number} ms
 */
function msTime(field, ms) {
  fixed64Nanos(field, msSeconds(ms), msNanos(ms));
}

/**
 * Seconds and nanoseconds as fixed64 nanoseconds, split so that every product stays exact (as the SDK's writer).
 * @param {number} field
 * @param {number} seconds
 * @param {number} nanos
 */
function fixed64Nanos(field, seconds, nanos) {
  tag(field, 1);
  const lower = (seconds & 0xffff) * 1e9;
  const upper = ((seconds / 0x10000) >>> 0) * 1e9;
  const low = (lower >>> 0) + (((upper & 0xffff) * 0x10000) >>> 0) + nanos;
  const high = Math.floor(lower / 0x100000000) + ((upper / 0x10000) >>> 0) + Math.floor(low / 0x100000000);
  ensure(8);
  view.setUint32(pos, low >>> 0, true);
  view.setUint32(pos + 4, high >>> 0, true);
  pos += 8;
}

/**
 * @param {number} field
 * @param {Record<string, unknown>} attrs
 */
function attributes(field, attrs) {
  const keys = Object.keys(attrs);
  for (let i = 0; i < keys.length; i++) {
    const key = /** @type {string} */ (keys[i]);
    const kv = open(field, 1);
    keyValue(key, attrs[key]);
    close(kv, 1);
  }
}

/**
 * @param {string} key
 * @param {unknown} value
 */
function keyValue(key, value) {
  string(1, key);
  const v = open(2, 1);
  anyValue(value);
  close(v, 1);
}

/**
 * @param {unknown} value
 */
function anyValue(value) {
  // `typeof` once, the branches cast by it (tsc does not narrow through `t`).
  const t = typeof value;
  if (t === 'string') string(1, /** @type {string} */ (value));
  else if (t === 'boolean') {
    tag(2, 0);
    uvarint(value ? 1 : 0);
  } else if (t === 'number') {
    const n = /** @type {number} */ (value);
    if (Number.isInteger(n) && n >= MIN_64_BIT_INT && n < MAX_64_BIT_INT) {
      tag(3, 0);
      varint(n);
    } else {
      tag(4, 1);
      ensure(8);
      view.setFloat64(pos, n, true);
      pos += 8;
    }
  } else if (value instanceof Uint8Array) bytes(7, value);
  else if (Array.isArray(value)) {
    const list = open(5, 1);
    for (const item of value) {
      const v = open(1, 1);
      anyValue(item);
      close(v, 1);
    }
    close(list, 1);
  } else if (t === 'object' && value != null) {
    const list = open(6, 1);
    const o = /** @type {Record<string, unknown>} */ (value);
    for (const k in o) {
      if (!Object.hasOwn(o, k)) continue;
      const kv = open(1, 1);
      keyValue(k, o[k]);
      close(kv, 1);
    }
    close(list, 1);
  }
}

/**
 * @param {number} field
 * @param {number} n
 */
function count(field, n) {
  tag(field, 0);
  varint(n);
}

/**
 * @param {number} traceFlags
 * @param {boolean | undefined} isRemote
 * @returns {number}
 */
function flags(traceFlags, isRemote) {
  return (traceFlags & 0xff) | HAS_IS_REMOTE | (isRemote ? IS_REMOTE : 0);
}

/**
 * A span `Readable` holds: written from its own fields, as the SDK's serializer writes what the getters give.
 * @param {EndedSpan} e
 */
function ended(e) {
  hexBytes(1, e.traceId);
  hexBytes(2, e.spanId);
  if (e.parentSpanId) hexBytes(4, e.parentSpanId);
  string(5, e.name);
  count(6, 1);
  msTime(7, e.start);
  msTime(8, e.end);
  if (e.attributes) attributes(9, e.attributes);
  count(10, 0);
  for (const ev of e.events) {
    const at = open(11, 1);
    msTime(1, ev.at);
    string(2, ev.name);
    if (ev.attributes) attributes(3, ev.attributes);
    count(4, 0);
    close(at, 1);
  }
  count(12, 0);
  for (const l of e.links) {
    const at = open(13, 1);
    hexBytes(1, l.traceId);
    hexBytes(2, l.spanId);
    count(5, 0);
    tag(6, 5);
    fixed32(flags(l.flags, l.remote));
    close(at, 1);
  }
  count(14, 0);
  const st = open(15, 1);
  if (e.status.code === 2 && e.status.message) string(2, e.status.message);
  count(3, e.status.code);
  close(st, 1);
  tag(16, 5);
  fixed32(flags(1, e.parentSpanId !== '' && e.parentRemote));
}

/**
 * @param {ReadableSpan | Readable} s
 */
function span(s) {
  const at = open(2, 2);
  if (s instanceof Readable) {
    ended(s.span);
    return close(at, 2);
  }
  const ctx = s.spanContext();
  hexBytes(1, ctx.traceId);
  hexBytes(2, ctx.spanId);
  const state = ctx.traceState?.serialize();
  if (state) string(3, state);
  const parent = s.parentSpanContext;
  if (parent?.spanId) hexBytes(4, parent.spanId);
  string(5, s.name);
  const kind = s.kind == null ? 0 : s.kind + 1;
  if (kind !== 0) count(6, kind);
  hrTime(7, s.startTime);
  hrTime(8, s.endTime);
  if (s.attributes) attributes(9, s.attributes);
  count(10, s.droppedAttributesCount);
  for (const e of s.events) {
    const ev = open(11, 1);
    hrTime(1, e.time);
    string(2, e.name);
    if (e.attributes) attributes(3, e.attributes);
    count(4, e.droppedAttributesCount || 0);
    close(ev, 1);
  }
  count(12, s.droppedEventsCount);
  for (const l of s.links) {
    const ln = open(13, 1);
    const c = l.context;
    hexBytes(1, c.traceId);
    hexBytes(2, c.spanId);
    const linkState = c.traceState?.serialize();
    if (linkState) string(3, linkState);
    if (l.attributes) attributes(4, l.attributes);
    count(5, l.droppedAttributesCount || 0);
    tag(6, 5);
    fixed32(flags(c.traceFlags, c.isRemote));
    close(ln, 1);
  }
  count(14, s.droppedLinksCount);
  const st = open(15, 1);
  if (s.status.message) string(2, s.status.message);
  count(3, s.status.code);
  close(st, 1);
  tag(16, 5);
  fixed32(flags(ctx.traceFlags, parent?.isRemote));
  close(at, 2);
}

/**
 * @param {Scope} scope
 * @param {readonly (ReadableSpan | Readable)[]} spans
 */
function scopeSpans(scope, spans) {
  const at = open(2, 3);
  const sc = open(1, 1);
  string(1, scope.name);
  if (scope.version) string(2, scope.version);
  if (scope.attributes) attributes(3, scope.attributes);
  if (scope.droppedAttributesCount) count(4, scope.droppedAttributesCount);
  close(sc, 1);
  for (let i = 0; i < spans.length; i++) span(/** @type {ReadableSpan | Readable} */ (spans[i]));
  if (scope.schemaUrl) string(3, scope.schemaUrl);
  close(at, 3);
}

/**
 * ExportTraceServiceRequest: the spans grouped by resource, then by instrumentation scope (each by identity, in order of first appearance).
 * @param {readonly (ReadableSpan | Readable)[]} spans
 * @returns {Uint8Array}
 */
export function serializeSpans(spans) {
  const resources = new Map();
  for (const s of spans) {
    let scopes = resources.get(s.resource);
    if (!scopes) resources.set(s.resource, (scopes = new Map()));
    const list = scopes.get(s.instrumentationScope);
    if (list) list.push(s);
    else scopes.set(s.instrumentationScope, [s]);
  }
  pos = 0;
  for (const [resource, scopes] of resources) {
    const at = open(1, 3);
    const r = open(1, 2);
    if (resource.attributes) attributes(1, resource.attributes);
    count(2, 0);
    close(r, 2);
    for (const [scope, list] of scopes) scopeSpans(scope, list);
    if (resource.schemaUrl) string(3, resource.schemaUrl);
    close(at, 3);
  }
  const out = buf.slice(0, pos);
  if (buf.length > KEEP_AT_MOST) {
    buf = new Uint8Array(INITIAL);
    view = new DataView(buf.buffer);
  }
  return out;
}

/**
 * @param {string} traceId
 * @param {string} spanId
 * @param {number} traceFlags
 * @param {boolean} isRemote
 * @returns {SpanContext}
 */
const context = (traceId, spanId, traceFlags, isRemote) =>
  isRemote ? { traceId, spanId, traceFlags, isRemote } : { traceId, spanId, traceFlags };
/** No links: one shared list (a span's own empty list would be of another type). @type {import('@opentelemetry/api').Link[]} */
const NO_LINKS = [];
/** No events, likewise. @type {import('@opentelemetry/sdk-trace-base').TimedEvent[]} */
const NO_EVENTS = [];
/** @type {(ms: number) => HrTime} */
const toHrTime = (ms) => [msSeconds(ms), msNanos(ms)];

/**
 * An ended span (run-spans.mjs) as the SDK's ReadableSpan, the shape its batch processor and exporters
 * read: one small object per span, its fields made only when read (the JSON exporter reads them all;
 * `serializeSpans` reads the span it holds, and the batch processor only `spanContext()` and `resource`).
 */
export class Readable {
  /**
   * @param {EndedSpan} span
   * @param {ReadableSpan['resource']} resource
   * @param {Scope} scope
   */
  constructor(span, resource, scope) {
    this.span = span;
    this.resource = resource;
    this.instrumentationScope = scope;
  }
  get name() {
    return this.span.name;
  }
  get kind() {
    return 0;
  }
  spanContext() {
    return context(this.span.traceId, this.span.spanId, 1, false);
  }
  get parentSpanContext() {
    const s = this.span;
    return s.parentSpanId ? context(s.traceId, s.parentSpanId, s.parentFlags, s.parentRemote) : undefined;
  }
  get startTime() {
    return toHrTime(this.span.start);
  }
  get endTime() {
    return toHrTime(this.span.end);
  }
  /** @returns {HrTime} */
  get duration() {
    const start = this.startTime;
    const end = this.endTime;
    let d0 = end[0] - start[0];
    let d1 = end[1] - start[1];
    if (d1 < 0) {
      d0 -= 1;
      d1 += 1e9;
    }
    return [d0, d1];
  }
  get status() {
    return this.span.status;
  }
  get attributes() {
    return this.span.attributes;
  }
  get events() {
    const events = this.span.events;
    return events.length === 0
      ? NO_EVENTS
      : events.map((e) => ({ name: e.name, attributes: e.attributes, time: toHrTime(e.at), droppedAttributesCount: 0 }));
  }
  get links() {
    const links = this.span.links;
    return links.length === 0
      ? NO_LINKS
      : links.map((l) => ({ context: context(l.traceId, l.spanId, l.flags, l.remote), attributes: {}, droppedAttributesCount: 0 }));
  }
  get ended() {
    return true;
  }
  get droppedAttributesCount() {
    return 0;
  }
  get droppedEventsCount() {
    return 0;
  }
  get droppedLinksCount() {
    return 0;
  }
}
