/**
 * What tracing costs, two builds' telemetry side by side in ONE process (the machine's load hits all
 * alike): three servers from build B (Fastify, the service, the engine, a durable SQLite file each) —
 * traceless, traced by build A's telemetry, traced by build B's — take closed-loop clients POSTing
 * 5-call runs of the builtin `echo`; the traced ones export to a collector in a child process that
 * answers every export at once. Rounds rotate among the three (the order shifts each round); after a
 * traced round its spans still queued are flushed, and that counts in the round. Reports per server the
 * median runs/s, CPU µs per call (every thread of the process), the main thread's own CPU µs per call
 * (Linux's per-thread counters, 10 ms ticks) and its busy µs per call (event loop utilization, which
 * also counts time the thread was runnable but had no core), and each traced server's runs/s as a share of the traceless one's in the same
 * rotation (median, range).
 *
 *   A=/path/to/old/checkout B=/path/to/this/checkout ROUNDS=12 SECONDS=1 node src/bench/scripts/compare-traces.mjs
 *
 * Each checkout must be built (`npm run build`).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { performance as perf } from 'node:perf_hooks';

const abs = (r) => (r.startsWith('/') ? r : `${process.cwd()}/${r}`);
const A = abs(process.env.A ?? '.'),
  B = abs(process.env.B ?? '.');
const ROUNDS = Number(process.env.ROUNDS ?? 12),
  SECONDS = Number(process.env.SECONDS ?? 1),
  CLIENTS = Number(process.env.CLIENTS ?? 8);
const CALLS = 5;
const BODY = JSON.stringify({
  calls: Array.from({ length: CALLS }, (_, i) => ({ id: `c${i + 1}`, tool: 'echo', args: { n: i + 1 } })),
  waitMs: 5000,
});

const { buildServer } = await import(`${B}/dist/api/server.js`);
const { Service } = await import(`${B}/dist/api/service.js`);
const { openSqliteStore } = await import(`${B}/dist/store/sqlite.js`);
const { benchConfig } = await import(`${B}/dist/bench/workloads.js`);
const { mainThreadCpuUs: mainCpu } = await import(`${B}/dist/bench/timing.js`);
const tracingOf = async (root) => (await import(`${root}/dist/telemetry/index.js`)).startTracing;

const child = spawn(
  process.execPath,
  [
    '-e',
    `
  const http = require('node:http');
  const s = http.createServer((req, res) => { req.on('data', () => {}); req.on('end', () => { res.writeHead(200, { 'content-type': req.headers['content-type'] || 'application/x-protobuf' }); res.end(); }); });
  s.listen(0, '127.0.0.1', () => process.stdout.write(s.address().port + '\\n'));
`,
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const collector = await new Promise((resolve) =>
  child.stdout.once('data', (d) => resolve(`http://127.0.0.1:${String(d).trim()}/v1/traces`)),
);
const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-compare-traces-'));

async function server(name, tracing) {
  const store = openSqliteStore(path.join(dir, `${name}.db`));
  const service = new Service({ config: benchConfig({ tool: {}, maxCallsPerRun: 1000 }), store, ...(tracing ? { tracing } : {}) });
  const app = buildServer({ service });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    name,
    tracing,
    url: new URL(`http://127.0.0.1:${app.server.address().port}/v1/runs`),
    close: async () => {
      await app.close();
      await service.engine.close();
      await tracing?.shutdown();
      store.close();
    },
  };
}

function post(agent, url) {
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
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve(res.statusCode === 201 && text.includes('"status":"succeeded"')));
      },
    );
    req.on('error', () => resolve(false));
    req.end(BODY);
  });
}

async function round(s, ms) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
  let runs = 0,
    errors = 0;
  const lat = [];
  const cpu0 = process.cpuUsage(),
    main0 = mainCpu(),
    elu0 = perf.eventLoopUtilization(),
    t0 = performance.now(),
    end = t0 + ms;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        (await post(agent, s.url)) ? runs++ : errors++;
        lat.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  await s.tracing?.flush();
  const cpu = process.cpuUsage(cpu0),
    main = mainCpu() - main0,
    elu = perf.eventLoopUtilization(elu0);
  agent.destroy();
  lat.sort((x, y) => x - y);
  return {
    p50: lat[Math.floor(lat.length / 2)],
    p99: lat[Math.floor(lat.length * 0.99)],
    rate: runs / seconds,
    cpu: (cpu.user + cpu.system) / (runs * CALLS),
    main: main / (runs * CALLS),
    busy: (elu.active * 1000) / (runs * CALLS),
    errors,
  };
}

const servers = [
  await server('off', undefined),
  await server('A', await (await tracingOf(A))({ url: collector, protocol: 'http/protobuf' })),
  await server('B', await (await tracingOf(B))({ url: collector, protocol: 'http/protobuf' })),
];
const results = Object.fromEntries(servers.map((s) => [s.name, []]));
const med = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
console.log(
  `load ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}; ${ROUNDS} rotations of ${SECONDS} s rounds, ${CLIENTS} clients; A=${A} B=${B}`,
);
for (const s of servers) await round(s, 500);
for (let r = 0; r < ROUNDS; r++) {
  for (let i = 0; i < servers.length; i++) {
    const s = servers[(i + r) % servers.length];
    results[s.name].push(await round(s, SECONDS * 1000));
  }
}
for (const s of servers) {
  const rs = results[s.name];
  const share =
    s.name === 'off'
      ? ''
      : (() => {
          const q = rs.map((x, i) => x.rate / results.off[i].rate);
          return `  runs/s ${(med(q) * 100).toFixed(1)}% of traceless (${Math.min(...q).toFixed(3)}–${Math.max(...q).toFixed(3)})`;
        })();
  console.log(
    `${s.name.padEnd(3)} ${med(rs.map((x) => x.rate))
      .toFixed(0)
      .padStart(
        5,
      )} runs/s  ${med(rs.map((x) => x.cpu)).toFixed(1)} µs CPU/call  main thread: ${med(rs.map((x) => x.main)).toFixed(1)} µs CPU/call, ${med(rs.map((x) => x.busy)).toFixed(1)} µs busy/call  p50 ${med(rs.map((x) => x.p50)).toFixed(2)} ms p99 ${med(rs.map((x) => x.p99)).toFixed(2)} ms  errors ${rs.reduce((n, x) => n + x.errors, 0)}${share}`,
  );
}
console.log(
  `load at the end ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
);
for (const s of servers) await s.close();
child.kill();
rmSync(dir, { recursive: true, force: true });
