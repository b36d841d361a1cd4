/**
 * The phases of `npm run bench:cluster` (cluster.ts, DESIGN §12 "It scales"): closed-loop load on one
 * SQLite process or N PostgreSQL replicas under one limit config, with the PostgreSQL work it caused
 * (statements, CPU of the replicas and of the database), and a takeover of many runs.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { cpus } from 'node:os';
import { spawnSync } from 'node:child_process';
import pg from 'pg';
import type { TestPostgres } from '../src/bench/postgres-cluster.js';
import { startCluster, type TestCluster } from '../src/bench/replicas.js';

export type Limit = 'none' | 'tenant' | 'tool' | 'held';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The config of a load phase: builtin `echo`, a long `sleep`, and the limit of the phase, and no other
 * (no `maxActiveRunsPerTenant`: the default config has none, and admission is a limit of its own).
 */
/** `cap`: the tenant's or the tool's limit (64; with 16 clients of 5-call runs of instant calls it is not reached, with 8 it is). */
export function loadYaml(limit: Limit, cap = 64): string {
  return `
tools:
  - name: echo
    reads: []
    writes: []
    idempotent: true
    executor: { kind: builtin, name: echo }${limit === 'tool' ? `\n    concurrency: ${cap}` : ''}
  - name: long
    reads: []
    writes: []
    idempotent: true
    timeoutMs: 3600000
    executor: { kind: builtin, name: sleep }
limits:
  maxCallsPerRun: 1000${limit === 'tenant' || limit === 'held' ? `\n  tenant: { default: ${cap} }` : ''}
`;
}

/** Five echo calls: two roots, two that use their outputs, one that joins them (as bench:load). */
function batch(i: number) {
  return {
    tenant: 'bench',
    calls: [
      { id: 'c1', tool: 'echo', args: { i } },
      { id: 'c2', tool: 'echo', args: { j: i } },
      { id: 'c3', tool: 'echo', args: { from: '${c1.output.i}' } },
      { id: 'c4', tool: 'echo', args: { from: '${c2.output.j}' } },
      { id: 'c5', tool: 'echo', args: { a: '${c3.output}', b: '${c4.output}' } },
    ],
    waitMs: 60_000,
  };
}

/** CPU seconds (user + system) of a process, from /proc; 0 once it is gone. */
function cpuOf(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) / 100;
  } catch {
    return 0;
  }
}

/** The database server's processes (the postmaster on `port` and its children). */
function postgresPids(port: number): number[] {
  const main = spawnSync('pgrep', ['-f', `postgres.*-p ${port} `], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter(Boolean)
    .map(Number);
  const kids = main.flatMap((p) =>
    spawnSync('pgrep', ['-P', String(p)], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean)
      .map(Number),
  );
  return [...main, ...kids];
}

/** The machine's CPU time, busy and in all (jiffies summed over cores, /proc/stat). */
function machineCpu(): { busy: number; total: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]?.trim().split(/\s+/).slice(1).map(Number) ?? [];
  const total = f.reduce((a, b) => a + b, 0);
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  return { busy: total - idle, total };
}

function cpuSnapshot(pids: number[]): Map<number, number> {
  return new Map(pids.map((p) => [p, cpuOf(p)]));
}

function cpuSince(before: Map<number, number>, pids: number[]): number {
  let s = 0;
  for (const p of pids) s += cpuOf(p) - (before.get(p) ?? 0);
  return s;
}

interface DbCounters {
  statements: number;
}

async function dbCounters(urls: readonly string[]): Promise<DbCounters> {
  let statements = 0;
  for (const url of urls) statements += (await dbCountersOf(url)).statements;
  return { statements };
}

async function dbCountersOf(url: string): Promise<DbCounters> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    let statements = Number.NaN;
    try {
      await c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      const s = await c.query<{ n: string }>(
        'SELECT coalesce(sum(calls), 0) AS n FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())',
      );
      statements = Number(s.rows[0]?.n ?? 0);
    } catch {
      // pg_stat_statements not loaded.
    }
    return { statements };
  } finally {
    await c.end();
  }
}

/** The statements that ran most often in the database (pg_stat_statements), per run. */
export async function topStatements(url: string, runs: number, n = 12): Promise<string[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query<{ calls: string; ms: number; query: string }>(
      `SELECT calls, total_exec_time AS ms, query FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY calls DESC LIMIT $1`,
      [n],
    );
    return r.rows.map(
      (x) =>
        `${(Number(x.calls) / runs).toFixed(2)}/run  ${(x.ms / Number(x.calls)).toFixed(3)} ms  ${x.query.replace(/\s+/g, ' ').slice(0, 140)}`,
    );
  } catch {
    return [];
  } finally {
    await c.end();
  }
}

