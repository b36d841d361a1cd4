/**
 * Several replicas with real parts (DESIGN §12), for the multi-process tests, the chaos script and the
 * replica benchmarks: a throwaway PostgreSQL, N `toolgraph serve` child processes on one database of
 * it, and a tool server that every replica's http tools call, which keeps a log of every attempt with
 * when it began and ended on this process's clock. From that log one counts what really ran at once,
 * whichever replica ran it.
 *
 * Tools answer after `args.ms` milliseconds (default 300), or are held until `release` when
 * `args.hold` is true. An attempt whose connection closes before its answer (an abort, a replica
 * killed) ends `aborted`. With `perReplicaUrls`, replica `i`'s tools are served under `/r<i>/`, so the
 * log also says which replica sent each attempt.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, type ServerChild } from './child.js';
import { startPostgres, type TestPostgres } from './postgres-cluster.js';

export interface Attempt {
  tool: string;
  runId: string;
  callId: string;
  attempt: number;
  key: string | undefined;
  args: Record<string, unknown>;
  /** The replica that sent it (`r<i>`), when the cluster was started with `perReplicaUrls`. */
  replica: string | undefined;
  start: number;
  end: number | undefined;
  aborted: boolean;
  /** The status it was answered with, when not 200 (`args.status`). */
  status?: number;
}

