// Runs and attempts as spans (DESIGN §15), made in the trace export thread from the engine's events.
// The main thread's part is light (trace-feed.ts): its listener puts each event that makes, ends or
// times a span in a flat list of a few values (an "entry": an op code and its fields, below), sent to
// the export thread in batches; `RunSpans` here reads the entries and makes the spans, which the
// thread exports (export-worker.mjs). Plain JS, like the store's writes-codec.mjs: the thread starts
// without the TypeScript loader that runs the sources under tsx or vitest. Its types are the JSDoc
// below, checked by `tsc` (checkJs) like the TypeScript around it.
//
// The spans: `run.created` starts the run span `toolgraph.run`; an attempt's span `execute_tool <tool>`
// (a direct child of the run span) starts with `call.started`, or earlier when the attempt was handed
// its `traceparent` first (an idempotent call of a grouped submission starts before its `call.started`
// is published), and ends with the attempt (`call.succeeded`, `call.failed`, `call.retry_scheduled`,
// `call.cancelled`); a compensation's span starts when its attempt is handed its `traceparent` (it has
// no `call.started`) and ends with `call.compensated`; `run.completed` ends the run span. Times are the
// events' own (`at`), so the spans say what the event log says. A span is made whole when it ends.
import { hash, randomFillSync } from 'node:crypto';

/** @typedef {string | number} EntryValue An entry's values: op codes, ids, times, counts, names. */
/** @typedef {{ traceId: string, spanId: string, flags: number }} ParsedTraceparent */
/** @typedef {Record<string, string | number | boolean>} Attributes */
/**
 * A span once it ended: times in epoch milliseconds; status code 0 (unset) or 2 (error).
 * @typedef {object} EndedSpan
 * @property {string} name
 * @property {string} traceId
 * @property {string} spanId
 * @property {string} parentSpanId '' for a root span
 * @property {boolean} parentRemote
 * @property {number} parentFlags
 * @property {number} start
 * @property {number} end
 * @property {Attributes} attributes
 * @property {{ code: 0 } | { code: 2, message: string }} status
 * @property {{ name: string, at: number, attributes: Attributes }[]} events
 * @property {{ traceId: string, spanId: string, flags: number, remote: boolean }[]} links
 */
/**
 * An attempt's span, open.
 * @typedef {object} Attempt
 * @property {string} runId
 * @property {string} callId
 * @property {number} n
 * @property {string} tool
 * @property {number} at
 * @property {string | undefined} spanId
 * @property {string} parent
 * @property {number | undefined} waitMs
 * @property {number | undefined} waitFrom
 * @property {boolean} compensation
 */
/**
 * A call of a traced run.
 * @typedef {object} CallTrace
 * @property {number | undefined} readyAt
 * @property {Attempt | undefined} open
 * @property {boolean} succeeded
 * @property {Attempt | undefined} compensation
 */
/**
 * A traced run.
 * @typedef {object} RunTrace
 * @property {string} id
 * @property {ParsedTraceparent | undefined} parent
 * @property {string} traceId
 * @property {boolean} sampled
 * @property {string | undefined} tenant
 * @property {{ spanId: string, start: number, attributes: Attributes, links: EndedSpan['links'] } | undefined} span
 * @property {boolean} ended
 * @property {Map<string, CallTrace>} calls
 */

export const RUN_SPAN = 'toolgraph.run';
/** The span event for a time an attempt waited on limits (ready → start). */
export const LIMIT_WAIT_EVENT = 'toolgraph.limit_wait';
/** The GenAI operation (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/#execute-tool-span). */
export const EXECUTE_TOOL = 'execute_tool';

export const ATTR = Object.freeze({
  runId: 'toolgraph.run.id',
  tenant: 'toolgraph.tenant',
  runStatus: 'toolgraph.run.status',
  attempt: 'toolgraph.attempt',
  waitMs: 'toolgraph.wait_ms',
  /** On the span of a compensation (DESIGN §6): the attempt of the tool that undoes the call. */
  compensation: 'toolgraph.compensation',
  /** On a run span started again by a replan (the first one ended with `needs_replan`). */
  replanned: 'toolgraph.run.replanned',
  operation: 'gen_ai.operation.name',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  errorType: 'error.type',
});

