/**
 * What traces cost (DESIGN §15), per call: `npm run bench:traces`. Two servers in this process,
 * alike but for tracing — Fastify, the service, the engine and a durable SQLite file each — take
 * closed-loop clients (node:http, keep-alive) that POST 5-call batches of the no-op builtin `echo`
 * with `waitMs` (as part 3 of the suite). One exports its traces (a run span and 5 attempt spans per
 * run, OTLP over HTTP) to a collector in a child process, which answers every export at once and so
 * costs this process nothing; the other has tracing off. Rounds alternate between the two (each pair
 * in turn order reversed); after each traced round the spans still queued are exported, and that CPU
 * counts in the round. Per round: runs per second; CPU time per call (user + system, every thread of
 * this process: the clients, the servers, the SQLite writer, the trace export thread); the main
 * thread's own CPU time per call (Linux's per-thread counters: the clients, Fastify, the engine and the
 * tracing listener all run there, so it bounds the runs per second) and its busy time (event loop
 * utilization, which also counts time it was runnable but had no core); and the garbage collector's
 * pauses per call. Reported: the medians, and the median of the paired rounds' ratios. Spans dropped on their
 * way or by the batch processor's queue are counted too (dropped spans would make tracing look cheaper
 * than it is).
 *
 * Then, steadier on a busy machine, the spans alone: the same runs' events (a run, 5 calls ready,
 * started, succeeded) fed straight to the tracing listener, exported to the same collector: CPU per
 * span and per call, export included, and the main thread's part of it.
 *
 * The load average is printed at the start and the end (the machine's other work shows in every figure).
 *
 * Target (issue #19): tracing costs at most 10% of the HTTP runs per second.
 *
 * Options (environment): ROUNDS (10), SECONDS (2 per round), CLIENTS (8), PROTOCOL (http/protobuf).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { performance as perf, PerformanceObserver } from 'node:perf_hooks';
import { diag, DiagLogLevel } from '@opentelemetry/api';
import { buildServer } from '../../src/api/server.js';
import { Service } from '../../src/api/service.js';
import { benchConfig } from '../../src/bench/workloads.js';
import { median } from '../../src/bench/stats.js';
import { mainThreadCpuUs } from '../../src/bench/timing.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { RunEvent } from '../../src/core/events.js';
import type { CallView, RunView } from '../../src/core/view.js';
import { startTracing, type OtlpProtocol, type Tracing } from '../../src/telemetry/index.js';

const ROUNDS = Number(process.env.ROUNDS ?? 10);
const SECONDS = Number(process.env.SECONDS ?? 2);
const CLIENTS = Number(process.env.CLIENTS ?? 8);
const PROTOCOL = (process.env.PROTOCOL ?? 'http/protobuf') as OtlpProtocol;
const CALLS_PER_RUN = 5;
const BODY = JSON.stringify({
  calls: Array.from({ length: CALLS_PER_RUN }, (_, i) => ({ id: `c${i + 1}`, tool: 'echo', args: { n: i + 1 } })),
  waitMs: 5000,
});

/** A collector in a child process: reads each export and answers 200 with an empty body. */
function startCollector(): Promise<{ url: string; child: ChildProcess }> {
  const code = `
    const http = require('node:http');
    let requests = 0, bytes = 0;
    const server = http.createServer((req, res) => {
      req.on('data', (c) => { bytes += c.length; });
      req.on('end', () => { requests++; res.writeHead(200, { 'content-type': req.headers['content-type'] || 'application/x-protobuf' }); res.end(); });
    });
    server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
    process.on('message', () => process.send({ requests, bytes }));
  `;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.stdout?.once('data', (d: Buffer) => resolve({ url: `http://127.0.0.1:${d.toString().trim()}/v1/traces`, child }));
  });
}

function collectorStats(child: ChildProcess): Promise<{ requests: number; bytes: number }> {
  return new Promise((resolve) => {
    child.once('message', (m) => resolve(m as { requests: number; bytes: number }));
    child.send('stats');
  });
}

function post(agent: http.Agent, url: URL): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(BODY) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve(res.statusCode === 201 && text.includes('"status":"succeeded"')));
      },
    );
    req.on('error', () => resolve(false));
    req.end(BODY);
  });
}

/** Milliseconds spent in garbage collection so far (spans kept until their batch is exported cost GC time). */
let gcMs = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gcMs += e.duration;
}).observe({ entryTypes: ['gc'] });

interface Round {
  runsPerSec: number;
  cpuUsPerCall: number;
  /** The main thread's own CPU per call (Linux's per-thread counters): the clients, Fastify, the engine and the tracing listener run there, and it bounds the runs per second. */
  mainCpuUsPerCall: number;
  /** The main thread's busy time (event loop utilization) per call: its CPU, and time it was runnable but had no core. */
  mainUsPerCall: number;
  gcUsPerCall: number;
  runs: number;
  errors: number;
}

