/**
 * The figures of several replicas (DESIGN §12; `npm run bench:replicas`, scripts/replicas.ts), each
 * measured on real processes (replicas.ts) sharing one throwaway PostgreSQL:
 *
 * - `takeover`: kill -9 a replica that runs held idempotent calls; the time from the kill until each
 *   call's re-run reaches the tool from another replica (the lease running out, a scan claiming the run,
 *   its recovery, the permit and the dispatch).
 * - `sseLatency`: a run owned by one replica, its events streamed (`/v1/runs/{id}/events`) from the
 *   owner and from another replica; the time from the tool's answer (the tool server's clock, this
 *   process) until its `call.succeeded` arrives on each stream.
 * - `throughput`: closed-loop clients submitting runs round-robin to N replicas, each waiting for its run
 *   to end in the same request (`waitMs`); runs per second and the latency of that request.
 * - `permitProbe`: asks for a cluster-wide permit that no limit refuses, made every 100 ms through the cluster's own
 *   code (cluster/permits.ts, under a lease of its own) while the replicas work: the round trip of an
 *   ask, the wait for the cluster's one-at-a-time lock included. Beside it, `limitHandoff`: how long a
 *   limited tool's slot stays empty when one replica's call ends and another replica's call waits for it.
 */
import pg from 'pg';
import { Lease } from '../cluster/lease.js';
import { leaseSql } from '../store/postgres/lease.js';
import { Notifications } from '../cluster/notifications.js';
import { ClusterPermits } from '../cluster/permits.js';
import { parseConfig } from '../config/load.js';
import type { TestPostgres } from './postgres-cluster.js';
import { startCluster, type Attempt, type TestCluster } from './replicas.js';

export function benchYaml(toolUrl: string): string {
  const tool = (name: string, idempotent = true) => `
  - name: ${name}
    reads: []
    writes: []
    idempotent: ${idempotent}
    executor: { kind: http, url: "${toolUrl}/${name}" }`;
  return `
tools:${tool('free_b')}${tool('hold_idem')}${tool('one_at_a_time')}
limits:
  tool: { one_at_a_time: 1 }
defaults:
  failure: partial
`;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

interface SseEvent {
  seq: number;
  type: string;
  callId?: string;
  data: Record<string, unknown>;
}

/** Reads a run's events as they stream; `seen` gets each with its arrival time. */
function follow(url: string, seen: (e: SseEvent, at: number) => void): { done: Promise<void>; close: () => void } {
  const ac = new AbortController();
  const done = (async () => {
    const res = await fetch(url, { signal: ac.signal });
    if (!res.body) throw new Error(`no body from ${url}`);
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      const at = performance.now();
      buf += decoder.decode(chunk, { stream: true });
      let i: number;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = block.split('\n').find((l) => l.startsWith('data: '));
        if (data) seen(JSON.parse(data.slice(6)) as SseEvent, at);
      }
    }
  })().catch((err: unknown) => {
    if ((err as Error).name !== 'AbortError') throw err;
  });
  return { done, close: () => ac.abort() };
}

export interface TakeoverResult {
  leaseMs: number;
  /** Per run: kill → its call's re-run at the tool (ms). */
  runs: number[];
  /** Per kill: the slowest of its runs. */
  kills: number[];
  /** Attempts beyond the re-run (a run handed over once more, after a lease lost on a loaded machine). */
  extra: number;
}

/** `kills` times: a replica running `runsPerKill` held idempotent calls is killed; how long until they run again elsewhere. */
export async function takeover(
  pgc: TestPostgres,
  leaseMs: number,
  kills: number,
  log: (s: string) => void,
  runsPerKill = 2,
): Promise<TakeoverResult> {
  const c = await startCluster(3, benchYaml, { leaseMs, perReplicaUrls: true, pg: pgc, logLevel: 'warn' });
  const out: TakeoverResult = { leaseMs, runs: [], kills: [], extra: 0 };
  try {
    for (let k = 0; k < kills; k++) {
      const victim = k % 3;
      const ids: string[] = [];
      for (let r = 0; r < runsPerKill; r++)
        ids.push(
          (await c.request(victim, 'POST', '/v1/runs', { calls: [{ id: 'h', tool: 'hold_idem', args: { hold: true, k, r } }] })).body
            .id as string,
        );
      for (const id of ids) await until(`${id} to run`, () => c.tools.of(id, 'h')[0], 20_000);
      // Somewhere in the renewal cycle.
      await sleep(Math.floor(Math.random() * (leaseMs / 3)));
      const killed = performance.now();
      await c.replicas[victim]?.kill9();
      c.replicas[victim] = undefined;
      const again = await Promise.all(
        ids.map((id) => until(`${id} to run again`, () => c.tools.of(id, 'h').find((a) => a.replica !== `r${victim}`), leaseMs + 30_000)),
      );
      const ms = again.map((a) => a.start - killed);
      out.runs.push(...ms);
      out.kills.push(Math.max(...ms));
      log(`  lease ${leaseMs} ms, kill ${k + 1}/${kills} (r${victim}): re-run after ${ms.map((x) => x.toFixed(0)).join(', ')} ms`);
      c.tools.release();
      await c.start(victim);
      // A replica that lost its lease meanwhile (a loaded machine) hands a run over once more: its call
      // runs a third time, held too. Released as it comes, and counted.
      for (const id of ids) {
        await until(
          `${id} to end`,
          async () => {
            c.tools.release((a) => a.runId === id);
            const r = await c.request((victim + 1) % 3, 'GET', `/v1/runs/${id}`);
            return r.status === 200 && r.body.endedAt !== null ? true : undefined;
          },
          30_000,
        );
        out.extra += Math.max(0, c.tools.of(id, 'h').length - 2);
      }
    }
  } finally {
    await c.close();
  }
  return out;
}

