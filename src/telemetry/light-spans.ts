/**
 * The main thread's spans (DESIGN §15): what the event loop that serves runs does for a span is to note
 * it. `NotedSpan` is an OpenTelemetry API `Span` that keeps its name, ids, times, attributes, events,
 * links and status as plain data, and once ended hands one compact record (`SpanRecord`) to its sink,
 * the export thread's feed (export-thread.ts). The export thread reads it back as the SDK's
 * `ReadableSpan` and batches and exports it with the SDK's batch processor and OTLP exporter: the
 * batch queue and the OTLP serializer cost the main thread nothing (bench/RESULTS.md, "Traces").
 *
 * Sampling is the SDK's default, parent-based and always on: a root span is sampled, a child is
 * sampled when its parent is (an incoming `traceparent` with flags `00` is followed, and its run is not
 * exported). `OTEL_TRACES_SAMPLER` is not read.
 */
import { SpanStatusCode, TraceFlags, isSpanContextValid, trace, type Attributes, type AttributeValue, type Context, type HrTime, type Link, type Span, type SpanContext, type SpanKind, type SpanOptions, type SpanStatus, type TimeInput } from '@opentelemetry/api';

/** Span ids and trace ids, as the SDK's `IdGenerator` makes them (see `RunTraceIds`). */
export interface Ids {
  generateTraceId(): string;
  generateSpanId(): string;
}

/**
 * An ended span as the export thread gets it; export-worker.mjs reads it back (keep the two in step):
 * name, kind, trace id, span id, parent span id ('' for a root), parent is remote,
 * parent's trace flags, start and end ([seconds, nanoseconds] each, flat), attributes, status code,
 * status message, events ([name, attributes, seconds, nanoseconds] each, or 0), links ([trace id, span
 * id, flags, remote, attributes] each, or 0).
 */
export type SpanRecord = [
  name: string,
  kind: SpanKind,
  traceId: string,
  spanId: string,
  parentSpanId: string,
  parentRemote: boolean,
  parentFlags: number,
  startS: number,
  startNs: number,
  endS: number,
  endNs: number,
  attributes: Attributes,
  statusCode: SpanStatusCode,
  statusMessage: string | undefined,
  events: unknown[] | 0,
  links: unknown[] | 0,
];

/** Starts `NotedSpan`s: the part of the API's `Tracer` that RunTraces uses. */
export class SpanNoter {
  constructor(
    private readonly ids: Ids,
    private readonly sink: (record: SpanRecord) => void,
  ) {}

  startSpan(name: string, options: SpanOptions = {}, context?: Context): Span {
    const parent = context === undefined ? undefined : trace.getSpanContext(context);
    const p = parent !== undefined && isSpanContextValid(parent) ? parent : undefined;
    const sc: SpanContext = {
      traceId: p ? p.traceId : this.ids.generateTraceId(),
      spanId: this.ids.generateSpanId(),
      traceFlags: p ? p.traceFlags & TraceFlags.SAMPLED : TraceFlags.SAMPLED,
    };
    return new NotedSpan(name, options, sc, p, this.sink);
  }
}

export class NotedSpan implements Span {
  private readonly attributes: Attributes = {};
  private events: unknown[] | 0 = 0;
  private links: unknown[] | 0 = 0;
  private status: SpanStatus = { code: SpanStatusCode.UNSET };
  private readonly start: HrTime;
  private readonly kind: SpanKind;
  private ended = false;

  constructor(
    private name: string,
    options: SpanOptions,
    private readonly sc: SpanContext,
    private readonly parent: SpanContext | undefined,
    private readonly sink: (record: SpanRecord) => void,
  ) {
    this.start = toHrTime(options.startTime);
    this.kind = options.kind ?? 0;
    if (options.attributes) this.setAttributes(options.attributes);
    if (options.links) this.addLinks(options.links);
  }

  spanContext(): SpanContext {
    return this.sc;
  }

  setAttribute(key: string, value: AttributeValue): this {
    if (!this.ended && value !== undefined && value !== null) this.attributes[key] = value;
    return this;
  }

  setAttributes(attributes: Attributes): this {
    for (const key in attributes) this.setAttribute(key, attributes[key] as AttributeValue);
    return this;
  }

  addEvent(name: string, attributesOrTime?: Attributes | TimeInput, time?: TimeInput): this {
    if (this.ended) return this;
    const timeOnly = attributesOrTime instanceof Date || typeof attributesOrTime === 'number' || Array.isArray(attributesOrTime);
    const at = toHrTime(timeOnly ? (attributesOrTime as TimeInput) : time);
    (this.events ||= []).push([name, timeOnly ? {} : ((attributesOrTime as Attributes | undefined) ?? {}), at[0], at[1]]);
    return this;
  }

  addLink(link: Link): this {
    const c = link.context;
    (this.links ||= []).push([c.traceId, c.spanId, c.traceFlags, c.isRemote === true, link.attributes ?? {}]);
    return this;
  }

  addLinks(links: Link[]): this {
    for (const link of links) this.addLink(link);
    return this;
  }

  setStatus(status: SpanStatus): this {
    if (!this.ended) this.status = status;
    return this;
  }

  updateName(name: string): this {
    if (!this.ended) this.name = name;
    return this;
  }

  end(endTime?: TimeInput): void {
    if (this.ended) return;
    this.ended = true;
    if ((this.sc.traceFlags & TraceFlags.SAMPLED) === 0) return;
    const end = toHrTime(endTime);
    const p = this.parent;
    this.sink([this.name, this.kind, this.sc.traceId, this.sc.spanId, p ? p.spanId : '', p?.isRemote === true, p ? p.traceFlags : 0, this.start[0], this.start[1], end[0], end[1], this.attributes, this.status.code, this.status.message, this.events, this.links]);
  }

  isRecording(): boolean {
    return !this.ended && (this.sc.traceFlags & TraceFlags.SAMPLED) !== 0;
  }

  recordException(exception: unknown, time?: TimeInput): void {
    const e = exception as { name?: string; message?: string; stack?: string } | string;
    const attributes: Attributes = typeof e === 'string' ? { 'exception.message': e } : { 'exception.type': e?.name ?? 'Error', 'exception.message': e?.message ?? String(e) };
    if (typeof e !== 'string' && e?.stack) attributes['exception.stacktrace'] = e.stack;
    this.addEvent('exception', attributes, time);
  }
}

/** A time as [seconds, nanoseconds] since the epoch: an HrTime as is, a Date or epoch milliseconds converted, none for now. */
function toHrTime(t: TimeInput | undefined): HrTime {
  if (Array.isArray(t)) return t as HrTime;
  const ms = t === undefined ? performance.timeOrigin + performance.now() : t instanceof Date ? t.getTime() : t;
  return [Math.trunc(ms / 1000), Math.round((ms % 1000) * 1e6)];
}