/**
 * The entries, each an op code and then its fields, in one flat list (keep trace-feed.ts in step);
 * `at` is counted from the list's base (see `RunSpans.apply`):
 * CREATED runId at tenant; READY runId callId at (`call.ready`, or a `before_call` hook's decision:
 * the wait for limits starts then); STARTED runId callId at attempt tool; SUCCEEDED runId callId at;
 * ENDED runId callId at code message (an attempt that failed, is retried or was cancelled; `code` ''
 * when no error is given); COMPENSATED runId callId at code message (`code` '' when it succeeded);
 * COMPLETED runId at status; REPLANNED runId at; ATTEMPT runId callId at attempt tool spanId (the
 * attempt was handed to its executor; `spanId` that of the `traceparent` it was handed, or '' when its
 * executor sends none: the span's id is drawn here); PARENT runId traceparent tenant expect (a
 * run's incoming trace, '' for none, before its first span: `expect` 1 for a reserved run id whose
 * `run.created` is still to come); FORGET runId (the run's spans are let go: the feed had no room);
 * NAME key runId (the feed's entries name the run by `key`, a small number, from here on: its run id,
 * some 30 characters, would be most of the text sent; a `runId` of an entry is either).
 */
export const OP = Object.freeze({
  CREATED: 0,
  READY: 1,
  STARTED: 2,
  SUCCEEDED: 3,
  ENDED: 4,
  COMPENSATED: 5,
  COMPLETED: 6,
  REPLANNED: 7,
  ATTEMPT: 8,
  PARENT: 9,
  FORGET: 10,
  NAME: 11,
});
/** How many values each op takes, its code included. */
const WIDTH = [4, 4, 6, 4, 6, 6, 4, 3, 7, 5, 2, 3];

/** How long a run id reserved (or seen first by an attempt) may wait for its `run.created`. */
const PENDING_MS = 60_000;

/**
 * Lets go of the runs of `pending` (run id → when it was first seen, oldest first) that waited longer
 * than a minute for their `run.created` (a reserved id whose submission failed, a run the store
 * refused after its early attempts started): their spans never end, so are never exported. The feed
 * and `RunSpans` each keep their own.
 */
/**
 * @param {Map<string, number>} pending
 * @param {Map<string, unknown>} runs
 * @param {number} now
 */
export function sweepPending(pending, runs, now) {
  if (pending.size === 0) return;
  const before = now - PENDING_MS;
  for (const [runId, since] of pending) {
    if (since > before) break;
    pending.delete(runId);
    runs.delete(runId);
  }
}

/** At most this many needs_replan runs keep their trace for a replan (the oldest are let go). */
const MAX_AWAITING_REPLAN = 10_000;

/** A run that ended with `needs_replan` is kept for its replan; past MAX_AWAITING_REPLAN the oldest is let go. */
/**
 * @param {Map<string, true>} awaiting
 * @param {Map<string, unknown>} runs
 * @param {string} runId
 */
export function awaitReplan(awaiting, runs, runId) {
  awaiting.set(runId, true);
  if (awaiting.size > MAX_AWAITING_REPLAN) {
    const oldest = /** @type {string} */ (awaiting.keys().next().value);
    awaiting.delete(oldest);
    runs.delete(oldest);
  }
}

/** At most this many tools' span names are kept (one string per tool, not one per span). */
const MAX_SPAN_NAMES = 1000;

/** A W3C `traceparent` as { traceId, spanId, flags }, or undefined for one that is not valid (as OpenTelemetry's parser). */
/**
 * @param {string} text
 * @returns {ParsedTraceparent | undefined}
 */
