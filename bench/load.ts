/**
 * Load benchmark of the HTTP API (`npx tsx bench/load.ts`): 1,000 runs of 5 builtin calls (echo and
 * sleep 0, with data references between them) sent by 50 concurrent clients with `waitMs`, against an
 * in-process server on real HTTP (127.0.0.1, port 0) — once on the durable SQLite store (a temporary
 * file, WAL, synchronous = FULL) and once on the in-memory store. No run may be lost: every response
 * must be the run ended `succeeded`, and `GET /v1/runs` must list every one of them. Prints runs/s and
 * the p50/p99 latency of `POST /v1/runs` (submit → run ended) for both.
 *
 * The clients run in a worker thread of the same process: sharing the server's event loop, their own
 * work (fetch, JSON) would sit in the measured latency (it roughly tripled the p99 in a trial).
 *
 * Options (environment): RUNS (1000), CLIENTS (50), STORES (`sqlite,memory`; `postgres` starts a
 * throwaway local cluster, fsync on, with tests/helpers/postgres.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { buildServer } from '../src/api/server.js';
import { Service } from '../src/api/service.js';
import { parseConfig } from '../src/config/load.js';
import { createMemoryStore } from '../src/store/memory.js';
import { openPostgresStore } from '../src/store/postgres.js';
import { openSqliteStore } from '../src/store/sqlite.js';
import { startPostgres } from '../tests/helpers/postgres.js';
import type { Store } from '../src/store/types.js';

const RUNS = Number(process.env.RUNS ?? 1000);
const CLIENTS = Number(process.env.CLIENTS ?? 50);
const STORES = (process.env.STORES ?? 'sqlite,memory').split(',');

const CONFIG = `
tools:
  - name: echo
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: echo }
  - name: sleep
    input: { type: object, properties: { ms: { type: integer, minimum: 0 } }, required: [ms] }
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: sleep }
limits:
  maxCallsPerRun: 1000
`;

/** Five calls: two roots, two that use their outputs, one that joins them. */
function batch(i: number) {
  return {
    calls: [
      { id: 'c1', tool: 'echo', args: { i } },
      { id: 'c2', tool: 'sleep', args: { ms: 0 } },
      { id: 'c3', tool: 'echo', args: { from: '${c1.output.i}' } },
      { id: 'c4', tool: 'sleep', args: { ms: '${c2.output.ms}' } },
      { id: 'c5', tool: 'echo', args: { a: '${c3.output}', b: '${c4.output}' } },
    ],
    tags: { bench: 'load' },
    waitMs: 60_000,
  };
}

interface Result {
  store: string;
  runs: number;
  seconds: number;
  runsPerSecond: number;
  p50: number;
  p99: number;
  max: number;
  serverP50: number;
  serverP99: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

/** Counts the runs tagged bench:load by status, straight from a store. */
async function storedStatuses(store: Store): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  let cursor: string | undefined;
  do {
    const page = await store.list({ limit: 200, tags: [['bench', 'load']], ...(cursor ? { cursor } : {}) });
    for (const r of (await page).items) out[r.status] = (out[r.status] ?? 0) + 1;
    cursor = (await page).nextCursor ?? undefined;
  } while (cursor);
  return out;
}