export interface SseResult {
  /** Tool's answer → `call.succeeded` on the owner's stream, and on another replica's (ms). */
  owner: number[];
  other: number[];
}

/** `runs` runs (`parallel` at a time) of a held call and three chained 20 ms calls, streamed from the owner and another replica. */
export async function sseLatency(pgc: TestPostgres, runs: number, parallel: number): Promise<SseResult> {
  const c = await startCluster(3, benchYaml, { pg: pgc, logLevel: 'warn', leaseMs: 10_000 });
  const out: SseResult = { owner: [], other: [] };
  const one = async (k: number) => {
    const owner = k % 3;
    const other = (k + 1) % 3;
    const calls = [
      { id: 'h', tool: 'hold_idem', args: { hold: true, k } },
      { id: 'c1', tool: 'free_b', args: { after: '${h.output.callId}', ms: 20 } },
      { id: 'c2', tool: 'free_b', args: { after: '${c1.output.callId}', ms: 20 } },
      { id: 'c3', tool: 'free_b', args: { after: '${c2.output.callId}', ms: 20 } },
    ];
    const id = (await c.request(owner, 'POST', '/v1/runs', { calls })).body.id as string;
    const streams = [owner, other].map((i) => {
      const got: { e: SseEvent; at: number }[] = [];
      const s = follow(`${c.replicas[i]!.url}/v1/runs/${id}/events`, (e, at) => got.push({ e, at }));
      return { i, got, s };
    });
    // Both streams live (they have caught up to the held call's start) before anything is timed.
    await until(
      'both streams to be live',
      () => (streams.every((x) => x.got.some(({ e }) => e.type === 'call.started' && e.callId === 'h')) ? true : undefined),
      20_000,
    );
    c.tools.release((a) => a.runId === id);
    await Promise.all(streams.map((x) => x.s.done));
    for (const x of streams) {
      for (const { e, at } of x.got) {
        if (e.type !== 'call.succeeded' || e.callId === undefined) continue;
        const a = c.tools.of(id, e.callId).find((t: Attempt) => t.attempt === e.data.attempt);
        if (a?.end !== undefined) (x.i === owner ? out.owner : out.other).push(at - a.end);
      }
    }
  };
  try {
    let next = 0;
    await Promise.all(
      Array.from({ length: parallel }, async () => {
        while (next < runs) await one(next++);
      }),
    );
  } finally {
    await c.close();
  }
  return out;
}

export interface ThroughputResult {
  /** 0: one process on a SQLite file (no cluster: the baseline). */
  replicas: number;
  runs: number;
  runsPerSec: number;
  /** The request (submit and wait for the end), ms. */
  latency: number[];
  errors: number;
  /** Asks for permits, through the cluster's own code, while the load ran (ms). */
  permitAsks: number[];
  /** PostgreSQL transactions committed per run while the load ran (all replicas and the probe). */
  xactPerRun: number;
}

async function commits(url: string): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('SELECT pg_stat_clear_snapshot()');
    const r = await c.query<{ n: string }>('SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()');
    return Number(r.rows[0]?.n ?? 0);
  } finally {
    await c.end();
  }
}

/**
 * `clients` closed-loop clients, round-robin over `n` replicas, runs of 3 calls of 5 ms, for `seconds`
 * after a warm-up. `n` = 0: one process on a SQLite file instead (no cluster, no permits).
 */