export function parseTraceparent(text) {
  const m = /^\s?([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?\s?$/.exec(text);
  if (!m) return undefined;
  // Version ff is invalid; version 00 has exactly four fields.
  if (m[1] === 'ff' || (m[1] === '00' && m[5])) return undefined;
  const [, , traceId = '', spanId = '', flags = ''] = m;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId, flags: parseInt(flags, 16) };
}

/** The trace id of a run's own trace: 16 bytes of the SHA-256 of its id (wherever the run goes on, its spans join it). */
/**
 * @param {string} runId
 * @returns {string}
 */
export function runTraceId(runId) {
  // The one-shot `hash` (a `createHash` object per run cost ten times as much); hex of the first 16
  // bytes, not a slice of all 64 digits: a flat string, which the exporter reads faster.
  return hash('sha256', runId, 'buffer').toString('hex', 0, 16);
}

/** Random bytes are drawn this many at a time (one `randomFillSync` per 512 span ids). */
const POOL_BYTES = 4096;

/** Random span ids (8 bytes in hex, never all zeros), from a pool of random bytes filled 4 KiB at a time. */
export class SpanIds {
  constructor() {
    this.pool = Buffer.allocUnsafe(POOL_BYTES);
    this.offset = POOL_BYTES;
  }

  /** @returns {string} */
  next() {
    if (this.offset + 8 > POOL_BYTES) {
      randomFillSync(this.pool);
      this.offset = 0;
    }
    const start = this.offset;
    this.offset += 8;
    let zero = true;
    for (let i = start; i < this.offset && zero; i++) zero = this.pool[i] === 0;
    if (zero) this.pool[this.offset - 1] = 1;
    return this.pool.toString('hex', start, this.offset);
  }
}

/**
 * Reads entries and makes spans: `emit` gets each span once it ends, as plain data (see run-spans.d.mts,
 * `EndedSpan`), sampled spans only (a run under an incoming parent with flags 00 makes none).
 */
export class RunSpans {
  /**
   * @param {(span: EndedSpan) => void} emit
   * @param {SpanIds} [ids]
   * @param {() => number} [now]
   */
  constructor(emit, ids = new SpanIds(), now = Date.now) {
    this.emit = emit;
    this.ids = ids;
    this.now = now;
    /** @type {Map<string, RunTrace>} */
    this.runs = new Map();
    /** Runs known before their `run.created` (reserved, or started early), with when: see `sweep`. @type {Map<string, number>} */
    this.pending = new Map();
    /** @type {Map<string, true>} */
    this.awaitingReplan = new Map();
    /** @type {Map<string, string>} */
    this.names = new Map();
    /** Run ids by the keys that NAME entries gave them, until their run is made (see `idOf`). @type {Map<string, string>} */
    this.aliases = new Map();
    /** Spans let go unended (FORGET), since the caller last read and zeroed this. */
    this.dropped = 0;
    /** The base of the entries being read (see `apply`). */
    this.base = 0;
  }

  /** How many runs are traced now. */
  get size() {
    return this.runs.size;
  }

  /**
   * Reads the entries of `q` from `from` on (whole entries; throws on one it cannot read), their times
   * counted from `base` (epoch ms). An entry's fields are read as the op says they are (trace-feed.ts
   * writes them so); the casts below check nothing at run time.
   * @param {readonly EntryValue[]} q
   * @param {number} [base]
   * @param {number} [from]
   */
  apply(q, base = 0, from = 0) {
    const length = q.length;
    this.base = base;
    let i = from;
    while (i < length) {
      const op = /** @type {number} */ (q[i]);
      const width = WIDTH[op];
      if (width === undefined || i + width > length) throw new Error(`trace entry ${i}: op ${String(op)} is not one, or is cut short`);
      const runId = /** @type {string} */ (q[i + 1]);
      switch (op) {
        case OP.CREATED:
          this.created(runId, base + /** @type {number} */ (q[i + 2]), /** @type {string} */ (q[i + 3]));
          break;
        case OP.PARENT:
          this.parent(runId, /** @type {string} */ (q[i + 2]), /** @type {string} */ (q[i + 3]), /** @type {number} */ (q[i + 4]));
          break;
        case OP.COMPLETED:
          this.completed(runId, this.run(runId), base + /** @type {number} */ (q[i + 2]), /** @type {string} */ (q[i + 3]));
          break;
        case OP.REPLANNED:
          this.replanned(runId, this.run(runId), base + /** @type {number} */ (q[i + 2]));
          break;
        case OP.FORGET:
          this.forget(runId);
          break;
        case OP.NAME:
          this.aliases.set(runId, /** @type {string} */ (q[i + 2]));
          break;
        default: {
          const known = this.runs.get(runId);
          // An attempt of a run not seen yet (started before its `run.created`): it waits for that like a reserved one.
          if (known === undefined && op === OP.ATTEMPT) this.expect(runId);
          this.callEntry(op, runId, known ?? this.run(runId), q, i);
        }
      }
      i += width;
    }
  }

  /**
   * An entry of a call: READY, STARTED, SUCCEEDED, ENDED, COMPENSATED or ATTEMPT.
   * @param {number} op
   * @param {string} runId
   * @param {RunTrace} run
   * @param {readonly EntryValue[]} q
   * @param {number} i
   */
  callEntry(op, runId, run, q, i) {
    const callId = /** @type {string} */ (q[i + 2]);
    const c = callOf(run, callId);
    const at = this.base + /** @type {number} */ (q[i + 3]);
    switch (op) {
      case OP.READY:
        c.readyAt = at;
        break;
      case OP.STARTED:
        this.started(runId, run, c, callId, at, /** @type {number} */ (q[i + 4]), /** @type {string} */ (q[i + 5]));
        break;
      case OP.SUCCEEDED:
        c.succeeded = true;
        this.endAttempt(run, c, at, '', '');
        break;
      case OP.ENDED:
        this.endAttempt(run, c, at, /** @type {string} */ (q[i + 4]), /** @type {string} */ (q[i + 5]));
        break;
      case OP.COMPENSATED:
        if (c.compensation) {
          this.emitAttempt(run, c.compensation, at, /** @type {string} */ (q[i + 4]), /** @type {string} */ (q[i + 5]));
          c.compensation = undefined;
        }
        break;
      case OP.ATTEMPT:
        this.attempt(runId, run, c, {
          callId,
          at,
          n: /** @type {number} */ (q[i + 4]),
          tool: /** @type {string} */ (q[i + 5]),
          spanId: /** @type {string} */ (q[i + 6]),
        });
        break;
    }
  }

  /** The run's trace; a run first seen midway (its thread started again, say) is traced from here. */
  /**
   * @param {string} runId
   * @returns {RunTrace}
   */
  run(runId) {
    let run = this.runs.get(runId);
    if (!run) {
      run = newRun(this.idOf(runId), undefined);
      this.runs.set(runId, run);
    }
    return run;
  }

  /**
   * @param {string} runId
   * @param {string} traceparent '' for none
   * @param {string} tenant
   * @param {number} expect 1 for a reserved run id whose `run.created` is still to come
   */
  parent(runId, traceparent, tenant, expect) {
    if (this.runs.has(runId)) return;
    const run = newRun(this.idOf(runId), traceparent ? parseTraceparent(traceparent) : undefined);
    if (tenant) run.tenant = tenant;
    this.runs.set(runId, run);
    if (expect) this.expect(runId);
  }

  /**
   * @param {string} runId
   * @param {number} at
   * @param {string} tenant
   */
  created(runId, at, tenant) {
    const run = this.run(runId);
    this.pending.delete(runId);
    run.tenant = tenant;
    if (run.span) run.span.attributes[ATTR.tenant] = tenant;
    else this.runSpan(runId, run, at);
    this.sweep();
  }

  /**
   * @param {string} runId
   * @param {RunTrace} run
   * @param {CallTrace} c
   * @param {string} callId
   * @param {number} at
   * @param {number} n the attempt
   * @param {string} tool
   */
  started(runId, run, c, callId, at, n, tool) {
    const waitMs = c.readyAt === undefined ? 0 : Math.max(0, at - c.readyAt);
    let a = c.open !== undefined && c.open.n === n ? c.open : undefined;
    if (!a) {
      this.endAttempt(run, c, at, '', '');
      a = c.open = this.newAttempt(runId, run, { callId, n, tool, at, spanId: undefined, compensation: false });
    }
    a.waitMs = waitMs;
    if (waitMs > 0) a.waitFrom = c.readyAt;
    c.readyAt = undefined;
  }

  /** The attempt was handed to its executor (with a `traceparent` of span id `spanId`, or '' for none): its span starts now unless `call.started` started it. */
  /**
   * @param {string} runId
   * @param {RunTrace} run
   * @param {CallTrace} c
   * @param {{ callId: string, at: number, n: number, tool: string, spanId: string }} e
   */
  attempt(runId, run, c, { callId, at, n, tool, spanId }) {
    if (c.succeeded) {
      if (c.compensation) this.emitAttempt(run, c.compensation, at, '', '');
      c.compensation = this.newAttempt(runId, run, { callId, n, tool, at, spanId, compensation: true });
    } else if (c.open !== undefined && c.open.n === n) {
      if (spanId) c.open.spanId = spanId;
    } else {
      this.endAttempt(run, c, at, '', '');
      c.open = this.newAttempt(runId, run, { callId, n, tool, at, spanId, compensation: false });
    }
  }

  /**
   * @param {string} runId
   * @param {RunTrace} run
   * @param {{ callId: string, n: number, tool: string, at: number, spanId: string | undefined, compensation: boolean }} a
   * @returns {Attempt}
   */
  newAttempt(runId, run, { callId, n, tool, at, spanId, compensation }) {
    const span = run.span ?? this.runSpan(runId, run, at);
    return { runId: run.id, callId, n, tool, at, spanId, parent: span.spanId, waitMs: undefined, waitFrom: undefined, compensation };
  }

  /**
   * @param {RunTrace} run
   * @param {CallTrace} c
   * @param {number} at
   * @param {string} code '' when no error is given
   * @param {string} message
   */
  endAttempt(run, c, at, code, message) {
    const a = c.open;
    if (!a) return;
    c.open = undefined;
    this.emitAttempt(run, a, at, code, message);
  }

  /**
   * @param {RunTrace} run
   * @param {Attempt} a
   * @param {number} at
   * @param {string} code
   * @param {string} message
   */
  emitAttempt(run, a, at, code, message) {
    if (!run.sampled) return;
    /** @type {Attributes} */
    const attributes = {
      [ATTR.operation]: EXECUTE_TOOL,
      [ATTR.toolName]: a.tool,
      [ATTR.toolCallId]: a.callId,
      [ATTR.runId]: a.runId,
      [ATTR.attempt]: a.n,
    };
    if (a.waitMs !== undefined) attributes[ATTR.waitMs] = a.waitMs;
    if (a.compensation) attributes[ATTR.compensation] = true;
    if (code) attributes[ATTR.errorType] = code;
    this.emit({
      name: this.spanName(a.tool),
      traceId: run.traceId,
      spanId: a.spanId || this.ids.next(),
      parentSpanId: a.parent,
      parentRemote: false,
      parentFlags: 1,
      start: a.at,
      end: at,
      attributes,
      status: code ? { code: 2, message } : { code: 0 },
      events:
        a.waitFrom !== undefined && a.waitMs !== undefined
          ? [{ name: LIMIT_WAIT_EVENT, at: a.waitFrom, attributes: { [ATTR.waitMs]: a.waitMs } }]
          : [],
      links: [],
    });
  }

  /**
   * @param {string} runId
   * @param {RunTrace} run
   * @param {number} at
   * @param {string} status
   */
  completed(runId, run, at, status) {
    const span = run.span;
    if (span && !run.ended) {
      span.attributes[ATTR.runStatus] = status;
      run.ended = true;
      if (run.sampled) {
        const p = run.parent;
        this.emit({
          name: RUN_SPAN,
          traceId: run.traceId,
          spanId: span.spanId,
          parentSpanId: p ? p.spanId : '',
          parentRemote: p !== undefined,
          parentFlags: p ? p.flags : 0,
          start: span.start,
          end: at,
          attributes: span.attributes,
          status: status === 'failed' || status === 'deadlocked' ? { code: 2, message: `the run ${status}` } : { code: 0 },
          events: [],
          links: span.links,
        });
      }
    }
    if (status !== 'needs_replan') {
      this.runs.delete(runId);
      this.awaitingReplan.delete(runId);
      return;
    }
    awaitReplan(this.awaitingReplan, this.runs, runId);
  }

  /** A replan after `needs_replan`: the run goes on in a new run span, linked to the one that ended. */
  /**
   * @param {string} runId
   * @param {RunTrace} run
   * @param {number} at
   */
  replanned(runId, run, at) {
    this.awaitingReplan.delete(runId);
    if (!run.ended) return;
    const previous = run.span;
    run.span = undefined;
    run.ended = false;
    const span = this.runSpan(runId, run, at, previous ? [{ traceId: run.traceId, spanId: previous.spanId, flags: 1, remote: false }] : []);
    span.attributes[ATTR.replanned] = true;
  }

  /**
   * Starts the run's span; returns it.
   * @param {string} _runId
   * @param {RunTrace} run
   * @param {number} at
   * @param {EndedSpan['links']} [links]
   */
  runSpan(_runId, run, at, links = []) {
    /** @type {Attributes} */
    const attributes = { [ATTR.runId]: run.id };
    if (run.tenant !== undefined) attributes[ATTR.tenant] = run.tenant;
    const span = { spanId: this.ids.next(), start: at, attributes, links };
    run.span = span;
    return span;
  }

  /** The run's spans are let go: those started and not ended are dropped (counted in `dropped`). */
  /** @param {string} runId */
  forget(runId) {
    this.aliases.delete(runId);
    const run = this.runs.get(runId);
    if (!run) return;
    this.runs.delete(runId);
    this.pending.delete(runId);
    this.awaitingReplan.delete(runId);
    if (!run.sampled) return;
    if (run.span && !run.ended) this.dropped++;
    for (const c of run.calls.values()) this.dropped += (c.open ? 1 : 0) + (c.compensation ? 1 : 0);
  }

  /** `execute_tool <tool>`, the same string for each span of a tool. */
  /**
   * @param {string} tool
   * @returns {string}
   */
  spanName(tool) {
    let name = this.names.get(tool);
    if (name === undefined) {
      name = `${EXECUTE_TOOL} ${tool}`;
      if (this.names.size >= MAX_SPAN_NAMES) this.names.clear();
      this.names.set(tool, name);
    }
    return name;
  }

  /** The run id of an entry's `runId`: the one its NAME gave a key (taken once, as its run is made), or itself. */
  /**
   * @param {string} key
   * @returns {string}
   */
  idOf(key) {
    const id = this.aliases.get(key);
    if (id === undefined) return key;
    this.aliases.delete(key);
    return id;
  }

  /** @param {string} runId */
  expect(runId) {
    this.pending.set(runId, this.now());
    this.sweep();
  }

  /** Lets go of runs that never showed their `run.created` (see `sweepPending`). */
  sweep() {
    sweepPending(this.pending, this.runs, this.now());
  }
}

/**
 * @param {string} runId
 * @param {ParsedTraceparent | undefined} parent
 * @returns {RunTrace}
 */
function newRun(runId, parent) {
  // A run span without an incoming parent is a trace's root: its trace id is the run's own.
  return {
    id: runId,
    parent,
    traceId: parent ? parent.traceId : runTraceId(runId),
    sampled: parent ? (parent.flags & 1) === 1 : true,
    tenant: undefined,
    span: undefined,
    ended: false,
    calls: new Map(),
  };
}

/**
 * @param {RunTrace} run
 * @param {string} callId
 * @returns {CallTrace}
 */
function callOf(run, callId) {
  let c = run.calls.get(callId);
  if (!c) {
    c = { readyAt: undefined, open: undefined, succeeded: false, compensation: undefined };
    run.calls.set(callId, c);
  }
  return c;
}