async function bench(name: string, store: Store): Promise<Result> {
  const config = parseConfig(CONFIG, 'bench/load.ts', { env: {} });
  const service = new Service({ config, store });
  const app = buildServer({ service });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  try {
    // Warm up (JIT, connections, statement caches): one round per client, not counted, but checked.
    await clients(base, -CLIENTS, 0);
    const started = performance.now();
    const { ids, latencies, serverSide } = await clients(base, 0, RUNS);
    const seconds = (performance.now() - started) / 1000;
    if (new Set(ids).size !== ids.length) throw new Error('a run came back twice');

    // None lost: every run is listed, ended succeeded, with its five calls.
    const listed = new Map<string, string>();
    let cursor: string | null = null;
    do {
      const res = await fetch(`${base}/v1/runs?limit=200&tag=bench:load${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      if (res.status !== 200) throw new Error(`GET /v1/runs: HTTP ${res.status} ${await res.text()}`);
      const page = (await res.json()) as { items: { id: string; status: string; callCount: number }[]; nextCursor: string | null };
      for (const r of page.items) {
        if (r.callCount !== 5) throw new Error(`run ${r.id} lists ${r.callCount} calls, not 5`);
        listed.set(r.id, r.status);
      }
      cursor = page.nextCursor;
    } while (cursor);
    const missing = ids.filter((id) => !listed.has(id));
    if (missing.length > 0) throw new Error(`${missing.length} runs are not listed, e.g. ${missing[0]}`);
    const notOk = [...listed].filter(([, s]) => s !== 'succeeded');
    if (notOk.length > 0) throw new Error(`${notOk.length} listed runs did not succeed, e.g. ${notOk[0]?.join(' ')}`);
    if (listed.size !== RUNS + CLIENTS) throw new Error(`listed ${listed.size} runs, expected ${RUNS + CLIENTS} (${RUNS} + ${CLIENTS} warm-up)`);
    if (ids.length !== RUNS) throw new Error(`${ids.length} runs came back, expected ${RUNS}`);

    latencies.sort((a, b) => a - b);
    serverSide.sort((a, b) => a - b);
    if (latencies.length !== RUNS) throw new Error(`${latencies.length} latencies for ${RUNS} runs`);
    return {
      store: name,
      runs: RUNS,
      seconds,
      runsPerSecond: RUNS / seconds,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      max: latencies.at(-1) as number,
      serverP50: percentile(serverSide, 50),
      serverP99: percentile(serverSide, 99),
    };
  } finally {
    await app.close();
    await service.engine.close();
    await store.close();
  }
}

/**
 * The clients: `CLIENTS` loops in a worker thread, each submitting batches `from`…`to - 1` one after
 * the other with waitMs, checking every answer (201, succeeded, the expected output of the last call).
 * Plain JavaScript, so the worker needs no TypeScript loader.
 */
const CLIENT_CODE = `
const { parentPort, workerData } = require('node:worker_threads');
const { base, from, to, clients, batch } = workerData;
const body = (i) => batch.replace('"__I__"', String(i));
(async () => {
  const ids = [], latencies = [], serverSide = [];
  let next = from;
  const client = async () => {
    for (let i = next++; i < to; i = next++) {
      const t0 = performance.now();
      const res = await fetch(base + '/v1/runs', { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(i) });
      const text = await res.text();
      const ms = performance.now() - t0;
      if (res.status !== 201) throw new Error('POST /v1/runs: HTTP ' + res.status + ' ' + text.slice(0, 500));
      const run = JSON.parse(text);
      if (run.status !== 'succeeded') throw new Error('run ' + run.id + ' answered ' + run.status + ' within waitMs: ' + text.slice(0, 500));
      const c5 = run.calls[4];
      if (run.calls.length !== 5 || !c5 || c5.id !== 'c5' || JSON.stringify(c5.output) !== JSON.stringify({ a: { from: i }, b: { ms: 0 } })) {
        throw new Error('run ' + run.id + ': unexpected calls ' + JSON.stringify(run.calls).slice(0, 500));
      }
      ids.push(run.id);
      latencies.push(ms);
      serverSide.push(Date.parse(run.endedAt) - Date.parse(run.createdAt));
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  parentPort.postMessage({ ids, latencies, serverSide });
})().catch((e) => parentPort.postMessage({ error: String(e && e.stack || e) }));
`;

interface ClientsResult {
  ids: string[];
  /** Submit → answer, at the client (ms). */
  latencies: number[];
  /** createdAt → endedAt of each run, as the server saw it (ms). */
  serverSide: number[];
}

async function clients(base: string, from: number, to: number): Promise<ClientsResult> {
  const template = JSON.stringify(batch(0)).replace('{"i":0}', '{"i":"__I__"}');
  const worker = new Worker(CLIENT_CODE, { eval: true, workerData: { base, from, to, clients: CLIENTS, batch: template } });
  try {
    const out = await new Promise<ClientsResult & { error?: string }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`the client worker exited (${code}) without an answer`)));
    });
    if (out.error) throw new Error(out.error);
    return out;
  } finally {
    await worker.terminate();
  }
}

const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-load-'));
try {
  const results: Result[] = [];
  if (STORES.includes('sqlite')) {
    const file = path.join(dir, 'load.db');
    results.push(await bench('sqlite (durable)', openSqliteStore(file)));
    // Durable: the file, opened again after the server closed it, holds every run, succeeded.
    const reopened = openSqliteStore(file);
    const counts = await storedStatuses(reopened);
    await reopened.close();
    if (counts.succeeded !== RUNS + CLIENTS || Object.keys(counts).length !== 1) throw new Error(`the database holds ${JSON.stringify(counts)}, expected ${RUNS + CLIENTS} succeeded runs`);
  }
  if (STORES.includes('postgres')) {
    const cluster = await startPostgres();
    try {
      const url = await cluster.createDatabase();
      results.push(await bench('postgres (durable)', await openPostgresStore({ url })));
      const reopened = await openPostgresStore({ url });
      const counts = await storedStatuses(reopened);
      await reopened.close();
      if (counts.succeeded !== RUNS + CLIENTS || Object.keys(counts).length !== 1) throw new Error(`the database holds ${JSON.stringify(counts)}, expected ${RUNS + CLIENTS} succeeded runs`);
    } finally {
      await cluster.stop();
    }
  }
  if (STORES.includes('memory')) results.push(await bench('memory', createMemoryStore()));
  const cores = cpus().length;
  console.log(`toolgraph load: ${RUNS} runs × 5 builtin calls, ${CLIENTS} concurrent clients, POST /v1/runs with waitMs (node ${process.version}, ${cores} cores, load average ${loadavg()[0]?.toFixed(1)})`);
  console.log('latency: POST /v1/runs at the client, submit to answer; run: createdAt to endedAt on the server');
  console.log('store              runs/s    p50 ms    p99 ms    max ms   run p50   run p99   total s');
  for (const r of results) {
    const cols = [r.runsPerSecond.toFixed(0).padStart(7), ...[r.p50, r.p99, r.max, r.serverP50, r.serverP99].map((v) => v.toFixed(1).padStart(9)), r.seconds.toFixed(2).padStart(9)];
    console.log(`${r.store.padEnd(17)} ${cols.join(' ')}`);
  }
  console.log('no run lost: every run answered succeeded, GET /v1/runs lists all of them, and the SQLite file opened again holds them all.');
} catch (e) {
  console.error(`load benchmark failed: ${(e as Error).stack ?? String(e)}`);
  process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