export interface LoadResult {
  store: 'sqlite' | 'postgres';
  replicas: number;
  /** As many services sharing nothing (`LoadOptions.separate`), not one cluster. */
  separate?: boolean;
  limit: Limit;
  runs: number;
  errors: number;
  runsPerSec: number;
  /**
   * PostgreSQL statements per run (NaN on SQLite): top-level ones (pg_stat_statements, `track=top`), each a
   * round trip, and outside a transaction block a commit. (`pg_stat_database.xact_commit` is not used:
   * backends report it up to a second late, which made it over-count in some phases.)
   */
  statementsPerRun: number;
  /** CPU ms per run: of the replicas (all together), of the database. */
  replicaCpuPerRun: number;
  dbCpuPerRun: number;
  /** CPU ms per run of this process: the closed-loop clients. */
  clientCpuPerRun: number;
  /** The machine's CPU busy over the phase (all processes, from /proc/stat), in cores. */
  busyCores: number;
  /** Calls per run that asked the database for a permit, and that a replica granted from its slices. */
  asksPerRun: number;
  slicedPerRun: number;
  db: string;
}

/** How the load's clients send (`LoadOptions.client`). */
export type ClientKind = 'raw' | 'node' | 'fetch';

/** What a client reads of an answer: its status, and the run's status in its body. */
type Answer = { status: number; body: { status?: string } };

/**
 * One kept-alive HTTP/1.1 connection of the load's clients, spoken over a plain socket, as a load
 * generator such as wrk does: a request written in one piece, the answer read by its `content-length`.
 * Less than half of node:http's CPU per request (0.05 ms per run against 0.12 here), CPU that the
 * processes under test have on this machine; nothing of the server's side changes.
 */
class RawConnection {
  private buf: Buffer = Buffer.alloc(0);
  private pending: { resolve: (r: Answer) => void; reject: (e: Error) => void } | undefined;
  readonly socket: net.Socket;
  broken = false;

  constructor(port: number) {
    this.socket = net.connect({ host: '127.0.0.1', port, noDelay: true });
    this.socket.on('data', (d: Buffer) => this.read(d));
    const fail = (e: Error) => {
      this.broken = true;
      this.pending?.reject(e);
      this.pending = undefined;
    };
    this.socket.on('error', fail);
    this.socket.on('close', () => fail(new Error('connection closed')));
  }

  post(path: string, data: string): Promise<Answer> {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.socket.write(
        `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(data)}\r\n\r\n${data}`,
      );
    });
  }

  private read(d: Buffer): void {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    const end = this.buf.indexOf('\r\n\r\n');
    if (end < 0) return;
    const head = this.buf.toString('latin1', 0, end);
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    const p = this.pending;
    if (!length) {
      this.broken = true;
      this.socket.destroy();
      p?.reject(new Error(`an answer without content-length: ${head.split('\r\n')[0]}`));
      return;
    }
    const total = end + 4 + Number(length[1]);
    if (this.buf.length < total) return;
    const body = this.buf.toString('utf8', end + 4, total);
    this.buf = this.buf.subarray(total);
    this.pending = undefined;
    try {
      p?.resolve({ status: Number(head.slice(9, 12)), body: JSON.parse(body) });
    } catch (err) {
      p?.reject(err as Error);
    }
  }
}

/** The idle raw connections to each replica (by port), reused by any client. */
const idle = new Map<number, RawConnection[]>();

/** POSTs JSON to replica `i` on a kept-alive raw connection; the status and the parsed body. */
async function postRaw(c: TestCluster, i: number, path: string, body: unknown): Promise<Answer> {
  const child = c.replicas[i];
  if (!child) throw new Error(`replica ${i} is not running`);
  const port = Number(new URL(child.url).port);
  const conn = idle.get(port)?.pop() ?? new RawConnection(port);
  const timer = setTimeout(() => conn.socket.destroy(new Error('timed out')), 60_000);
  try {
    return await conn.post(path, JSON.stringify(body));
  } finally {
    clearTimeout(timer);
    if (!conn.broken) {
      const list = idle.get(port) ?? [];
      list.push(conn);
      idle.set(port, list);
    }
  }
}

/** Closes every raw connection (a phase's replicas are going away). */
function closeRaw(): void {
  for (const list of idle.values()) for (const conn of list) conn.socket.destroy();
  idle.clear();
}

