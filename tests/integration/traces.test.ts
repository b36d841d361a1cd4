/**
 * Traces (DESIGN §15) end to end: the real server (Fastify, the service, the engine, a SQLite file)
 * with tracing on, http tools on a real tool server, and an in-process OTLP receiver that decodes
 * what the exporter sends, in both protocols (`http/protobuf`, `http/json`). What is checked: span
 * names, parent links, attributes, `error.type`, limit waits, the incoming `traceparent` continued and
 * the outgoing one sent to the tool; a dead collector changes nothing about a run; and without an
 * endpoint in the environment, `toolgraph serve` loads no OpenTelemetry module.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { runTraceId } from '../../src/telemetry/run-spans.mjs';
import { buildServer } from '../../src/api/server.js';
import { Service } from '../../src/api/service.js';
import { parseConfig } from '../../src/config/load.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { startTracing, type OtlpProtocol, type Tracing, type TracingOptions } from '../../src/telemetry/index.js';
import { BIN, ROOT, startServer } from '../helpers/child.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp.js';
import { ToolServer } from '../helpers/toolserver.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_SPAN = '00f067aa0ba902b7';

interface Traced {
  url: string;
  service: Service;
  store: Store;
  tracing: Tracing | undefined;
  post(body: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function yaml(ts: ToolServer, extra = ''): string {
  return `tools:
  - name: work
    input: { type: object }
    reads: []
    writes: []
    risk: read
    executor: { kind: http, url: "${ts.url('/work')}" }
  - name: flaky
    input: { type: object }
    reads: []
    writes: []
    risk: read
    idempotent: true
    retry: { attempts: 2, backoffMs: 1, maxBackoffMs: 1 }
    executor: { kind: http, url: "${ts.url('/flaky')}" }
  - name: echo
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: echo }
${extra}`;
}

/** `keep`: the directory of the SQLite file, kept on close (a restart of the same server). */
async function startTraced(ts: ToolServer, tracingOpts: TracingOptions | undefined, extraYaml = '', keep?: string): Promise<Traced> {
  const dir = keep ?? mkdtempSync(path.join(tmpdir(), 'toolgraph-traces-'));
  const config = parseConfig(yaml(ts, extraYaml), 'traces.yaml', { env: {}, baseDir: dir });
  const store = openSqliteStore(path.join(dir, 'toolgraph.db'));
  const tracing = tracingOpts ? await startTracing(tracingOpts) : undefined;
  const service = new Service({ config, store, ...(tracing ? { tracing } : {}) });
  const app: FastifyInstance = buildServer({ service });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const traced: Traced = {
    url,
    service,
    store,
    tracing,
    async post(body, headers = {}) {
      const res = await fetch(`${url}/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: await res.json() };
    },
    async close() {
      await app.close();
      await service.engine.close();
      await tracing?.shutdown(2000);
      store.close();
      if (keep === undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
  cleanups.push(() => traced.close());
  return traced;
}

async function toolServer(): Promise<ToolServer> {
  const ts = await ToolServer.start();
  cleanups.push(() => ts.close());
  return ts;
}

async function receiver(): Promise<OtlpReceiver> {
  const r = await startOtlpReceiver();
  cleanups.push(() => r.close());
  return r;
}

const runSpans = (spans: ReceivedSpan[], runId: string) =>
  spans.filter((s) => s.name === 'toolgraph.run' && s.attributes['toolgraph.run.id'] === runId);
const attemptSpans = (spans: ReceivedSpan[], runId: string) =>
  spans.filter((s) => s.name.startsWith('execute_tool ') && s.attributes['toolgraph.run.id'] === runId);

describe.each(['http/protobuf', 'http/json'] as OtlpProtocol[])('traces over OTLP %s', (protocol) => {
  it('exports a run span and one execute_tool span per attempt, children of it, with the GenAI attributes and error.type', async () => {
    const ts = await toolServer();
    let flakyCalls = 0;
    ts.on('/flaky', () => (++flakyCalls === 1 ? { status: 503, body: { error: 'busy' } } : { status: 200, body: { ok: true } }));
    ts.on('/work', (req) =>
      req.body.args.fail ? { status: 400, body: { error: 'bad input' } } : { status: 200, body: { done: req.body.callId } },
    );
    const otlp = await receiver();
    const api = await startTraced(ts, { url: otlp.url, protocol, serviceName: 'toolgraph-test', batch: { scheduledDelayMillis: 20 } });

    const res = await api.post({
      calls: [
        { id: 'a', tool: 'work', args: {} },
        { id: 'b', tool: 'flaky', args: { from: '${a.output.done}' } },
        { id: 'c', tool: 'work', args: { fail: true } },
      ],
      waitMs: 10_000,
    });
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('partial');
    const runId = res.body.id as string;
    const spans = await otlp.waitFor((s) => runSpans(s, runId).length === 1 && attemptSpans(s, runId).length === 4);
    expect(otlp.contentTypes.every((t) => t.includes(protocol === 'http/json' ? 'application/json' : 'application/x-protobuf'))).toBe(true);

    const [run] = runSpans(spans, runId) as [ReceivedSpan];
    expect(run.protocol).toBe(protocol === 'http/json' ? 'json' : 'protobuf');
    expect(run.parentSpanId).toBe('');
    expect(run.kind).toBe(1);
    expect(run.attributes).toEqual({ 'toolgraph.run.id': runId, 'toolgraph.tenant': 'default', 'toolgraph.run.status': 'partial' });
    expect(run.resource['service.name']).toBe('toolgraph-test');

    const attempts = attemptSpans(spans, runId).sort((x, y) =>
      `${x.attributes['gen_ai.tool.call.id']}${x.attributes['toolgraph.attempt']}`.localeCompare(
        `${y.attributes['gen_ai.tool.call.id']}${y.attributes['toolgraph.attempt']}`,
      ),
    );
    expect(
      attempts.map((s) => [
        s.name,
        s.attributes['gen_ai.tool.call.id'],
        s.attributes['toolgraph.attempt'],
        s.attributes['error.type'] ?? null,
        s.status.code,
      ]),
    ).toEqual([
      ['execute_tool work', 'a', 1, null, 0],
      ['execute_tool flaky', 'b', 1, 'tool_error', 2],
      ['execute_tool flaky', 'b', 2, null, 0],
      ['execute_tool work', 'c', 1, 'tool_error', 2],
    ]);
    for (const s of attempts) {
      expect(s.traceId).toBe(run.traceId);
      expect(s.parentSpanId).toBe(run.spanId);
      expect(s.kind).toBe(1);
      expect(s.attributes['gen_ai.operation.name']).toBe('execute_tool');
      expect(s.attributes['gen_ai.tool.name']).toBe(s.name.slice('execute_tool '.length));
      expect(typeof s.attributes['toolgraph.wait_ms']).toBe('number');
      expect(s.startMs).toBeGreaterThanOrEqual(run.startMs);
      expect(s.endMs).toBeLessThanOrEqual(run.endMs);
    }
    expect(attempts[3]?.status.message).toMatch(/HTTP 400/);

    // The tool got each attempt's own span as its parent.
    for (const s of attempts) {
      const sent = ts.requests.filter(
        (r) => r.body.callId === s.attributes['gen_ai.tool.call.id'] && r.body.attempt === s.attributes['toolgraph.attempt'],
      );
      expect(sent.map((r) => r.headers.traceparent)).toEqual([`00-${s.traceId}-${s.spanId}-01`]);
    }
  });

  it('continues an incoming traceparent: the run span is its child, and the tool gets the same trace', async () => {
    const ts = await toolServer();
    const otlp = await receiver();
    const api = await startTraced(ts, { url: otlp.url, protocol, batch: { scheduledDelayMillis: 20 } });
    // `f` (idempotent, no predecessor) starts before its submission is stored (the engine's early
    // start): its span is made when its attempt starts, before its call.started is published.
    const calls = [
      { id: 'a', tool: 'work', args: {} },
      { id: 'e', tool: 'echo', args: { x: 1 } },
      { id: 'f', tool: 'flaky', args: {} },
    ];
    const res = await api.post({ calls, waitMs: 10_000 }, { traceparent: `00-${TRACE_ID}-${PARENT_SPAN}-01` });
    expect(res.body.status).toBe('succeeded');
    const runId = res.body.id as string;
    const spans = await otlp.waitFor((s) => runSpans(s, runId).length === 1 && attemptSpans(s, runId).length === 3);
    const [run] = runSpans(spans, runId) as [ReceivedSpan];
    expect(run.traceId).toBe(TRACE_ID);
    expect(run.parentSpanId).toBe(PARENT_SPAN);
    for (const s of attemptSpans(spans, runId)) {
      expect(s.traceId).toBe(TRACE_ID);
      expect(s.parentSpanId).toBe(run.spanId);
      expect(s.attributes['toolgraph.wait_ms']).toBe(0);
      const id = s.attributes['gen_ai.tool.call.id'];
      if (id === 'e') continue; // a builtin: no request to see
      const sent = ts.requests.filter((r) => r.body.runId === runId && r.body.callId === id).map((r) => r.headers.traceparent);
      expect(sent).toEqual([`00-${TRACE_ID}-${s.spanId}-01`]);
    }
    // The run.created keeps the caller's traceparent (a run resumed elsewhere goes on in this trace);
    // its recording says nothing of the trace, so recordings stay the same.
    const created = (await api.store.events(runId))[0];
    expect((created?.data as { traceparent?: string } | undefined)?.traceparent).toBe(`00-${TRACE_ID}-${PARENT_SPAN}-01`);
    const recording = await (await fetch(`${api.url}/v1/runs/${runId}/recording`)).text();
    expect(recording).toContain(runId);
    expect(recording).not.toContain(TRACE_ID);
  });
});

describe('traces of a resumed run', () => {
  it('a run resumed after a restart goes on in the trace it began in, whether it came with a traceparent or not', async () => {
    const ts = await toolServer();
    const otlp = await receiver();
    const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-traces-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const opts: TracingOptions = { url: otlp.url, batch: { scheduledDelayMillis: 20 } };
    const first = await startTraced(ts, opts, '', dir);
    const held = { calls: [{ id: 'h', tool: 'flaky', args: { hold: true } }] };
    const own = (await first.post(held)).body.id as string;
    const continued = (await first.post(held, { traceparent: `00-${TRACE_ID}-${PARENT_SPAN}-01` })).body.id as string;
    await ts.next((r) => r.body.runId === own);
    await ts.next((r) => r.body.runId === continued);
    // Stopped with its calls in flight (their ends not recorded), then started again on the same file.
    await first.close();
    const second = await startTraced(ts, opts, '', dir);
    await second.service.recover();
    await ts.next((r) => r.body.runId === own && r.body.attempt === 2);
    await ts.next((r) => r.body.runId === continued && r.body.attempt === 2);
    ts.release();
    expect((await second.service.engine.wait(own))?.status).toBe('succeeded');
    expect((await second.service.engine.wait(continued))?.status).toBe('succeeded');
    const traceOf = (runId: string) =>
      ts.requests.filter((r) => r.body.runId === runId).map((r) => String(r.headers.traceparent).split('-')[1]);
    // A run without an incoming trace has its own, whose id follows from the run id.
    expect(traceOf(own)).toEqual([runTraceId(own), runTraceId(own)]);
    expect(traceOf(continued)).toEqual([TRACE_ID, TRACE_ID]);
    const spans = await otlp.waitFor((s) => runSpans(s, own).length === 1 && runSpans(s, continued).length === 1);
    expect(runSpans(spans, own)[0]?.traceId).toBe(runTraceId(own));
    expect(runSpans(spans, continued)[0]?.traceId).toBe(TRACE_ID);
    expect(runSpans(spans, continued)[0]?.parentSpanId).toBe(PARENT_SPAN);
  });
});

describe('traces: waits, compensation and what changes nothing', () => {
  it('says how long an attempt waited on limits (ready → start), with a span event for the wait', async () => {
    const ts = await toolServer();
    ts.on('/work', (req) => (req.body.args.hold ? 'hold' : { status: 200, body: {} }));
    const otlp = await receiver();
    const api = await startTraced(ts, { url: otlp.url, batch: { scheduledDelayMillis: 20 } }, 'limits:\n  global: 1\n');
    const res = await api.post({
      calls: [
        { id: 'first', tool: 'work', args: { hold: true } },
        { id: 'second', tool: 'work', args: {} },
      ],
    });
    const runId = res.body.id as string;
    const held = await ts.next((r) => r.body.runId === runId && r.body.callId === 'first');
    // `second` is ready and waits for the global slot; let the clock move past its ready time.
    const readyAt = (await api.store.events(runId)).find((e) => e.type === 'call.ready' && e.callId === 'second')?.at as number;
    expect(readyAt).toBeTypeOf('number');
    while (Date.now() <= readyAt + 2) await new Promise((r) => setTimeout(r, 1));
    held.respond({ status: 200, body: {} });
    await api.service.engine.wait(runId);
    const events = await api.store.events(runId);
    const startedAt = events.find((e) => e.type === 'call.started' && e.callId === 'second')?.at as number;
    const waited = startedAt - readyAt;
    expect(waited).toBeGreaterThan(0);

    const spans = await otlp.waitFor((s) => runSpans(s, runId).length === 1 && attemptSpans(s, runId).length === 2);
    const second = attemptSpans(spans, runId).find((s) => s.attributes['gen_ai.tool.call.id'] === 'second') as ReceivedSpan;
    const first = attemptSpans(spans, runId).find((s) => s.attributes['gen_ai.tool.call.id'] === 'first') as ReceivedSpan;
    expect(second.attributes['toolgraph.wait_ms']).toBe(waited);
    expect(second.startMs).toBe(startedAt);
    expect(second.events).toEqual([{ name: 'toolgraph.limit_wait', timeMs: readyAt, attributes: { 'toolgraph.wait_ms': waited } }]);
    expect(first.attributes['toolgraph.wait_ms']).toBe(0);
    expect(first.events).toEqual([]);
  });

  it('a dead collector changes nothing about a run: same result, same events, ended promptly', async () => {
    // A port that refuses: bound, then closed.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const deadPort = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));

    const ts = await toolServer();
    const body = {
      calls: [
        { id: 'a', tool: 'work', args: { n: 1 } },
        { id: 'b', tool: 'flaky', args: { from: '${a.output}' } },
        { id: 'c', tool: 'echo', args: { x: '${b.output}' } },
      ],
      waitMs: 10_000,
    };
    // A tiny queue, flushed often: exports fail all the time, and spans overflow it.
    const dead = await startTraced(ts, {
      url: `http://127.0.0.1:${deadPort}/v1/traces`,
      batch: { maxQueueSize: 4, maxExportBatchSize: 2, scheduledDelayMillis: 1 },
    });
    const plain = await startTraced(ts, undefined);
    const shape = (run: any) => ({ status: run.status, calls: run.calls.map((c: any) => [c.id, c.status, c.attempts, c.output, c.error]) });
    const types = async (store: Store, id: string) => (await store.events(id)).map((e) => [e.type, e.callId ?? null]);

    for (let i = 0; i < 10; i++) {
      const t0 = performance.now();
      const traced = await dead.post(body);
      const tracedMs = performance.now() - t0;
      const untraced = await plain.post(body);
      expect(traced.body.status).toBe('succeeded');
      expect(shape(traced.body)).toEqual(shape(untraced.body));
      expect(await types(dead.store, traced.body.id)).toEqual(await types(plain.store, untraced.body.id));
      // Three local calls: nothing near an export timeout (10 s) or a retry's backoff.
      expect(tracedMs).toBeLessThan(2000);
    }
    // Shutting down does not wait for the dead collector beyond its bound.
    const t0 = performance.now();
    await dead.tracing?.shutdown(500);
    expect(performance.now() - t0).toBeLessThan(1500);
  });

  it('compensations get their own execute_tool span, marked as such', async () => {
    const ts = await toolServer();
    ts.on('/work', (req) => (req.body.args.fail ? { status: 400, body: { error: 'no' } } : { status: 200, body: {} }));
    const otlp = await receiver();
    const extra = `  - name: booked
    input: { type: object }
    reads: []
    writes: []
    risk: write
    executor: { kind: http, url: "${ts.url('/work')}" }
    compensate: { tool: work, args: { undo: true } }
`;
    const api = await startTraced(ts, { url: otlp.url, batch: { scheduledDelayMillis: 20 } }, extra);
    const res = await api.post({
      calls: [
        { id: 'book', tool: 'booked', args: {} },
        { id: 'boom', tool: 'work', args: { fail: true, after: '${book.output}' } },
      ],
      failure: 'fail_fast',
      waitMs: 10_000,
    });
    // `boom` waits for `book`, then fails the run: `book` is compensated.
    expect(res.body.calls.find((c: any) => c.id === 'book').compensation).toMatchObject({ status: 'succeeded' });
    const runId = res.body.id as string;
    const spans = await otlp.waitFor((s) => runSpans(s, runId).length === 1 && attemptSpans(s, runId).length === 3);
    const [run] = runSpans(spans, runId) as [ReceivedSpan];
    const comp = attemptSpans(spans, runId).filter((s) => s.attributes['toolgraph.compensation'] === true);
    expect(comp.map((s) => [s.name, s.attributes['gen_ai.tool.call.id'], s.parentSpanId])).toEqual([
      ['execute_tool work', 'book', run.spanId],
    ]);
    expect(run.attributes['toolgraph.run.status']).toBe('failed');
    expect(run.status.code).toBe(2);
  });
});

