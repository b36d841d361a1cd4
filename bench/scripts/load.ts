/**
 * Load benchmark of the HTTP API (issue #16): 1,000 runs of 5 builtin calls (echo and sleep 0, with
 * data references between them) sent by 50 concurrent clients, each `POST /v1/runs` with `waitMs` so
 * that it answers once the run has ended, against a server on real HTTP (127.0.0.1, port 0) on the
 * store chosen, beside an SQLite baseline (a temp file, WAL, synchronous = FULL) in the same sitting:
 * the passes alternate, baseline first. Prints runs/s and the p50/p99 of submit → run ended, per pass
 * and per store, and the load average (the machine may be shared).
 *
 * No run may be lost: every answer must be the run ended `succeeded` with the expected output, `GET
 * /v1/runs` must list every run of the pass, and the store, opened again after the server closed, must
 * hold every one of them as succeeded.
 *
 * The server is the one `toolgraph serve` builds (Service + buildServer), in this process; the clients
 * run in a worker thread, since on the server's event loop their own work (fetch, JSON) would sit in
 * the measured latency.
 *
 * @example
 * npm run bench:load                                      # SQLite only
 * npm run bench:load -- --db postgres://user@host:5432/db # that database, beside SQLite
 * npm run bench:load -- --db postgres                     # a throwaway local PostgreSQL (postgres-cluster.ts), fsync on
 * npm run bench:load -- --runs 1000 --clients 50 --passes 2
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { buildServer } from '../../src/api/server.js';
import { Service } from '../../src/api/service.js';
import { parseConfig } from '../../src/config/load.js';
import { describeUrl, openPostgresStore } from '../../src/store/postgres.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { startPostgres, type TestPostgres } from '../../src/bench/postgres-cluster.js';
import { quantile } from '../../src/bench/stats.js';

const { values: args } = parseArgs({
  options: {
    db: { type: 'string' },
    runs: { type: 'string', default: process.env.RUNS ?? '1000' },
    clients: { type: 'string', default: process.env.CLIENTS ?? '50' },
    passes: { type: 'string', default: process.env.PASSES ?? '2' },
  },
});
const RUNS = positive('--runs', args.runs);
const CLIENTS = positive('--clients', args.clients);
const PASSES = positive('--passes', args.passes);

function positive(name: string, v: string | undefined): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`Expected ${name} to be an integer ≥ 1, got ${JSON.stringify(v)}`);
  return n;
}

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
  maxActiveRunsPerTenant: 100000
`;

/** Five calls: two roots, two that use their outputs, one that joins them. */
function batch(i: number, tag: string) {
  return {
    calls: [
      { id: 'c1', tool: 'echo', args: { i } },
      { id: 'c2', tool: 'sleep', args: { ms: 0 } },
      { id: 'c3', tool: 'echo', args: { from: '${c1.output.i}' } },
      { id: 'c4', tool: 'sleep', args: { ms: '${c2.output.ms}' } },
      { id: 'c5', tool: 'echo', args: { a: '${c3.output}', b: '${c4.output}' } },
    ],
    tags: { bench: tag },
    waitMs: 60_000,
  };
}

interface Pass {
  store: string;
  seconds: number;
  runsPerSecond: number;
  p50: number;
  p99: number;
  max: number;
  /** createdAt → endedAt on the server. */
  runP50: number;
  runP99: number;
}

/** A store to run a pass on, and how to open it again afterwards (to check that it holds every run). */
interface Target {
  name: string;
  open(): Promise<Store>;
}

