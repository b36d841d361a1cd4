// The spans made from a run's events: the main thread's feed (src/telemetry/trace-feed.ts) writes them
// down as entries, and `RunSpans` (src/telemetry/run-spans.mjs, the export thread's) makes the spans;
// here the two meet in one thread, entries applied as they are written, with a clock of the test's own:
// exact names, parents, attributes, times, and what each side forgets (runs that never came, ended
// runs), and the feed's bound.
import { createHash } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/core/events.js';
import type { CallView, RunView } from '../../src/core/view.js';
import type { ExecuteRequest } from '../../src/executors/types.js';
import { OP, RunSpans, SpanIds, parseTraceparent, runTraceId, type EndedSpan, type EntryValue } from '../../src/telemetry/run-spans.mjs';
import { TraceFeed, type EntrySink } from '../../src/telemetry/trace-feed.js';

const T0 = 1_750_000_000_000;
let now: number;
let ended: EndedSpan[];
let made: RunSpans;
let sink: TestSink;
let traces: TraceFeed;
let seq: number;

/** Applies entries as they are written; `room` says no past `bound` values (once it is set). */
class TestSink implements EntrySink {
  q: EntryValue[] = [];
  /** Times as they are: the export thread's base moves with each batch. */
  readonly base = 0;
  all: EntryValue[] = [];
  bound = Infinity;
  spansDropped = 0;
  running = true;
  /** Values written since the bound was last set, not applied yet while `holding`. */
  holding = false;
  constructor(private readonly to: RunSpans) {}
  wrote(): void {
    if (this.holding) return;
    this.all.push(...this.q);
    this.to.apply(this.q);
    this.q = [];
  }
  room(ongoing: boolean): boolean {
    return this.q.length < (ongoing ? 2 * this.bound : this.bound);
  }
  dropped(spans: number): void {
    this.spansDropped += spans;
  }
}

beforeEach(() => {
  now = T0;
  ended = [];
  made = new RunSpans(
    (s) => ended.push(s),
    new SpanIds(),
    () => now,
  );
  sink = new TestSink(made);
  traces = new TraceFeed(sink, new SpanIds(), () => now);
  seq = 0;
});

const view = { tenant: 'acme', status: 'running', endedAt: null } as unknown as RunView;
const call = (tool: string) => ({ tool }) as CallView;

function emit(
  runId: string,
  type: RunEvent['type'],
  at: number,
  data: Record<string, unknown> = {},
  callId?: string,
  tool = 'search',
): void {
  const e = { seq: ++seq, type, runId, at, data, ...(callId !== undefined ? { callId } : {}) } as RunEvent;
  traces.listener(e, view, callId === undefined ? undefined : call(tool));
}

const byName = () =>
  ended.map((s) => ({
    name: s.name,
    parent: s.parentSpanId || null,
    id: s.spanId,
    start: s.start,
    end: s.end,
    attributes: s.attributes,
    events: s.events,
    status: s.status,
  }));