/** Closed-loop load for `ms`; then `after` (a flush), whose CPU counts in the round. */
async function round(target: string, ms: number, after?: () => Promise<void>): Promise<Round> {
  const url = new URL(target);
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
  let runs = 0;
  let errors = 0;
  const cpu0 = process.cpuUsage();
  const elu0 = perf.eventLoopUtilization();
  const main0 = mainThreadCpuUs();
  const gc0 = gcMs;
  const t0 = performance.now();
  const end = t0 + ms;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < end) {
        if (await post(agent, url)) runs++;
        else errors++;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  await after?.();
  const cpu = process.cpuUsage(cpu0);
  const elu = perf.eventLoopUtilization(elu0);
  const main = mainThreadCpuUs() - main0;
  agent.destroy();
  return {
    runsPerSec: runs / seconds,
    cpuUsPerCall: (cpu.user + cpu.system) / (runs * CALLS_PER_RUN),
    mainCpuUsPerCall: main / (runs * CALLS_PER_RUN),
    mainUsPerCall: (elu.active * 1000) / (runs * CALLS_PER_RUN),
    gcUsPerCall: ((gcMs - gc0) * 1000) / (runs * CALLS_PER_RUN),
    runs,
    errors,
  };
}

async function server(dir: string, name: string, tracing: Tracing | undefined) {
  const store = openSqliteStore(path.join(dir, `${name}.db`));
  const service = new Service({ config: benchConfig({ tool: {}, maxCallsPerRun: 1000 }), store, ...(tracing ? { tracing } : {}) });
  const app = buildServer({ service });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/runs`,
    async close() {
      await app.close();
      await service.engine.close();
      store.close();
    },
  };
}

/**
 * The spans alone: `runs` runs of events fed to the listener, then flushed. Per call: the CPU of every
 * thread (the export thread's included), and the main thread's part (the listener's time: it runs
 * synchronously between the flushes).
 */
async function spansAlone(tracing: Tracing, runs: number, from: number): Promise<{ cpu: number; main: number }> {
  const view = { tenant: 'default', status: 'running', endedAt: null } as unknown as RunView;
  const echo = { tool: 'echo' } as CallView;
  let seq = 0;
  const tell = (runId: string, type: RunEvent['type'], data: Record<string, unknown>, callId?: string) =>
    tracing.listener(
      { seq: ++seq, type, runId, at: Date.now(), data, ...(callId ? { callId } : {}) } as RunEvent,
      view,
      callId ? echo : undefined,
    );
  const cpu0 = process.cpuUsage();
  let main = 0;
  let t0 = performance.now();
  for (let i = 0; i < runs; i++) {
    const runId = `bench_${from + i}`;
    tell(runId, 'run.created', { tenant: 'default' });
    for (let c = 1; c <= CALLS_PER_RUN; c++) {
      tell(runId, 'call.ready', {}, `c${c}`);
      tell(runId, 'call.started', { attempt: 1 }, `c${c}`);
      tell(runId, 'call.succeeded', { attempt: 1 }, `c${c}`);
    }
    tell(runId, 'run.completed', { status: 'succeeded' });
    // Export before the queue (2048 spans) can overflow: every span is exported, none dropped.
    if (i % 300 === 299) {
      main += performance.now() - t0;
      await tracing.flush();
      t0 = performance.now();
    }
  }
  main += performance.now() - t0;
  await tracing.flush();
  const cpu = process.cpuUsage(cpu0);
  const calls = runs * CALLS_PER_RUN;
  return { cpu: (cpu.user + cpu.system) / calls, main: (main * 1000) / calls };
}

async function main(): Promise<void> {
  let dropped = 0;
  diag.setLogger(
    {
      warn: (m: string) => {
        const n = /Dropped (\d+) spans/.exec(m);
        if (n) dropped += Number(n[1]);
      },
      error: () => {},
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    DiagLogLevel.WARN,
  );
  const collector = await startCollector();
  const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-bench-traces-'));
  let exportErrors = 0;
  const tracing = await startTracing({ url: collector.url, protocol: PROTOCOL, onExportError: (_m, n) => void (exportErrors += n) });
  const on = await server(dir, 'on', tracing);
  const off = await server(dir, 'off', undefined);
  try {
    const load = () =>
      loadavg()
        .map((x) => x.toFixed(2))
        .join(' ');
    console.log(`load average at the start: ${load()}`);
    console.log(
      `traces bench: ${ROUNDS} rounds of ${SECONDS} s per mode, ${CLIENTS} clients, ${CALLS_PER_RUN} echo calls per run, OTLP ${PROTOCOL}`,
    );
    await round(off.url, 1000);
    await round(on.url, 1000, () => tracing.flush());
    const results: { on: Round[]; off: Round[] } = { on: [], off: [] };
    for (let r = 0; r < ROUNDS; r++) {
      const order: ['on' | 'off', string][] =
        r % 2 === 0
          ? [
              ['off', off.url],
              ['on', on.url],
            ]
          : [
              ['on', on.url],
              ['off', off.url],
            ];
      for (const [mode, url] of order) {
        const res = await round(url, SECONDS * 1000, mode === 'on' ? () => tracing.flush() : undefined);
        results[mode].push(res);
        console.log(
          `  round ${r + 1} ${mode.padEnd(3)} ${res.runsPerSec.toFixed(0).padStart(5)} runs/s  ${res.cpuUsPerCall.toFixed(1).padStart(6)} µs CPU/call (GC ${res.gcUsPerCall.toFixed(1)}; main thread ${res.mainCpuUsPerCall.toFixed(1)} CPU, ${res.mainUsPerCall.toFixed(1)} busy)  (${res.errors} errors)`,
        );
      }
    }
    const ratios = results.on.map((x, i) => x.runsPerSec / (results.off[i] as Round).runsPerSec);
    const cpuOn = median(results.on.map((x) => x.cpuUsPerCall));
    const cpuOff = median(results.off.map((x) => x.cpuUsPerCall));
    const stats = await collectorStats(collector.child);
    const spans = results.on.reduce((n, x) => n + x.runs, 0) * (CALLS_PER_RUN + 1);
    console.log('');
    console.log(
      `| tracing | runs/s (median) | CPU µs per call, all threads (median) | main thread CPU, µs per call (median) | main thread busy, µs per call (median) | GC pauses, µs per call (median) |`,
    );
    console.log(`|---|---|---|---|---|---|`);
    for (const [mode, label] of [
      ['off', 'off'],
      ['on', `on (${PROTOCOL})`],
    ] as const) {
      const rs = results[mode];
      console.log(
        `| ${label} | ${median(rs.map((x) => x.runsPerSec)).toFixed(0)} | ${median(rs.map((x) => x.cpuUsPerCall)).toFixed(1)} | ${median(rs.map((x) => x.mainCpuUsPerCall)).toFixed(1)} | ${median(rs.map((x) => x.mainUsPerCall)).toFixed(1)} | ${median(rs.map((x) => x.gcUsPerCall)).toFixed(1)} |`,
      );
    }
    const mainOn = median(results.on.map((x) => x.mainCpuUsPerCall));
    const mainOff = median(results.off.map((x) => x.mainCpuUsPerCall));
    console.log('');
    const cost = 1 - median(ratios);
    console.log(
      `runs/s with tracing: ${(median(ratios) * 100).toFixed(1)}% of without (paired rounds ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}): costs ${(cost * 100).toFixed(1)}% (target ≤ 10%: ${cost <= 0.1 ? 'met' : 'missed'})`,
    );
    console.log(
      `CPU per call, all threads: +${(cpuOn - cpuOff).toFixed(1)} µs (+${(((cpuOn - cpuOff) / cpuOff) * 100).toFixed(1)}%); the main thread's own CPU per call: +${(mainOn - mainOff).toFixed(1)} µs (+${(((mainOn - mainOff) / mainOff) * 100).toFixed(1)}%)`,
    );
    console.log(
      `spans: ${spans} made in the measured rounds, ${dropped} dropped by the queue (whole bench), ${exportErrors} failed exports; the collector took ${stats.requests} requests, ${(stats.bytes / 1e6).toFixed(1)} MB`,
    );
    const alone: { cpu: number; main: number }[] = [];
    const droppedBefore = dropped;
    for (let r = 0; r < 5; r++) alone.push(await spansAlone(tracing, 10_000, r * 10_000));
    const perCall = median(alone.slice(1).map((x) => x.cpu));
    const mainPerCall = median(alone.slice(1).map((x) => x.main));
    console.log(
      `spans alone (listener + export, no engine): ${perCall.toFixed(1)} µs CPU per call, all threads (${((perCall * CALLS_PER_RUN) / (CALLS_PER_RUN + 1)).toFixed(1)} µs per span), of which the main thread ${mainPerCall.toFixed(1)} µs per call (median of 4 rounds of 10,000 runs, after one warm-up); the main thread's part is ${((mainPerCall / mainOff) * 100).toFixed(1)}% of a traceless HTTP run's main-thread time per call; ${dropped - droppedBefore} spans dropped`,
    );
    console.log(`load average at the end: ${load()}`);
    const errors = [...results.on, ...results.off].reduce((n, x) => n + x.errors, 0);
    if (errors > 0) process.exitCode = 1;
  } finally {
    await on.close();
    await off.close();
    await tracing.shutdown();
    collector.child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