describe('traces of a replanned run', () => {
  it('ends the run span at needs_replan; the replan goes on in a second run span linked to it', async () => {
    const ts = await toolServer();
    ts.on('/work', (req) => (req.body.args.fail ? { status: 400, body: { error: 'no' } } : { status: 200, body: {} }));
    const otlp = await receiver();
    const api = await startTraced(ts, { url: otlp.url, batch: { scheduledDelayMillis: 20 } });
    const res = await api.post(
      {
        failure: 'replan',
        calls: [
          { id: 'a', tool: 'work', args: {} },
          { id: 'b', tool: 'work', args: { fail: true } },
        ],
        waitMs: 10_000,
      },
      { traceparent: `00-${TRACE_ID}-${PARENT_SPAN}-01` },
    );
    expect(res.body.status).toBe('needs_replan');
    const runId = res.body.id as string;
    const replan = await fetch(`${api.url}/v1/runs/${runId}/replan`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ calls: [{ id: 'b2', tool: 'work', args: {} }] }),
    });
    expect(replan.status).toBe(202);
    expect((await api.service.engine.wait(runId))?.status).toBe('succeeded');

    const spans = await otlp.waitFor((s) => runSpans(s, runId).length === 2 && attemptSpans(s, runId).length === 3);
    const first = runSpans(spans, runId).find((s) => s.attributes['toolgraph.run.replanned'] === undefined) as ReceivedSpan;
    const second = runSpans(spans, runId).find((s) => s.attributes['toolgraph.run.replanned'] === true) as ReceivedSpan;
    expect(first.attributes['toolgraph.run.status']).toBe('needs_replan');
    expect(second.attributes).toMatchObject({
      'toolgraph.run.status': 'succeeded',
      'toolgraph.run.replanned': true,
      'toolgraph.tenant': 'default',
    });
    expect([first.parentSpanId, second.parentSpanId, first.traceId, second.traceId]).toEqual([
      PARENT_SPAN,
      PARENT_SPAN,
      TRACE_ID,
      TRACE_ID,
    ]);
    expect(second.links).toEqual([{ traceId: TRACE_ID, spanId: first.spanId }]);
    const parentOf = Object.fromEntries(attemptSpans(spans, runId).map((s) => [s.attributes['gen_ai.tool.call.id'], s.parentSpanId]));
    expect(parentOf).toEqual({ a: first.spanId, b: first.spanId, b2: second.spanId });
  });
});