export class ClusterTools {
  readonly attempts: Attempt[] = [];
  private readonly held = new Map<Attempt, () => void>();
  private readonly answered = new Set<(a: Attempt) => void>();
  private server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.keepAliveTimeout = 60_000;
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Told of each attempt as it is answered (not of those aborted). */
  onAnswer(listener: (a: Attempt) => void): () => void {
    this.answered.add(listener);
    return () => this.answered.delete(listener);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let text = '';
    for await (const chunk of req) text += String(chunk);
    let body: { runId: string; callId: string; tool: string; attempt: number; args: Record<string, unknown> };
    try {
      body = JSON.parse(text);
    } catch {
      // Not a tool call of a replica (a probe, a stray request): answered, and the bench goes on.
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"code":"bad_request","message":"not a tool call"}}');
      return;
    }
    const key = req.headers['idempotency-key'];
    const replica = /^\/(r\d+)\//.exec(req.url ?? '')?.[1];
    const a: Attempt = {
      tool: body.tool,
      runId: body.runId,
      callId: body.callId,
      attempt: body.attempt,
      key: typeof key === 'string' ? key : undefined,
      args: body.args,
      replica,
      start: performance.now(),
      end: undefined,
      aborted: false,
    };
    this.attempts.push(a);
    let timer: NodeJS.Timeout | undefined;
    // `args.status` (with `args.retryAfter`, the header's text): the first `args.statusAttempts` (1)
    // attempts answer that status, as a backend that pushes back (DESIGN §4 Backpressure).
    const status = typeof body.args.status === 'number' && body.attempt <= Number(body.args.statusAttempts ?? 1) ? body.args.status : 200;
    const answer = () => {
      clearTimeout(timer);
      this.held.delete(a);
      if (a.end !== undefined) return;
      a.end = performance.now();
      if (res.destroyed) return;
      if (status !== 200) {
        a.status = status;
        const retryAfter = typeof body.args.retryAfter === 'string' ? { 'retry-after': body.args.retryAfter } : {};
        res.writeHead(status, { 'content-type': 'application/json', ...retryAfter });
        res.end('{"error":"busy"}');
        for (const l of this.answered) l(a);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ tool: a.tool, callId: a.callId, attempt: a.attempt }));
      for (const l of this.answered) l(a);
    };
    res.on('close', () => {
      if (a.end !== undefined) return;
      a.end = performance.now();
      a.aborted = true;
      clearTimeout(timer);
      this.held.delete(a);
    });
    if (body.args.hold === true) this.held.set(a, answer);
    else timer = setTimeout(answer, typeof body.args.ms === 'number' ? body.args.ms : 300);
  }

  /** Answers the held attempts that `pred` picks (all by default). */
  release(pred: (a: Attempt) => boolean = () => true): void {
    for (const [a, answer] of [...this.held]) if (pred(a)) answer();
  }

  of(runId: string, callId?: string): Attempt[] {
    return this.attempts.filter((a) => a.runId === runId && (callId === undefined || a.callId === callId));
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** The most attempts among `list` that ran at the same time (an end and a start at one instant do not overlap). */
export function maxOverlap(list: readonly Pick<Attempt, 'start' | 'end'>[]): number {
  const points: [number, number][] = [];
  for (const a of list) {
    points.push([a.start, 1]);
    points.push([a.end ?? Infinity, -1]);
  }
  points.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let n = 0;
  let max = 0;
  for (const [, d] of points) {
    n += d;
    max = Math.max(max, n);
  }
  return max;
}

export interface ClusterOptions {
  /** `store.leaseMs`; default 2000. */
  leaseMs?: number;
  /** Serve replica `i`'s tools under `/r<i>/` (its own config file), so attempts say who sent them. */
  perReplicaUrls?: boolean;
  /** The replicas' LOG_LEVEL; default info. */
  logLevel?: string;
  /** A PostgreSQL to use (a new database of it) instead of starting one; `close` leaves it running. */
  pg?: TestPostgres;
  /** A SQLite file instead of a PostgreSQL database (one replica only: a baseline). */
  sqlite?: boolean;
  /** The replicas reach PostgreSQL through its Unix socket instead of TCP on 127.0.0.1. */
  unixSocket?: boolean;
  /** Options of node for each replica (`--cpu-prof`). */
  nodeArgs?: string[];
  /** `store.takeoverConcurrency` (the default when absent). */
  takeoverConcurrency?: number;
}

export interface TestCluster {
  pg: TestPostgres;
  db: string;
  tools: ClusterTools;
  replicas: (ServerChild | undefined)[];
  /** The config file (of replica 0, with `perReplicaUrls`). */
  config: string;
  leaseMs: number;
  /** Starts replica `i` (again), named `r<i>`. */
  start(i: number): Promise<ServerChild>;
  /** A JSON request to replica `i`; `timeoutMs` (default none) aborts it. */
  // biome-ignore lint/suspicious/noExplicitAny: a bench harness reads any answer's fields
  request<T = any>(i: number, method: string, p: string, body?: unknown, timeoutMs?: number): Promise<{ status: number; body: T }>;
  /** Polls `GET /v1/runs/{id}` on replica `i` until the run has ended; its view. */
  // biome-ignore lint/suspicious/noExplicitAny: a bench harness reads any answer's fields
  ended(i: number, runId: string, timeoutMs?: number): Promise<any>;
  close(): Promise<void>;
}

/** A cluster of `n` replicas; `yaml(toolUrl)` is their config (`store.leaseMs` is added). `opts` may be the lease (ms). */
export async function startCluster(n: number, yaml: (toolUrl: string) => string, opts: number | ClusterOptions = {}): Promise<TestCluster> {
  const o: ClusterOptions = typeof opts === 'number' ? { leaseMs: opts } : opts;
  const leaseMs = o.leaseMs ?? 2000;
  const pg = o.pg ?? (await startPostgres());
  const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-replicas-'));
  const created = o.sqlite ? path.join(dir, 'toolgraph.db') : await pg.createDatabase();
  const db = !o.sqlite && o.unixSocket ? pg.socketUrl(created) : created;
  const tools = new ClusterTools();
  await tools.start();
  const configOf = (i: number) => {
    const file = path.join(dir, o.perReplicaUrls ? `toolgraph-r${i}.yaml` : 'toolgraph.yaml');
    writeFileSync(
      file,
      `${yaml(o.perReplicaUrls ? `${tools.url}/r${i}` : tools.url)}\nstore:\n  leaseMs: ${leaseMs}\n${o.takeoverConcurrency ? `  takeoverConcurrency: ${o.takeoverConcurrency}\n` : ''}`,
    );
    return file;
  };
  const config = configOf(0);
  const c: TestCluster = {
    pg,
    db,
    tools,
    config,
    leaseMs,
    replicas: [],
    async start(i) {
      const child = await startServer({
        config: o.perReplicaUrls ? configOf(i) : config,
        db,
        args: ['--replica-id', `r${i}`],
        env: { LOG_LEVEL: o.logLevel ?? 'info' },
        ...(o.nodeArgs ? { nodeArgs: o.nodeArgs } : {}),
      });
      c.replicas[i] = child;
      return child;
    },
    async request(i, method, p, body, timeoutMs) {
      const child = c.replicas[i];
      if (!child) throw new Error(`replica ${i} is not running`);
      const res = await fetch(child.url + p, {
        method,
        headers: body !== undefined ? { 'content-type': 'application/json' } : {},
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        ...(timeoutMs !== undefined ? { signal: AbortSignal.timeout(timeoutMs) } : {}),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    },
    async ended(i, runId, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const r = await c.request(i, 'GET', `/v1/runs/${runId}`);
        if (r.status === 200 && r.body.endedAt !== null && r.body.status !== 'needs_replan') return r.body;
        if (Date.now() > deadline) throw new Error(`run ${runId} did not end in ${timeoutMs} ms: ${JSON.stringify(r.body)}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async close() {
      for (const r of c.replicas) await r?.kill9();
      await tools.close();
      if (!o.pg) await pg.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await Promise.all(Array.from({ length: n }, (_, i) => c.start(i)));
  } catch (e) {
    await c.close();
    throw e;
  }
  return c;
}
