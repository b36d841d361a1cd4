// The spans made from a run's events (src/telemetry/spans.ts), fed event by event with a clock of the
// test's own, into the SDK's in-memory exporter: exact names, parents, attributes, times, and what the
// tracker forgets (runs that never came, ended runs).
import { createHash } from 'node:crypto';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { beforeEach, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/core/events.js';
import type { CallView, RunView } from '../../src/core/view.js';
import type { ExecuteRequest } from '../../src/executors/types.js';
import { RunTraceIds, RunTraces, runTraceId } from '../../src/telemetry/spans.js';

const T0 = 1_750_000_000_000;
let exporter: InMemorySpanExporter;
let now: number;
let traces: RunTraces;
let seq: number;

beforeEach(() => {
  exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  now = T0;
  traces = new RunTraces(provider.getTracer('test'), () => now);
  seq = 0;
});

const view = { tenant: 'acme', status: 'running', endedAt: null } as unknown as RunView;
const call = (tool: string) => ({ tool }) as CallView;

function emit(runId: string, type: RunEvent['type'], at: number, data: Record<string, unknown> = {}, callId?: string, tool = 'search'): void {
  const e = { seq: ++seq, type, runId, at, data, ...(callId !== undefined ? { callId } : {}) } as RunEvent;
  traces.listener(e, view, callId === undefined ? undefined : call(tool));
}

const ms = (t: ReadableSpan['startTime']) => t[0] * 1000 + t[1] / 1e6;
const byName = () => exporter.getFinishedSpans().map((s) => ({ name: s.name, parent: s.parentSpanContext?.spanId ?? null, id: s.spanContext().spanId, start: ms(s.startTime), end: ms(s.endTime), attributes: s.attributes, events: s.events.map((e) => ({ name: e.name, at: ms(e.time), attributes: e.attributes })), status: s.status }));

describe('RunTraces', () => {
  it('a run with a retried call: a run span and two attempt spans at the events\' times, the first failed', () => {
    emit('r1', 'run.created', T0, { tenant: 'acme' });
    emit('r1', 'call.ready', T0, {}, 'a');
    emit('r1', 'call.started', T0 + 5, { attempt: 1 }, 'a');
    emit('r1', 'call.retry_scheduled', T0 + 9, { attempt: 2, error: { code: 'timeout', message: 'timed out after 4 ms' } }, 'a');
    emit('r1', 'call.ready', T0 + 20, {}, 'a');
    emit('r1', 'call.started', T0 + 20, { attempt: 2 }, 'a');
    emit('r1', 'call.succeeded', T0 + 25, { attempt: 2 }, 'a');
    emit('r1', 'run.completed', T0 + 26, { status: 'succeeded' });
    const [first, second, run] = byName();
    expect(run).toMatchObject({ name: 'toolgraph.run', parent: null, start: T0, end: T0 + 26, attributes: { 'toolgraph.run.id': 'r1', 'toolgraph.tenant': 'acme', 'toolgraph.run.status': 'succeeded' }, status: { code: 0 } });
    expect(first).toEqual({
      name: 'execute_tool search',
      parent: run?.id,
      id: expect.any(String),
      start: T0 + 5,
      end: T0 + 9,
      attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'search', 'gen_ai.tool.call.id': 'a', 'toolgraph.run.id': 'r1', 'toolgraph.attempt': 1, 'toolgraph.wait_ms': 5, 'error.type': 'timeout' },
      events: [{ name: 'toolgraph.limit_wait', at: T0, attributes: { 'toolgraph.wait_ms': 5 } }],
      status: { code: 2, message: 'timed out after 4 ms' },
    });
    expect(second).toMatchObject({ parent: run?.id, start: T0 + 20, end: T0 + 25, attributes: { 'toolgraph.attempt': 2, 'toolgraph.wait_ms': 0 }, events: [], status: { code: 0 } });
    expect(second?.attributes['error.type']).toBeUndefined();
    expect(traces.size).toBe(0);
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
    expect(tp).toBe(`00-${exporter.getFinishedSpans()[0]?.spanContext().traceId}-${attempt?.id}-01`);
    expect(attempt).toMatchObject({ name: 'execute_tool fetch', parent: run?.id, attributes: { 'toolgraph.wait_ms': 0, 'error.type': 'tool_error' } });
    expect(run).toMatchObject({ attributes: { 'toolgraph.tenant': 'acme', 'toolgraph.run.status': 'failed' }, status: { code: 2 } });
  });

  it('forgets a reserved run whose run.created never came (after a minute), and never exports it', () => {
    const kept = traces.continueTrace('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') as string;
    expect(traces.continueTrace('00-zz-bad-01')).toBeUndefined();
    const lost = traces.continueTrace('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') as string;
    traces.traceparentFor({ runId: lost, callId: 'a', attempt: 1, tool: { name: 'x' } } as ExecuteRequest);
    emit(kept, 'run.created', T0, { tenant: 'acme' });
    expect(traces.size).toBe(2);
    now = T0 + 59_999;
    emit('other', 'run.created', now, { tenant: 'acme' });
    expect(traces.size).toBe(3);
    now = T0 + 60_000;
    emit('other2', 'run.created', now, { tenant: 'acme' });
    expect(traces.size).toBe(3); // `lost` went, `other2` came
    emit(kept, 'run.completed', now, { status: 'succeeded' });
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => [s.name, s.parentSpanContext?.spanId, s.spanContext().traceId])).toEqual([['toolgraph.run', '00f067aa0ba902b7', '4bf92f3577b34da6a3ce929d0e0e4736']]);
  });
});

describe('RunTraceIds', () => {
  it('random span and trace ids from its pool: hex of the right length, all distinct across several refills', () => {
    const ids = new RunTraceIds();
    const spans = Array.from({ length: 2000 }, () => ids.generateSpanId());
    const traces = Array.from({ length: 600 }, () => ids.generateTraceId());
    for (const id of spans) expect(id).toMatch(/^[0-9a-f]{16}$/);
    for (const id of traces) expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set(spans).size).toBe(spans.length);
    expect(new Set(traces).size).toBe(traces.length);
    expect(spans.some((id) => /^0+$/.test(id))).toBe(false);
  });

  it('the next trace id is the run\'s own once, when asked for it, then random again', () => {
    const ids = new RunTraceIds();
    ids.next = runTraceId('run_1');
    expect(ids.generateTraceId()).toBe(runTraceId('run_1'));
    expect(ids.generateTraceId()).not.toBe(runTraceId('run_1'));
    // The first 16 bytes of the run id's SHA-256: a run begun by an earlier version stays in its trace.
    expect(runTraceId('run_1')).toBe(createHash('sha256').update('run_1').digest('hex').slice(0, 32));
  });
});