describe('without an OTLP endpoint', () => {
  it('toolgraph serve loads no OpenTelemetry SDK or exporter module; with one, it does', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-traces-child-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const config = path.join(dir, 'config.yaml');
    writeFileSync(
      config,
      'tools:\n  - name: echo\n    reads: []\n    writes: []\n    risk: read\n    executor: { kind: builtin, name: echo }\n',
    );
    const preload = pathToFileURL(path.resolve('tests/helpers/loaded-modules.mjs')).href;
    const otlp = await receiver();

    /** The @opentelemetry packages the main thread loaded, and those its worker threads loaded. */
    const loaded = async (name: string, env: Record<string, string>) => {
      const out = path.join(dir, `${name}.json`);
      const child = await startServer({
        config,
        db: path.join(dir, `${name}.db`),
        nodeArgs: [`--import=${preload}`],
        env: { ...env, LOADED_MODULES_OUT: out },
      });
      const res = await fetch(`${child.url}/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ calls: [{ id: 'a', tool: 'echo', args: {} }], waitMs: 5000 }),
      });
      expect((await res.json()).status).toBe('succeeded');
      await child.stop();
      expect(await child.exited).toEqual({ code: 0, signal: null });
      const packages = (file: string) =>
        (JSON.parse(readFileSync(file, 'utf8')) as string[])
          .filter((f) => f.includes(`${path.sep}@opentelemetry${path.sep}`))
          .map((f) => f.split(`${path.sep}@opentelemetry${path.sep}`)[1]?.split(path.sep)[0]);
      const threads = readdirSync(dir).filter((f) => f.startsWith(`${name}.json.thread-`));
      return { main: new Set(packages(out)), threads: new Set(threads.flatMap((f) => packages(path.join(dir, f)))) };
    };

    const off = await loaded('off', { OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' });
    // prom-client (metrics) requires the API package itself; nothing of the SDK, exporters or protobuf.
    expect([...off.main, ...off.threads].filter((p) => p !== 'api')).toEqual([]);

    const on = await loaded('on', { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlp.url });
    // The main thread only writes down events (the API, for its diagnostics); the export thread makes
    // the spans and exports them with the SDK's batch processor and the OTLP/HTTP exporter's parts
    // (http/protobuf: the exporter base and the transformer, with our serializer), not the JSON exporter.
    expect([...on.main]).toEqual(['api']);
    expect(['sdk-trace-base', 'otlp-exporter-base', 'otlp-transformer'].filter((p) => !on.threads.has(p))).toEqual([]);
    expect(on.threads.has('exporter-trace-otlp-http')).toBe(false);
    // Its spans went out on shutdown.
    await otlp.waitFor((s) => s.some((x) => x.name === 'toolgraph.run'));
  }, 60_000);
});

describe('toolgraph run', () => {
  it('exports traces from the environment (OTEL_EXPORTER_OTLP_ENDPOINT, http/json), under its TRACEPARENT', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-traces-run-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const config = path.join(dir, 'config.yaml');
    writeFileSync(
      config,
      'tools:\n  - name: echo\n    reads: []\n    writes: []\n    risk: read\n    executor: { kind: builtin, name: echo }\n',
    );
    const batch = path.join(dir, 'batch.json');
    writeFileSync(batch, JSON.stringify({ calls: [{ id: 'a', tool: 'echo', args: { x: 1 } }] }));
    const otlp = await receiver();
    const base = otlp.url.slice(0, -'/v1/traces'.length);
    const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'run', batch, '--config', config, '--json'], {
      cwd: ROOT,
      env: {
        ...process.env,
        OTEL_EXPORTER_OTLP_ENDPOINT: base,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'cli-run',
        TRACEPARENT: `00-${TRACE_ID}-${PARENT_SPAN}-01`,
      },
    });
    const runId = JSON.parse(stdout).id as string;
    // The command flushed its spans before it exited.
    const [run] = runSpans(otlp.spans, runId) as [ReceivedSpan];
    expect(run).toMatchObject({ traceId: TRACE_ID, parentSpanId: PARENT_SPAN, protocol: 'json' });
    expect(run.resource['service.name']).toBe('cli-run');
    expect(attemptSpans(otlp.spans, runId).map((s) => [s.name, s.parentSpanId])).toEqual([['execute_tool echo', run.spanId]]);
  }, 60_000);
});