/** Counts a pass's runs (tagged `bench: tag`) by status, straight from a store. */
async function storedStatuses(store: Store, tag: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  let cursor: string | undefined;
  do {
    const page = await store.list({ limit: 200, tags: [['bench', tag]], ...(cursor ? { cursor } : {}) });
    for (const r of page.items) out[r.status] = (out[r.status] ?? 0) + 1;
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return out;
}

async function pass(target: Target): Promise<Pass> {
  const tag = `load-${randomBytes(4).toString('hex')}`;
  const store = await target.open();
  const config = parseConfig(CONFIG, 'bench/scripts/load.ts', { env: {} });
  const service = new Service({ config, store });
  await service.recover();
  const app = buildServer({ service });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  let result: Pass;
  try {
    // Warm up (JIT, connections, statement caches): one run per client, not timed, but checked.
    await clients(base, -CLIENTS, 0, tag);
    const started = performance.now();
    const { ids, latencies, serverSide } = await clients(base, 0, RUNS, tag);
    const seconds = (performance.now() - started) / 1000;
    if (ids.length !== RUNS || new Set(ids).size !== RUNS)
      throw new Error(`${new Set(ids).size} distinct runs came back, expected ${RUNS}`);
    await expectListed(base, tag, ids);
    latencies.sort((a, b) => a - b);
    serverSide.sort((a, b) => a - b);
    result = {
      store: target.name,
      seconds,
      runsPerSecond: RUNS / seconds,
      p50: quantile(latencies, 0.5),
      p99: quantile(latencies, 0.99),
      max: latencies.at(-1) as number,
      runP50: quantile(serverSide, 0.5),
      runP99: quantile(serverSide, 0.99),
    };
  } finally {
    await app.close();
    await service.engine.close();
    await store.close();
  }
  // Durable: the store, opened again after the server let it go, holds every run of the pass, succeeded.
  const again = await target.open();
  try {
    const counts = await storedStatuses(again, tag);
    if (counts.succeeded !== RUNS + CLIENTS || Object.keys(counts).length !== 1)
      throw new Error(`${target.name} holds ${JSON.stringify(counts)}, expected ${RUNS + CLIENTS} succeeded runs`);
  } finally {
    await again.close();
  }
  return result;
}

/** None lost: `GET /v1/runs` lists every run of the pass (the warm-up's too), each succeeded with its five calls. */
async function expectListed(base: string, tag: string, ids: readonly string[]): Promise<void> {
  const listed = new Map<string, string>();
  let cursor: string | null = null;
  do {
    const res = await fetch(`${base}/v1/runs?limit=200&tag=bench:${tag}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
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
  if (listed.size !== RUNS + CLIENTS)
    throw new Error(`listed ${listed.size} runs, expected ${RUNS + CLIENTS} (${RUNS} + ${CLIENTS} warm-up)`);
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
      if (i >= 0) {
        ids.push(run.id);
        latencies.push(ms);
        serverSide.push(Date.parse(run.endedAt) - Date.parse(run.createdAt));
      }
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

async function clients(base: string, from: number, to: number, tag: string): Promise<ClientsResult> {
  const template = JSON.stringify(batch(0, tag)).replace('{"i":0}', '{"i":"__I__"}');
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

const fmt = (v: number) => v.toFixed(1).padStart(9);
const line = (p: Pass) =>
  `${p.store.padEnd(38)} ${p.runsPerSecond.toFixed(0).padStart(7)} ${[p.p50, p.p99, p.max, p.runP50, p.runP99].map(fmt).join(' ')} ${p.seconds.toFixed(2).padStart(9)}`;
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' / ');

const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-load-'));
let cluster: TestPostgres | undefined;
try {
  let n = 0;
  const sqlite = (): Target => {
    const file = path.join(dir, `load-${n++}.db`);
    return { name: 'sqlite (temp file, synchronous=FULL)', open: async () => openSqliteStore(file) };
  };
  let other: (() => Target | Promise<Target>) | undefined;
  const db = args.db;
  if (db === 'postgres') {
    other = async () => {
      cluster ??= await startPostgres();
      const url = await (cluster as TestPostgres).createDatabase();
      return { name: 'postgres (local cluster, fsync on)', open: () => openPostgresStore({ url }) };
    };
  } else if (db !== undefined && /^postgres(ql)?:\/\//.test(db)) {
    other = () => ({ name: `postgres ${describeUrl(db)}`, open: () => openPostgresStore({ url: db }) });
  } else if (db !== undefined) {
    other = () => ({ name: `sqlite ${db}`, open: async () => openSqliteStore(db) });
  }
  console.log(
    `toolgraph load: ${RUNS} runs × 5 builtin calls, ${CLIENTS} concurrent clients, POST /v1/runs with waitMs; ${PASSES} pass(es) per store, alternating`,
  );
  console.log(`node ${process.version}, ${cpus().length} cores, load average ${load()} (1 / 5 / 15 min) before`);
  const passes: Pass[] = [];
  for (let i = 0; i < PASSES; i++) {
    passes.push(await pass(sqlite()));
    if (other) passes.push(await pass(await other()));
  }
  console.log(`load average ${load()} after\n`);
  console.log('latency: submit to answer (the run ended) at the client; run: createdAt to endedAt on the server');
  console.log(`${'pass'.padEnd(38)}  runs/s    p50 ms    p99 ms    max ms   run p50   run p99   total s`);
  for (const p of passes) console.log(line(p));
  const stores = [...new Set(passes.map((p) => p.store))];
  const summary = stores.map((s) => {
    const ps = passes.filter((p) => p.store === s);
    return {
      store: s,
      runsPerSecond: mean(ps.map((p) => p.runsPerSecond)),
      p50: mean(ps.map((p) => p.p50)),
      p99: mean(ps.map((p) => p.p99)),
    };
  });
  console.log(`\nmean of the passes:`);
  for (const s of summary)
    console.log(`  ${s.store}: ${s.runsPerSecond.toFixed(0)} runs/s, p50 ${s.p50.toFixed(1)} ms, p99 ${s.p99.toFixed(1)} ms`);
  const [base, target] = summary;
  if (base && target)
    console.log(
      `  ${target.store} ÷ sqlite: ${((target.runsPerSecond / base.runsPerSecond) * 100).toFixed(0)}% of the runs/s, p99 ${(target.p99 / base.p99).toFixed(2)}×`,
    );
  console.log(
    `\nno run lost: every answer was the run succeeded, GET /v1/runs listed every run of each pass, and each store, opened again, held them all as succeeded.`,
  );
} catch (e) {
  console.error(`load benchmark failed: ${(e as Error).stack ?? String(e)}`);
  process.exitCode = 1;
} finally {
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
}
