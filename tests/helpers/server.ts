/**
 * A real toolgraph API for tests: a config parsed from YAML, a SQLite file in a fresh temp dir (or the
 * PostgreSQL database `db` names), the
 * Service (recovered), and the Fastify server listening on 127.0.0.1:0. Requests go through global
 * fetch. `close()` stops the server, the engine (aborting held tool requests) and the store, then
 * removes the temp dir.
 *
 * Also: `startToolApi()`, the usual setup of the API tests (a ToolServer, and an Api whose catalog calls
 * it); `reopen()`, a second server in process on an Api's SQLite file; `expectApiError()`; `sse()`, a
 * small Server-Sent Events reader over fetch; and `catalogYaml()`, a catalog of http tools served by a
 * ToolServer (tests/helpers/toolserver.ts) plus builtin ones.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import net from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildServer } from '../../src/api/server.js';
import { openService, type Service } from '../../src/api/service.js';
import { parseConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/types.js';
import { openStore, parseStoreValue } from '../../src/store/select.js';
import type { Store } from '../../src/store/types.js';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { expect, inject } from 'vitest';
import { ToolServer } from './toolserver.js';

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed body when it is JSON, else undefined. */
  body: T;
}

export interface RequestOptions {
  /** A JSON body (serialized, with content-type application/json). */
  json?: unknown;
  /** A raw body sent as is (set `contentType` yourself). */
  raw?: string;
  contentType?: string;
  /** Bearer key. */
  token?: string;
  headers?: Record<string, string>;
}

export interface Api {
  url: string;
  config: Config;
  service: Service;
  store: Store;
  app: FastifyInstance;
  dbFile: string;
  request<T = any>(method: string, path: string, opts?: RequestOptions): Promise<ApiResponse<T>>;
  get<T = any>(path: string, opts?: RequestOptions): Promise<ApiResponse<T>>;
  post<T = any>(path: string, json?: unknown, opts?: RequestOptions): Promise<ApiResponse<T>>;
  /** Resolves when the run ends (through the engine), with its view as GET returns it. */
  settled(runId: string, token?: string): Promise<any>;
  /**
   * Stops this server like a shutdown (the engine aborts running attempts without recording their
   * end, DESIGN §8) and starts a new one on the same SQLite file, which resumes unfinished runs.
   */
  restart(): Promise<Api>;
  close(): Promise<void>;
}

export interface StartOptions {
  yaml: string;
  heartbeatMs?: number;
  /** Reuse this directory (and its toolgraph.db) instead of a fresh temp dir. */
  dir?: string;
  /** The store: a `postgres://…` URL (tests/helpers/postgres.ts), or a SQLite file; default `toolgraph.db` in `dir`. */
  db?: string;
  /** On PostgreSQL, this replica's name (`--replica-id`); two in-process replicas need two names. */
  replica?: string;
}

const open: Api[] = [];
const toolServers: ToolServer[] = [];

/** The server of a config on a SQLite file, its service recovered; not listening. */
async function serverOn(
  config: Config,
  dbFile: string,
  heartbeatMs?: number,
  replica?: string,
): Promise<{ store: Store; service: Service; app: FastifyInstance }> {
  const store = await openStore(parseStoreValue(dbFile, 'db'), { poolSize: 4 });
  const service = await openService({ config, store, ...(replica ? { replica } : {}) });
  await service.recover();
  const app = buildServer({ service, ...(heartbeatMs !== undefined ? { heartbeatMs } : {}) });
  return { store, service, app };
}

/** Which store the integration tests run on: `TOOLGRAPH_TEST_STORE=postgres` (the `integration-postgres` project) or SQLite. */
export const TEST_STORE: 'sqlite' | 'postgres' = process.env.TOOLGRAPH_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite';

/**
 * The store a test server gets when the test names none: a SQLite file in its folder, or, in the
 * `integration-postgres` project, a fresh database on the run's PostgreSQL cluster (tests/helpers/postgres-global.ts).
 */
export async function testStore(dir: string): Promise<string> {
  if (TEST_STORE === 'sqlite') return path.join(dir, 'toolgraph.db');
  const admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
  const name = `tg_${randomBytes(6).toString('hex')}`;
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return inject('pgAdminUrl').replace(/\/postgres$/, `/${name}`);
}