/** Kept-alive connections for the load's clients (`--keep-alive`). */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** POSTs JSON to replica `i` on a kept-alive connection; the status and the parsed body. */
function post(c: TestCluster, i: number, path: string, body: unknown): Promise<Answer> {
  const child = c.replicas[i];
  if (!child) return Promise.reject(new Error(`replica ${i} is not running`));
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${child.url}${path}`,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
        timeout: 60_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (x: Buffer) => chunks.push(x));
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
          } catch (err) {
            reject(err);
          }
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(data);
  });
}

/** The permit counters of every replica of the clusters, summed (their `/metrics`). */
async function permitCounters(clusters: readonly TestCluster[]): Promise<{ asks: number; sliced: number }> {
  const out = { asks: 0, sliced: 0 };
  for (const r of clusters.flatMap((c) => c.replicas)) {
    if (!r) continue;
    try {
      const text = await (await fetch(`${r.url}/metrics`)).text();
      const num = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
      out.asks += num('toolgraph_replica_permit_asks_total');
      out.sliced += num('toolgraph_replica_permits_sliced_total');
    } catch {
      // A replica that does not answer counts nothing.
    }
  }
  return out;
}

export interface LoadOptions {
  pg: TestPostgres;
  /** 0: one process on a SQLite file. */
  replicas: number;
  limit: Limit;
  clients: number;
  warmupSeconds: number;
  seconds: number;
  /** Long calls started before the load, when `limit` is `held`. */
  held: number;
  /** The tenant's or the tool's limit (default 64). */
  cap?: number;
  nodeArgs?: string[];
  /**
   * How the clients send (default `raw`): `raw`, kept-alive HTTP/1.1 over plain sockets (`RawConnection`);
   * `node`, kept-alive `node:http`; `fetch`, undici's. Each costs more CPU per request than the one
   * before, CPU that the processes under test then lack on this machine.
   */
  client?: ClientKind;
  /** The replicas reach PostgreSQL through its Unix socket. */
  unixSocket?: boolean;
  /** Called before the cluster closes (a profile of its database). */
  inspect?: (c: TestCluster, r: LoadResult) => Promise<void>;
  /**
   * `replicas` services that share nothing but the PostgreSQL server: one-replica clusters, each on a
   * database of its own, the clients split among them. What that many processes do on this machine
   * with no coordination at all, the bound of a cluster of as many replicas here. Not with `held`.
   */
  separate?: boolean;
}

/** Starts the long calls: runs of 50 `long` calls, each run its own tenant (under a tenant limit of 64), all running. */
async function holdLongCalls(c: TestCluster, n: number, replicas: number): Promise<void> {
  const perRun = 50;
  const ids: { i: number; id: string }[] = [];
  for (let k = 0; k * perRun < n; k++) {
    const calls = Array.from({ length: Math.min(perRun, n - k * perRun) }, (_, j) => ({
      id: `l${j}`,
      tool: 'long',
      args: { ms: 3_600_000 },
    }));
    const i = k % replicas;
    const r = await c.request(i, 'POST', '/v1/runs', { tenant: `long-${k}`, calls });
    if (r.status !== 201 && r.status !== 202) throw new Error(`long calls refused: ${r.status} ${JSON.stringify(r.body)}`);
    ids.push({ i, id: r.body.id as string });
  }
  const deadline = Date.now() + 120_000;
  for (const { i, id } of ids) {
    for (;;) {
      const r = await c.request(i, 'GET', `/v1/runs/${id}`);
      const calls = (r.body.calls ?? []) as { status: string }[];
      if (calls.length > 0 && calls.every((x) => x.status === 'running')) break;
      if (Date.now() > deadline) throw new Error(`long calls of ${id} not all running: ${JSON.stringify(calls.map((x) => x.status))}`);
      await sleep(100);
    }
  }
}

/** One load phase: closed-loop clients round-robin over the replicas, each run submitted with `waitMs`. */
export async function loadPhase(o: LoadOptions): Promise<LoadResult> {
  const sqlite = o.replicas === 0;
  const n = Math.max(1, o.replicas);
  const separate = o.separate === true && !sqlite;
  if (separate && o.limit === 'held') throw new Error('separate services: not with held calls');
  const start = (replicas: number) =>
    startCluster(replicas, () => loadYaml(o.limit, o.cap), {
      pg: o.pg,
      logLevel: 'warn',
      leaseMs: 10_000,
      sqlite,
      ...(o.unixSocket ? { unixSocket: true } : {}),
      ...(o.nodeArgs ? { nodeArgs: o.nodeArgs } : {}),
    });
  const clusters: TestCluster[] = [];
  for (let k = 0; k < (separate ? n : 1); k++) clusters.push(await start(separate ? 1 : n));
  const c = clusters[0] as TestCluster;
  /** Where the clients send, in turn: every replica of every cluster. */
  const targets = clusters.flatMap((x) => x.replicas.map((_, i) => ({ c: x, i })));
  const res: LoadResult = {
    store: sqlite ? 'sqlite' : 'postgres',
    replicas: n,
    ...(separate ? { separate: true } : {}),
    limit: o.limit,
    runs: 0,
    errors: 0,
    runsPerSec: 0,
    statementsPerRun: Number.NaN,
    replicaCpuPerRun: Number.NaN,
    dbCpuPerRun: Number.NaN,
    clientCpuPerRun: Number.NaN,
    busyCores: Number.NaN,
    asksPerRun: Number.NaN,
    slicedPerRun: Number.NaN,
    db: c.db,
  };
  try {
    if (o.limit === 'held') await holdLongCalls(c, o.held, n);
    const t0 = performance.now();
    const from = t0 + o.warmupSeconds * 1000;
    const to = from + o.seconds * 1000;
    let turn = 0;
    const client = async () => {
      while (performance.now() < to) {
        const t = targets[turn++ % targets.length] as { c: TestCluster; i: number };
        const sent = performance.now();
        try {
          const r =
            (o.client ?? 'raw') === 'raw'
              ? await postRaw(t.c, t.i, '/v1/runs', batch(turn))
              : o.client === 'node'
                ? await post(t.c, t.i, '/v1/runs', batch(turn))
                : await t.c.request(t.i, 'POST', '/v1/runs', batch(turn), 60_000);
          const done = performance.now();
          const ok = r.status === 201 && r.body.status === 'succeeded';
          if (sent >= from && done <= to) {
            if (ok) res.runs++;
            else res.errors++;
          }
        } catch {
          if (sent >= from) res.errors++;
        }
      }
    };
    const measure = async () => {
      while (performance.now() < from) await sleep(20);
      const replicaPids = targets.map((t) => t.c.replicas[t.i]?.proc.pid ?? 0).filter((p) => p > 0);
      const dbPids = sqlite ? [] : postgresPids(o.pg.port);
      const cpuR = cpuSnapshot(replicaPids);
      const mine = process.cpuUsage();
      const machine = machineCpu();
      const cpuD = cpuSnapshot(dbPids);
      const before = sqlite ? undefined : await dbCounters(clusters.map((x) => x.db));
      const permitsBefore = sqlite ? undefined : await permitCounters(clusters);
      while (performance.now() < to) await sleep(20);
      const permitsAfter = sqlite ? undefined : await permitCounters(clusters);
      const rCpu = cpuSince(cpuR, replicaPids);
      const used = process.cpuUsage(mine);
      const cCpu = (used.user + used.system) / 1e6;
      const machineAfter = machineCpu();
      const busy = (machineAfter.busy - machine.busy) / Math.max(1e-9, (machineAfter.total - machine.total) / cpus().length);
      const dCpu = cpuSince(cpuD, sqlite ? [] : postgresPids(o.pg.port));
      const after = sqlite ? undefined : await dbCounters(clusters.map((x) => x.db));
      return { rCpu, dCpu, cCpu, busy, before, after, permitsBefore, permitsAfter };
    };
    const [m] = await Promise.all([measure(), ...Array.from({ length: o.clients }, client)]);
    const done = Math.max(1, res.runs + res.errors);
    res.runsPerSec = res.runs / o.seconds;
    res.replicaCpuPerRun = (m.rCpu * 1000) / done;
    res.clientCpuPerRun = (m.cCpu * 1000) / done;
    res.busyCores = m.busy;
    if (!sqlite && m.before && m.after) {
      // Less the two statements of reading the counter in each database (the first read's sum, the second's CREATE EXTENSION).
      res.statementsPerRun = (m.after.statements - m.before.statements - 2 * clusters.length) / done;
      res.dbCpuPerRun = (m.dCpu * 1000) / done;
    }
    if (m.permitsBefore && m.permitsAfter) {
      res.asksPerRun = (m.permitsAfter.asks - m.permitsBefore.asks) / done;
      res.slicedPerRun = (m.permitsAfter.sliced - m.permitsBefore.sliced) / done;
    }
    await o.inspect?.(c, res);
  } finally {
    closeRaw();
    for (const x of clusters) {
      await x.close();
      if (!sqlite) await settle(o.pg, new URL(x.db).pathname.slice(1));
    }
  }
  return res;
}

/**
 * Ends a PostgreSQL phase so that the next one starts from the same state: its database is dropped (no
 * autovacuum of it runs later) and a CHECKPOINT writes out the pages it left dirty. Without this, the
 * server digested one phase's writes during the next: the 2-replica phase, which follows the 1-replica
 * one, paid for it, while the 1-replica phase follows the SQLite one, when the server is idle.
 */
async function settle(pgc: TestPostgres, db: string): Promise<void> {
  const admin = new pg.Client({ connectionString: pgc.url() });
  await admin.connect();
  try {
    // The name is one `createDatabase` made (tg_ and hex), not input.
    await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    await admin.query('CHECKPOINT');
  } finally {
    await admin.end();
  }
}

/** The config of a takeover: one idempotent call held at an HTTP tool (bench:cluster and bench:takeover). */
export function holdYaml(toolUrl: string): string {
  return `
tools:
  - name: hold_idem
    reads: []
    writes: []
    idempotent: true
    executor: { kind: http, url: "${toolUrl}/hold_idem" }
defaults:
  failure: partial
`;
}

export interface TakeoverResult {
  runs: number;
  leaseMs: number;
  /** Kill → the last run's call re-run at the tool (ms); NaN if some never were (see `lost`). */
  lastMs: number;
  /** Kill → half of them re-run (ms). */
  p50Ms: number;
  /** Runs whose call was not re-run within the lease + 30 s. */
  lost: number;
  /** Runs whose call ran more than twice (handed over again: allowed, the tool is idempotent). */
  extra: number;
  /** Runs that did not end `succeeded` once released. */
  notSucceeded: number;
}

/** `runs` runs of one held idempotent call each on replica 0 of 2; kill -9 of replica 0; until replica 1 re-ran them all. */
export async function takeoverPhase(pgc: TestPostgres, runs: number, leaseMs: number, log: (s: string) => void): Promise<TakeoverResult> {
  const c = await startCluster(2, holdYaml, { pg: pgc, logLevel: 'warn', leaseMs, perReplicaUrls: true });
  try {
    const ids: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < runs) {
          const k = next++;
          const r = await c.request(0, 'POST', '/v1/runs', { calls: [{ id: 'h', tool: 'hold_idem', args: { hold: true, k } }] });
          ids.push(r.body.id as string);
        }
      }),
    );
    const running = () => new Set(c.tools.attempts.filter((a) => a.replica === 'r0').map((a) => a.runId)).size;
    const deadline = Date.now() + 120_000;
    while (running() < runs) {
      if (Date.now() > deadline) throw new Error(`only ${running()} of ${runs} held calls started`);
      await sleep(50);
    }
    log(`  takeover: ${runs} held calls running on r0; kill -9`);
    const killed = performance.now();
    await c.replicas[0]?.kill9();
    c.replicas[0] = undefined;
    const firstAgain = new Map<string, number>();
    const until = killed + leaseMs + 30_000;
    let seen = 0;
    while (firstAgain.size < runs && performance.now() < until) {
      const list = c.tools.attempts;
      for (; seen < list.length; seen++) {
        const a = list[seen];
        if (a && a.replica === 'r1' && !firstAgain.has(a.runId)) firstAgain.set(a.runId, a.start - killed);
      }
      await sleep(20);
    }
    const times = [...firstAgain.values()].sort((a, b) => a - b);
    const out: TakeoverResult = {
      runs,
      leaseMs,
      lastMs: firstAgain.size === runs ? (times[times.length - 1] ?? Number.NaN) : Number.NaN,
      p50Ms: times[Math.floor(times.length / 2)] ?? Number.NaN,
      lost: runs - firstAgain.size,
      extra: 0,
      notSucceeded: 0,
    };
    // Let them end: release every held call (again as new attempts come), then read each run.
    const endBy = Date.now() + 60_000;
    const open = new Set(ids);
    while (open.size > 0 && Date.now() < endBy) {
      c.tools.release();
      const batchIds = [...open].slice(0, 200);
      await Promise.all(
        batchIds.map(async (id) => {
          const r = await c.request(1, 'GET', `/v1/runs/${id}`);
          if (r.status === 200 && r.body.endedAt !== null) {
            open.delete(id);
            if (r.body.status !== 'succeeded') out.notSucceeded++;
          }
        }),
      );
      await sleep(50);
    }
    out.notSucceeded += open.size;
    const perRun = new Map<string, number>();
    for (const a of c.tools.attempts) perRun.set(a.runId, (perRun.get(a.runId) ?? 0) + 1);
    for (const n of perRun.values()) if (n > 2) out.extra++;
    return out;
  } finally {
    await c.close();
  }
}