describe('the trace feed and RunSpans', () => {
  it("a run with a retried call: a run span and two attempt spans at the events' times, the first failed", () => {
    emit('r1', 'run.created', T0, { tenant: 'acme' });
    emit('r1', 'call.ready', T0, {}, 'a');
    emit('r1', 'call.started', T0 + 5, { attempt: 1 }, 'a');
    emit('r1', 'call.retry_scheduled', T0 + 9, { attempt: 2, error: { code: 'timeout', message: 'timed out after 4 ms' } }, 'a');
    emit('r1', 'call.ready', T0 + 20, {}, 'a');
    emit('r1', 'call.started', T0 + 20, { attempt: 2 }, 'a');
    emit('r1', 'call.succeeded', T0 + 25, { attempt: 2 }, 'a');
    emit('r1', 'run.completed', T0 + 26, { status: 'succeeded' });
    const [first, second, run] = byName();
    expect(run).toMatchObject({
      name: 'toolgraph.run',
      parent: null,
      start: T0,
      end: T0 + 26,
      attributes: { 'toolgraph.run.id': 'r1', 'toolgraph.tenant': 'acme', 'toolgraph.run.status': 'succeeded' },
      status: { code: 0 },
    });
    expect(first).toEqual({
      name: 'execute_tool search',
      parent: run?.id,
      id: expect.any(String),
      start: T0 + 5,
      end: T0 + 9,
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'search',
        'gen_ai.tool.call.id': 'a',
        'toolgraph.run.id': 'r1',
        'toolgraph.attempt': 1,
        'toolgraph.wait_ms': 5,
        'error.type': 'timeout',
      },
      events: [{ name: 'toolgraph.limit_wait', at: T0, attributes: { 'toolgraph.wait_ms': 5 } }],
      status: { code: 2, message: 'timed out after 4 ms' },
    });
    expect(second).toMatchObject({
      parent: run?.id,
      start: T0 + 20,
      end: T0 + 25,
      attributes: { 'toolgraph.attempt': 2, 'toolgraph.wait_ms': 0 },
      events: [],
      status: { code: 0 },
    });
    expect(second?.attributes['error.type']).toBeUndefined();
    expect(traces.size).toBe(0);
    expect(made.size).toBe(0);
    // A root run's trace is its own: the run id's.
    expect(new Set(ended.map((s) => s.traceId))).toEqual(new Set([runTraceId('r1')]));
    // The run id went to the thread once, in a NAME entry; every other entry names the run by its key.
    expect(sink.all.filter((v) => v === 'r1')).toHaveLength(1);
    expect(sink.all.slice(0, 3)).toEqual([OP.NAME, 1, 'r1']);
    expect(ended.map((s) => s.attributes['toolgraph.run.id'])).toEqual(['r1', 'r1', 'r1']);
  });

  it('an attempt started before its call.started is published gets its span then; call.started finds it', () => {
    const req = { runId: 'r2', callId: 'a', attempt: 1, tool: { name: 'fetch' } } as ExecuteRequest;
    const tp = traces.traceparentFor(req);
    expect(tp).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    emit('r2', 'run.created', T0, { tenant: 'acme' });
    emit('r2', 'call.ready', T0, {}, 'a', 'fetch');
    emit('r2', 'call.started', T0, { attempt: 1 }, 'a', 'fetch');
    emit('r2', 'call.failed', T0 + 3, { attempt: 1, error: { code: 'tool_error', message: 'HTTP 500' } }, 'a', 'fetch');
    emit('r2', 'run.completed', T0 + 3, { status: 'failed' });
    const [attempt, run] = byName();
    expect(tp).toBe(`00-${ended[0]?.traceId}-${attempt?.id}-01`);
    expect(attempt).toMatchObject({
      name: 'execute_tool fetch',
      parent: run?.id,
      attributes: { 'toolgraph.wait_ms': 0, 'error.type': 'tool_error' },
    });
    expect(run).toMatchObject({ attributes: { 'toolgraph.tenant': 'acme', 'toolgraph.run.status': 'failed' }, status: { code: 2 } });
  });

  it('an attempt whose executor sends no traceparent: none is made, and its span (started early, or a compensation) still comes, its id drawn by RunSpans', () => {
    const req = (callId: string, tool: string) => ({ runId: 'r6', callId, attempt: 1, tool: { name: tool } }) as ExecuteRequest;
    expect(traces.attempted(req('a', 'fetch'), false)).toBeUndefined();
    emit('r6', 'run.created', T0, { tenant: 'acme' });
    emit('r6', 'call.ready', T0, {}, 'a', 'fetch');
    now = T0 + 2;
    emit('r6', 'call.started', T0 + 2, { attempt: 1 }, 'a', 'fetch');
    emit('r6', 'call.succeeded', T0 + 4, { attempt: 1 }, 'a', 'fetch');
    now = T0 + 6;
    expect(traces.attempted(req('a', 'unfetch'), false)).toBeUndefined();
    emit('r6', 'call.compensated', T0 + 8, { status: 'succeeded' }, 'a', 'fetch');
    emit('r6', 'run.completed', T0 + 9, { status: 'failed' });
    // The ATTEMPT entries carry no span id: the feed drew none, nor hashed the run's trace id.
    const key = sink.all[sink.all.indexOf('r6') - 1];
    expect(
      sink.all.filter((v, i) => v === OP.ATTEMPT && sink.all[i + 1] === key && sink.all[i + 2] === 'a' && sink.all[i + 6] === '').length,
    ).toBe(2);
    const [attempt, compensation, run] = byName();
    expect(attempt).toMatchObject({ name: 'execute_tool fetch', parent: run?.id, start: T0, end: T0 + 4 });
    expect(compensation).toMatchObject({
      name: 'execute_tool unfetch',
      parent: run?.id,
      start: T0 + 6,
      end: T0 + 8,
      attributes: { 'toolgraph.compensation': true },
    });
    const ids = [attempt?.id, compensation?.id, run?.id];
    for (const id of ids) expect(id).toMatch(/^(?!0{16})[0-9a-f]{16}$/);
    expect(new Set(ids).size).toBe(3);
  });

  it('forgets a reserved run whose run.created never came (after a minute), and never exports it', () => {
    const kept = traces.continueTrace('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') as string;
    expect(traces.continueTrace('00-zz-bad-01')).toBeUndefined();
    const lost = traces.continueTrace('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') as string;
    traces.traceparentFor({ runId: lost, callId: 'a', attempt: 1, tool: { name: 'x' } } as ExecuteRequest);
    emit(kept, 'run.created', T0, { tenant: 'acme' });
    expect([traces.size, made.size]).toEqual([2, 2]);
    now = T0 + 59_999;
    emit('other', 'run.created', now, { tenant: 'acme' });
    expect([traces.size, made.size]).toEqual([3, 3]);
    now = T0 + 60_000;
    emit('other2', 'run.created', now, { tenant: 'acme' });
    expect([traces.size, made.size]).toEqual([3, 3]); // `lost` went, `other2` came
    emit(kept, 'run.completed', now, { status: 'succeeded' });
    expect(ended.map((s) => [s.name, s.parentSpanId, s.parentRemote, s.traceId])).toEqual([
      ['toolgraph.run', '00f067aa0ba902b7', true, '4bf92f3577b34da6a3ce929d0e0e4736'],
    ]);
  });
});