export async function startApi(opts: StartOptions): Promise<Api> {
  const dir = opts.dir ?? mkdtempSync(path.join(tmpdir(), 'toolgraph-api-'));
  const dbFile = opts.db ?? (await testStore(dir));
  const config = parseConfig(opts.yaml, 'test.yaml', { env: {}, baseDir: dir });
  const { store, service, app } = await serverOn(config, dbFile, opts.heartbeatMs, opts.replica);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const url = `http://127.0.0.1:${port}`;

  const request = async (method: string, p: string, o: RequestOptions = {}): Promise<ApiResponse> => {
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
    let body: string | undefined;
    if (o.json !== undefined) {
      body = JSON.stringify(o.json);
      headers['content-type'] = o.contentType ?? 'application/json';
    } else if (o.raw !== undefined) {
      body = o.raw;
      if (o.contentType) headers['content-type'] = o.contentType;
    } else if (o.contentType) headers['content-type'] = o.contentType;
    const res = await fetch(`${url}${p}`, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    let parsed: unknown;
    if ((res.headers.get('content-type') ?? '').includes('json')) parsed = JSON.parse(text);
    return { status: res.status, headers: res.headers, text, body: parsed };
  };

  let closed = false;
  const stop = async () => {
    closed = true;
    await app.close();
    await service.engine.close();
    // Aborted attempts settle (unrecorded) once their requests do; wait for that before closing the store.
    const deadline = Date.now() + 5000;
    while (service.engine.runningAttempts() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    await service.cluster?.close(true);
    await store.close();
  };
  const api: Api = {
    url,
    config,
    service,
    store,
    app,
    dbFile,
    request,
    get: (p, o) => request('GET', p, o),
    post: (p, json, o) => request('POST', p, { ...(o ?? {}), ...(json !== undefined ? { json } : {}) }),
    async settled(runId, token) {
      await service.engine.wait(runId);
      const r = await request('GET', `/v1/runs/${runId}`, token !== undefined ? { token } : {});
      return r.body;
    },
    async restart() {
      if (closed) throw new Error('this server is closed');
      open.splice(open.indexOf(api), 1);
      await stop();
      return startApi({ ...opts, dir, db: dbFile });
    },
    async close() {
      if (closed) return;
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  open.push(api);
  return api;
}

/** Closes every Api, then every ToolServer of `startToolApi`, started since the last call (for afterEach). */
export async function closeAll(): Promise<void> {
  const list = open.splice(0);
  for (const api of list) await api.close();
  for (const ts of toolServers.splice(0)) await ts.close();
}

/** A ToolServer and an Api whose catalog (`catalogYaml`) calls it; `closeAll()` stops both. */
export async function startToolApi(o: CatalogOptions = {}): Promise<{ ts: ToolServer; api: Api }> {
  const ts = await ToolServer.start();
  toolServers.push(ts);
  const api = await startApi({ yaml: catalogYaml(ts, o) });
  return { ts, api };
}

/**
 * A second server, in process and not listening (use `app.inject`), on the SQLite file of `api`
 * (which keeps running): what a restarted server would read. `close()` stops it.
 */
export async function reopen(api: Api): Promise<{ app: FastifyInstance; close(): Promise<void> }> {
  // On PostgreSQL a replica of another name: one of the same name would end the first one's lease.
  const { store, service, app } = await serverOn(api.config, api.dbFile, undefined, `reopened-${process.pid}`);
  return {
    app,
    async close() {
      await app.close();
      await service.close();
      await store.close();
    },
  };
}

/** An API error answer: this status and `{ error: { code, message } }` with this code and a message. */
export function expectApiError(res: { status: number; body: any }, status: number, code: string): void {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body).toMatchObject({ error: { code, message: expect.any(String) } });
  expect(res.body.error.message.length).toBeGreaterThan(0);
}

/**
 * Sends a request with an exact request target (fetch normalizes paths and cannot send an
 * absolute-form target), e.g. `rawRequest(api.url, 'GET /%761/tools')`. Returns status and body.
 */
export function rawRequest(
  base: string,
  requestLine: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any; text: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      const lines = [
        `${requestLine} HTTP/1.1`,
        `host: ${hostname}:${port}`,
        'connection: close',
        ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
      ];
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
    const chunks: Buffer[] = [];
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', reject);
    socket.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);
      const split = raw.indexOf('\r\n\r\n');
      const head = raw.slice(0, split).toLowerCase();
      let text = raw.slice(split + 4);
      if (head.includes('transfer-encoding: chunked')) {
        // de-chunk: size line, data, CRLF …
        let out = '';
        let rest = text;
        for (;;) {
          const nl = rest.indexOf('\r\n');
          const size = parseInt(rest.slice(0, nl), 16);
          if (!size) break;
          out += rest.slice(nl + 2, nl + 2 + size);
          rest = rest.slice(nl + 2 + size + 2);
        }
        text = out;
      }
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      resolve({ status, body, text });
    });
  });
}

// ---- Server-Sent Events ------------------------------------------------------------------------

export interface SseEvent {
  id?: number;
  event?: string;
  data: any;
}

