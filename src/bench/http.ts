/**
 * Part 3 of the suite: HTTP throughput. Closed-loop clients (each sends its next request when the
 * last one is answered) POST 5-call batches of the no-op builtin `echo` with `waitMs` to the real
 * server: Fastify, the service, the engine and the durable SQLite store (WAL, synchronous = FULL) in a
 * temporary file. Beside it, in the same process and with the same clients, a bare Fastify route runs
 * the same 5 calls with `Promise.all` in memory. Rounds alternate between the two; runs per second are
 * the median over rounds, the ratio is the median of the rounds' ratios (each toolgraph round against
 * the bare round next to it, so a slow spell of the machine hits both), latencies are pooled. The clients use `node:http` with a
 * keep-alive agent (undici's `fetch` cost about three times as much CPU per request here, CPU that the
 * servers in the same process then lack).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { buildServer } from '../api/server.js';
import { openService } from '../api/service.js';
import type { CallInput } from '../core/calls.js';
import type { Executor } from '../executors/types.js';
import { openSqliteStore } from '../store/sqlite.js';
import type { Store } from '../store/types.js';
import { median, quantile } from './stats.js';
import { settle } from './timing.js';
import { benchConfig } from './workloads.js';

export interface HttpOptions {
  clients: number;
  durationMs: number;
  rounds: number;
  warmupMs: number;
  log?: (line: string) => void;
}

export interface HttpResult {
  runsPerSec: number;
  bareRunsPerSec: number;
  ratio: number;
  ratioMin: number;
  ratioMax: number;
  p50Ms: number;
  p99Ms: number;
  bareP50Ms: number;
  bareP99Ms: number;
  requests: number;
  errors: number;
  clients: number;
}

interface Load {
  perSec: number;
  latencies: number[];
  errors: number;
}

const CALLS: CallInput[] = Array.from({ length: 5 }, (_, i) => ({ id: `c${i + 1}`, tool: 'echo', args: { n: i + 1 } }));
const BODY = JSON.stringify({ calls: CALLS, waitMs: 5000 });

type Check = (status: number, body: unknown) => boolean;

function post(agent: http.Agent, url: URL, body: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as unknown });
          } catch (e) {
            reject(e as Error);
          }
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function load(target: string, clients: number, durationMs: number, check: Check): Promise<Load> {
  const url = new URL(target);
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients });
  const latencies: number[] = [];
  let errors = 0;
  const t0 = performance.now();
  const end = t0 + durationMs;
  const client = async () => {
    while (performance.now() < end) {
      const s = performance.now();
      try {
        const res = await post(agent, url, BODY);
        if (!check(res.status, res.body)) errors++;
      } catch {
        errors++;
      }
      latencies.push(performance.now() - s);
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  agent.destroy();
  return { perSec: (latencies.length * 1000) / (performance.now() - t0), latencies, errors };
}

const succeeded =
  (expect: number): Check =>
  (status, body) =>
    status === expect && (body as { status?: string }).status === 'succeeded' && (body as { calls?: unknown[] }).calls?.length === 5;

/**
 * `dbDir`: where the SQLite file goes (default: the OS temp dir, on disk here; /dev/shm is RAM);
 * `given`: another store to use instead (bench/postgres.ts), closed by the caller.
 */
export async function runHttp(o: HttpOptions, executor: Executor, dbDir: string = tmpdir(), given?: Store): Promise<HttpResult> {
  const dir = mkdtempSync(join(dbDir, 'toolgraph-bench-'));
  const store = given ?? openSqliteStore(join(dir, 'bench.db'));
  const config = benchConfig({ tool: {}, maxCallsPerRun: 1000 });
  // On PostgreSQL, a replica as `serve` runs it (a cluster of one: leases, cluster-wide permits).
  const service = await openService({ config, store, executor });
  const app = buildServer({ service });
  const bare = Fastify({ logger: false });
  const echo = config.catalog.get('echo');
  if (!echo) throw new Error('no echo tool');
  bare.post('/bare', async (req) => {
    const { calls } = req.body as { calls: CallInput[] };
    const results = await Promise.all(
      calls.map((c) =>
        executor.execute({
          runId: 'bare',
          callId: c.id,
          tool: echo,
          args: c.args ?? {},
          attempt: 1,
          signal: new AbortController().signal,
          timeoutMs: 60_000,
        }),
      ),
    );
    return {
      status: 'succeeded',
      calls: calls.map((c, i) => ({ id: c.id, status: 'succeeded', output: (results[i] as { output?: unknown }).output ?? null })),
    };
  });
  try {
    await app.listen({ host: '127.0.0.1', port: 0 });
    await bare.listen({ host: '127.0.0.1', port: 0 });
    const urlOf = (a: typeof app, path: string) => `http://127.0.0.1:${(a.server.address() as AddressInfo).port}${path}`;
    const tg = urlOf(app, '/v1/runs');
    const bareUrl = urlOf(bare as unknown as typeof app, '/bare');
    await load(tg, o.clients, o.warmupMs, () => true);
    await load(bareUrl, o.clients, o.warmupMs, () => true);
    const tgLoads: Load[] = [];
    const bareLoads: Load[] = [];
    for (let r = 0; r < o.rounds; r++) {
      // alternate which goes first, so neither always follows the other's garbage
      const pair: [string, Check, Load[]][] = [
        [tg, succeeded(201), tgLoads],
        [bareUrl, succeeded(200), bareLoads],
      ];
      if (r % 2 === 1) pair.reverse();
      for (const [url, check, into] of pair) {
        await settle(100);
        into.push(await load(url, o.clients, o.durationMs, check));
      }
      const a = tgLoads[tgLoads.length - 1] as Load;
      const b = bareLoads[bareLoads.length - 1] as Load;
      o.log?.(`  http round ${r + 1}: toolgraph ${a.perSec.toFixed(0)} runs/s, bare ${b.perSec.toFixed(0)} runs/s`);
    }
    const all = tgLoads.flatMap((l) => l.latencies);
    const allBare = bareLoads.flatMap((l) => l.latencies);
    const ratios = tgLoads.map((l, i) => l.perSec / (bareLoads[i] as Load).perSec);
    return {
      runsPerSec: median(tgLoads.map((l) => l.perSec)),
      bareRunsPerSec: median(bareLoads.map((l) => l.perSec)),
      ratio: median(ratios),
      ratioMin: Math.min(...ratios),
      ratioMax: Math.max(...ratios),
      p50Ms: quantile(all, 0.5),
      p99Ms: quantile(all, 0.99),
      bareP50Ms: quantile(allBare, 0.5),
      bareP99Ms: quantile(allBare, 0.99),
      requests: all.length + allBare.length,
      errors: [...tgLoads, ...bareLoads].reduce((n, l) => n + l.errors, 0),
      clients: o.clients,
    };
  } finally {
    await app.close();
    await bare.close();
    await service.close();
    if (!given) await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