describe('RunSpans', () => {
  it('a compensation gets a span of its own from its traceparent to call.compensated, marked as such', () => {
    emit('r3', 'run.created', T0, { tenant: 'acme' });
    emit('r3', 'call.started', T0 + 1, { attempt: 1 }, 'a', 'book');
    const first = traces.traceparentFor({ runId: 'r3', callId: 'a', attempt: 1, tool: { name: 'book' } } as ExecuteRequest);
    emit('r3', 'call.succeeded', T0 + 2, { attempt: 1 }, 'a', 'book');
    now = T0 + 10;
    const undo = traces.traceparentFor({ runId: 'r3', callId: 'a', attempt: 1, tool: { name: 'unbook' } } as ExecuteRequest);
    emit('r3', 'call.compensated', T0 + 12, { status: 'failed', error: { code: 'tool_error', message: 'no' } }, 'a', 'book');
    emit('r3', 'run.completed', T0 + 13, { status: 'failed' });
    const [attempt, compensation, run] = byName();
    expect(first.split('-')[2]).toBe(attempt?.id);
    expect(undo.split('-')[2]).toBe(compensation?.id);
    expect(compensation).toMatchObject({
      name: 'execute_tool unbook',
      parent: run?.id,
      start: T0 + 10,
      end: T0 + 12,
      status: { code: 2, message: 'no' },
    });
    expect(compensation?.attributes).toMatchObject({ 'toolgraph.compensation': true, 'error.type': 'tool_error', 'toolgraph.attempt': 1 });
    expect(run).toMatchObject({ status: { code: 2, message: 'the run failed' } });
  });

  it('needs_replan ends the run span; the replan starts another in the same trace, linked to the first', () => {
    emit('r4', 'run.created', T0, { tenant: 'acme' });
    emit('r4', 'run.completed', T0 + 1, { status: 'needs_replan' });
    expect([traces.size, made.size]).toEqual([1, 1]);
    emit('r4', 'run.replanned', T0 + 5);
    emit('r4', 'call.started', T0 + 6, { attempt: 1 }, 'b');
    emit('r4', 'call.succeeded', T0 + 7, { attempt: 1 }, 'b');
    emit('r4', 'run.completed', T0 + 8, { status: 'succeeded' });
    const [first, attempt, second] = ended;
    expect(first?.attributes['toolgraph.run.status']).toBe('needs_replan');
    expect(second).toMatchObject({
      name: 'toolgraph.run',
      traceId: first?.traceId,
      start: T0 + 5,
      end: T0 + 8,
      links: [{ traceId: first?.traceId, spanId: first?.spanId }],
    });
    expect(second?.attributes).toMatchObject({ 'toolgraph.run.replanned': true, 'toolgraph.tenant': 'acme' });
    expect(attempt?.parentSpanId).toBe(second?.spanId);
    expect([traces.size, made.size]).toEqual([0, 0]);
  });

  it('an unsampled parent: traceparents say 00, and no span is made', () => {
    const runId = traces.continueTrace('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00') as string;
    emit(runId, 'run.created', T0, { tenant: 'acme' });
    emit(runId, 'call.started', T0, { attempt: 1 }, 'a');
    expect(traces.traceparentFor({ runId, callId: 'a', attempt: 1, tool: { name: 'search' } } as ExecuteRequest)).toMatch(
      /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-00$/,
    );
    emit(runId, 'call.succeeded', T0 + 1, { attempt: 1 }, 'a');
    emit(runId, 'run.completed', T0 + 2, { status: 'succeeded' });
    expect(ended).toEqual([]);
  });

  it("a run first seen midway (resumed without being told) is traced from there in its own trace; an ended run's late event makes nothing", () => {
    traces.listener(
      { seq: 4, type: 'call.started', runId: 'r5', callId: 'a', at: T0, data: { attempt: 2 } } as RunEvent,
      view,
      call('search'),
    );
    traces.listener(
      { seq: 5, type: 'call.succeeded', runId: 'r5', callId: 'a', at: T0 + 1, data: { attempt: 2 } } as RunEvent,
      view,
      call('search'),
    );
    traces.listener({ seq: 6, type: 'run.completed', runId: 'r5', at: T0 + 2, data: { status: 'succeeded' } } as RunEvent, view, undefined);
    const done = { ...view, status: 'succeeded', endedAt: T0 } as unknown as RunView;
    traces.listener(
      {
        seq: 9,
        type: 'call.cancelled',
        runId: 'r6',
        callId: 'a',
        at: T0,
        data: { reason: { code: 'cancelled', message: 'x' } },
      } as RunEvent,
      done,
      call('search'),
    );
    expect(ended.map((s) => [s.name, s.traceId, s.attributes['toolgraph.tenant']])).toEqual([
      ['execute_tool search', runTraceId('r5'), undefined],
      ['toolgraph.run', runTraceId('r5'), 'acme'],
    ]);
    expect([traces.size, made.size]).toEqual([0, 0]);
  });

  it('reads only whole entries of known ops: anything else throws (the export thread stops, and is started again)', () => {
    expect(() => made.apply([99, 'r'])).toThrow(/op 99/);
    expect(() => made.apply([OP.STARTED, 'r', 'a', T0])).toThrow(/cut short/);
  });
});