export interface SseStream {
  status: number;
  headers: Headers;
  events: SseEvent[];
  /** Comments (`: ping`) seen. */
  comments: string[];
  /** Resolves once `n` comments equal to `text` have arrived. */
  waitComments(text: string, n: number, timeoutMs?: number): Promise<void>;
  /** The first event (already received, or the next) matching `pred`. */
  next(pred?: (e: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>;
  /** Resolves when the server closes the stream (with every event received). */
  ended: Promise<SseEvent[]>;
  close(): void;
}

export async function sse(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  let waiters: { pred: (e: SseEvent) => boolean; resolve: (e: SseEvent) => void; reject: (e: Error) => void }[] = [];
  let finished = false;
  let commentWaiters: (() => void)[] = [];

  const dispatch = (block: string) => {
    const e: SseEvent = { data: undefined };
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) {
        comments.push(line.slice(1).trim());
        for (const w of [...commentWaiters]) w();
        continue;
      }
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (field === 'id') e.id = Number(value);
      else if (field === 'event') e.event = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length === 0) return;
    e.data = JSON.parse(data.join('\n'));
    events.push(e);
    const ready = waiters.filter((w) => w.pred(e));
    waiters = waiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.resolve(e);
  };

  const ended = (async () => {
    if (!res.body) return events;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          dispatch(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
        }
      }
    } catch {
      // aborted by close()
    } finally {
      finished = true;
      for (const w of waiters)
        w.reject(new Error(`the stream ended without a matching event (got: ${events.map((e) => e.event).join(', ')})`));
      waiters = [];
    }
    return events;
  })();

  return {
    status: res.status,
    headers: res.headers,
    events,
    comments,
    ended,
    next(pred = () => true, timeoutMs = 10_000) {
      const found = events.find(pred);
      if (found) return Promise.resolve(found);
      if (finished)
        return Promise.reject(new Error(`the stream ended without a matching event (got: ${events.map((e) => e.event).join(', ')})`));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no matching event within ${timeoutMs} ms (got: ${events.map((e) => e.event).join(', ')})`)),
          timeoutMs,
        );
        waiters.push({
          pred,
          resolve: (e) => {
            clearTimeout(timer);
            resolve(e);
          },
          reject: (err) => {
            clearTimeout(timer);
            reject(err);
          },
        });
      });
    },
    waitComments(text, n, timeoutMs = 10_000) {
      const count = () => comments.filter((c) => c === text).length;
      if (count() >= n) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (count() < n) return;
          done();
          resolve();
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`fewer than ${n} "${text}" comments within ${timeoutMs} ms`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          commentWaiters = commentWaiters.filter((w) => w !== check);
        };
        commentWaiters.push(check);
      });
    },
    close: () => controller.abort(),
  };
}

// ---- configs -----------------------------------------------------------------------------------

export interface CatalogOptions {
  /** YAML for `limits:` (a flow mapping), e.g. `{ maxActiveRunsPerTenant: 2 }`. */
  limits?: string;
  /** YAML lines for `auth:` (already indented under `auth:`), e.g. the keys list. */
  auth?: { key: string; tenant: string; role: 'agent' | 'operator'; maxPriority?: number }[];
  /** Extra policy rules (YAML list items, indented 4). */
  rules?: string;
}

/**
 * A catalog whose http tools call `ts`:
 * - `work` (POST /work): pure, read risk, not idempotent — the workhorse (see the ToolServer's default
 *   behaviour: `hold`, `status`, `out` args); `work_idem` is the same, idempotent;
 * - `write_doc` (POST /write): writes `doc:{name}`;
 * - `launch` (POST /launch): dangerous, with a required string `target` (reviewed by policy);
 * plus builtin `echo` and `fail`.
 */
export function catalogYaml(ts: ToolServer, o: CatalogOptions = {}): string {
  const auth =
    o.auth && o.auth.length > 0
      ? `auth:\n  keys:\n${o.auth.map((k) => `    - { key: "${k.key}", tenant: "${k.tenant}", role: ${k.role}${k.maxPriority !== undefined ? `, maxPriority: ${k.maxPriority}` : ''} }`).join('\n')}\n`
      : '';
  return `tools:
  - name: work
    description: Does some work on the tool server
    input: { type: object }
    reads: []
    writes: []
    risk: read
    executor: { kind: http, url: "${ts.url('/work')}" }
  - name: work_idem
    description: Like work, but idempotent (re-run after a restart)
    input: { type: object }
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: http, url: "${ts.url('/work')}" }
  - name: write_doc
    description: Writes a document
    input:
      type: object
      properties: { name: { type: string } }
      required: [name]
    reads: []
    writes: ["doc:{name}"]
    risk: write
    executor: { kind: http, url: "${ts.url('/write')}" }
  - name: launch
    description: Launches something (dangerous)
    input:
      type: object
      properties: { target: { type: string }, hold: { type: boolean } }
      required: [target]
    reads: []
    writes: ["launch:{target}"]
    risk: dangerous
    executor: { kind: http, url: "${ts.url('/launch')}" }
  - name: echo
    input: { type: object }
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: echo }
  - name: fail
    input: { type: object }
    reads: []
    writes: []
    risk: read
    executor: { kind: builtin, name: fail }
policy:
  rules:
    - match: { risk: dangerous }
      review: true
${o.rules ?? ''}
limits: ${o.limits ?? '{}'}
defaults: { timeoutMs: 20000, failure: partial }
${auth}`;
}