export async function throughput(
  pgc: TestPostgres,
  n: number,
  clients: number,
  seconds: number,
  warmupSeconds = 3,
): Promise<ThroughputResult> {
  const sqlite = n === 0;
  const c = await startCluster(Math.max(1, n), benchYaml, { pg: pgc, logLevel: 'warn', leaseMs: 10_000, sqlite });
  const res: ThroughputResult = { replicas: n, runs: 0, runsPerSec: 0, latency: [], errors: 0, permitAsks: [], xactPerRun: NaN };
  n = Math.max(1, n);
  try {
    const t0 = performance.now();
    const from = t0 + warmupSeconds * 1000;
    const to = from + seconds * 1000;
    let turn = 0;
    const body = { calls: [0, 1, 2].map((k) => ({ id: `c${k}`, tool: 'free_b', args: { ms: 5 } })), waitMs: 30_000 };
    const client = async () => {
      while (performance.now() < to) {
        const i = turn++ % n;
        const sent = performance.now();
        try {
          const r = await c.request(i, 'POST', '/v1/runs', body, 30_000);
          const done = performance.now();
          const ok = r.status === 201 && r.body.status === 'succeeded';
          if (sent >= from && done <= to) {
            if (ok) {
              res.runs++;
              res.latency.push(done - sent);
            } else res.errors++;
          }
        } catch {
          if (sent >= from) res.errors++;
        }
      }
    };
    const probe = sqlite ? Promise.resolve() : permitProbe(c, from, to, res.permitAsks);
    const xact = sqlite ? 0 : await commits(c.db);
    await Promise.all([...Array.from({ length: clients }, client), probe]);
    // Less the probe's own: an ask is one transaction, a give-back one statement.
    if (!sqlite) res.xactPerRun = ((await commits(c.db)) - xact - 2 * res.permitAsks.length) / Math.max(1, res.runs + res.errors);
    res.runsPerSec = res.runs / seconds;
  } finally {
    await c.close();
  }
  return res;
}

/** Asks for a permit every 100 ms between `from` and `to`, as a replica of its own would; each ask's round trip goes into `out`. */
async function permitProbe(c: TestCluster, from: number, to: number, out: number[]): Promise<void> {
  const config = parseConfig(benchYaml('http://127.0.0.1:9'), 'bench');
  const pool = new pg.Pool({ connectionString: c.db, max: 2 });
  const lease = new Lease(leaseSql(pool), 'permit-probe', 10_000, { lost: () => {} });
  const permits = new ClusterPermits(pool, () => lease.instance, config.limits, config.catalog, new Notifications(c.db));
  try {
    await lease.join();
    while (performance.now() < from) await sleep(50);
    for (let k = 0; performance.now() < to; k++) {
      const request = { runId: 'probe', callId: `p${k}`, tenant: 'probe', tool: 'free_b', domain: null, reads: [], writes: [] };
      const sent = performance.now();
      const [answer] = await permits.acquire([request]);
      out.push(performance.now() - sent);
      if (answer?.granted) permits.release([request]);
      await sleep(100);
    }
  } finally {
    permits.close();
    await lease.stop(true);
    await pool.end();
  }
}

export interface HandoffResult {
  /** A slot of a limit of 1, freed by one replica and taken by another's waiting call: end → start (ms). */
  gaps: number[];
  /** The same, when the same replica ran both. */
  sameReplica: number[];
}

/** `runs` runs of one call of a tool limited to 1 at a time, submitted at once across 3 replicas. */
export async function limitHandoff(pgc: TestPostgres, runs: number): Promise<HandoffResult> {
  const c = await startCluster(3, benchYaml, { pg: pgc, logLevel: 'warn', leaseMs: 10_000, perReplicaUrls: true });
  const out: HandoffResult = { gaps: [], sameReplica: [] };
  try {
    const ids = await Promise.all(
      Array.from(
        { length: runs },
        async (_, k) =>
          (await c.request(k % 3, 'POST', '/v1/runs', { calls: [{ id: 'x', tool: 'one_at_a_time', args: { ms: 30, k } }] })).body
            .id as string,
      ),
    );
    for (const id of ids) await c.ended(0, id, 120_000);
    const list = c.tools.attempts.filter((a) => a.tool === 'one_at_a_time').sort((a, b) => a.start - b.start);
    for (let k = 1; k < list.length; k++) {
      const prev = list[k - 1] as Attempt;
      const next = list[k] as Attempt;
      if (prev.end === undefined) continue;
      (prev.replica === next.replica ? out.sameReplica : out.gaps).push(next.start - prev.end);
    }
  } finally {
    await c.close();
  }
  return out;
}