describe("the feed's bound", () => {
  it('past the bound a new run is not traced; a run traced goes on to twice it, then is let go and its open spans dropped', () => {
    emit('old', 'run.created', T0, { tenant: 'acme' });
    emit('old', 'call.started', T0, { attempt: 1 }, 'a');
    sink.holding = true;
    emit('old', 'call.ready', T0 + 1, {}, 'b');
    sink.bound = 3;
    // 4 values on their way: no room for a new run. Its spans are counted as dropped as they would start.
    emit('new', 'run.created', T0 + 1, { tenant: 'acme' });
    emit('new', 'call.started', T0 + 1, { attempt: 1 }, 'a');
    emit('new', 'call.succeeded', T0 + 2, { attempt: 1 }, 'a');
    // Entries name a run by its key (1: the first run of this feed), told once in a NAME entry.
    expect(sink.all.slice(0, 3)).toEqual([OP.NAME, 1, 'old']);
    expect(sink.q).toEqual([OP.READY, 1, 'b', T0 + 1]);
    expect(sink.spansDropped).toBe(2);
    // The run traced goes on under twice the bound, then is let go: a FORGET, past the bound.
    emit('old', 'call.started', T0 + 2, { attempt: 1 }, 'b');
    emit('old', 'call.succeeded', T0 + 3, { attempt: 1 }, 'b');
    expect(sink.q).toEqual([OP.READY, 1, 'b', T0 + 1, OP.STARTED, 1, 'b', T0 + 2, 1, 'search', OP.FORGET, 1]);
    emit('old', 'run.completed', T0 + 4, { status: 'succeeded' });
    emit('new', 'run.completed', T0 + 4, { status: 'succeeded' });
    expect(sink.spansDropped).toBe(2);
    sink.holding = false;
    sink.wrote();
    // The thread let go of what it had started of the run: its run span, attempts a and b.
    expect(made.dropped).toBe(3);
    expect(ended).toEqual([]);
    expect([traces.size, made.size]).toEqual([0, 0]);
  });
});

describe('ids and traceparents', () => {
  it('random span ids from a pool: hex of the right length, never zero, all distinct across several refills', () => {
    const ids = new SpanIds();
    const spans = Array.from({ length: 2000 }, () => ids.next());
    for (const id of spans) expect(id).toMatch(/^[0-9a-f]{16}$/);
    expect(new Set(spans).size).toBe(spans.length);
    expect(spans.some((id) => /^0+$/.test(id))).toBe(false);
  });

  it("a run's own trace id is the first 16 bytes of its id's SHA-256 (a run begun by an earlier version stays in its trace)", () => {
    expect(runTraceId('run_1')).toBe(createHash('sha256').update('run_1').digest('hex').slice(0, 32));
  });

  it('parses traceparents as OpenTelemetry does', () => {
    expect(parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      flags: 1,
    });
    expect(parseTraceparent('01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-later')).toMatchObject({ flags: 0 });
    for (const bad of [
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra',
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
      '00-zz-bad-01',
      '',
    ]) {
      expect(parseTraceparent(bad)).toBeUndefined();
    }
  });
});
