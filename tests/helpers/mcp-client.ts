/**
 * Test helpers for toolgraph as an MCP server: a real MCP client (the official SDK's `Client`)
 * connected to toolgraph over Streamable HTTP (`/mcp` on an in-process API, tests/helpers/server.ts)
 * or over stdio (`toolgraph mcp --port 0` as a child process, whose API serves the REST side), plus a
 * REST helper on the same toolgraph for what the tests check: runs, reviews, graphs.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { buildServer } from '../../src/api/server.js';
import { openService } from '../../src/api/service.js';
import { parseConfig } from '../../src/config/load.js';
import { createExecutors } from '../../src/executors/index.js';
import { startMcp } from '../../src/mcp/runtime.js';
import { mcpRoutes, type McpHttpOptions } from '../../src/mcp-server/http.js';
import { openStore, parseStoreValue } from '../../src/store/select.js';
import { BIN, ROOT } from './child.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { FS_SERVER, memoryLogger } from './mcp.js';
import type { ToolServer } from './toolserver.js';

export type TransportKind = 'http' | 'stdio';

export type Rest = (method: string, p: string, opts?: { json?: unknown; token?: string }) => Promise<{ status: number; body: any }>;

export interface McpTarget {
  kind: TransportKind;
  client: Client;
  /** The MCP session id: the runs' `mcp.session` tag. */
  session: string;
  /** The toolgraph REST API of the same service (default token: `restToken`). */
  rest: Rest;
  /** The base URL of the API (`/mcp` is under it). */
  url: string;
  close(): Promise<void>;
}

export interface TargetOptions {
  yaml: string;
  /** The key the MCP client acts with (Authorization header, or TOOLGRAPH_KEY). */
  key?: string;
  /** The key of REST requests. */
  restToken?: string;
  /** HTTP only: options of the /mcp plugin. */
  http?: McpHttpOptions;
}

function restOn(url: string, defaultToken?: string): Rest {
  return async (method, p, opts = {}) => {
    const token = opts.token ?? defaultToken;
    const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
    if (opts.json !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${url}${p}`, { method, headers, ...(opts.json !== undefined ? { body: JSON.stringify(opts.json) } : {}) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
}

/**
 * A toolgraph API in process, as `toolgraph serve` builds it: the config's MCP servers started, a
 * SQLite file in a temp dir, `/mcp` mounted; listening on 127.0.0.1:0.
 */
export async function startHttpApi(yaml: string, http?: McpHttpOptions, o: { db?: string; replica?: string } = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-mcp-http-'));
  const mcp = await startMcp(parseConfig(yaml, 'test.yaml', { env: {}, baseDir: dir }), { logger: memoryLogger() });
  const executor = createExecutors({ mcp: mcp.servers });
  const store = await openStore(parseStoreValue(o.db ?? path.join(dir, 'toolgraph.db'), 'db'), { poolSize: 4 });
  const service = await openService({ config: mcp.config, store, executor, ...(o.replica ? { replica: o.replica } : {}) });
  await service.recover();
  const app = buildServer({ service, plugins: [mcpRoutes(http)] });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  return {
    url,
    service,
    async close() {
      await app.close();
      await service.close();
      await executor.close();
      await mcp.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A client on `/mcp` of an in-process toolgraph API. */
export async function startHttpTarget(o: TargetOptions): Promise<McpTarget> {
  const api = await startHttpApi(o.yaml, o.http);
  const client = new Client({ name: 'toolgraph-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), {
    ...(o.key ? { requestInit: { headers: { authorization: `Bearer ${o.key}` } } } : {}),
  });
  await client.connect(transport);
  return {
    kind: 'http',
    client,
    session: transport.sessionId as string,
    rest: restOn(api.url, o.restToken),
    url: api.url,
    async close() {
      await client.close();
      await api.close();
    },
  };
}

/** A client that starts `toolgraph mcp --port 0` on a fresh SQLite file and talks to it over stdio. */
export async function startStdioTarget(o: TargetOptions): Promise<McpTarget> {
  const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-mcp-stdio-'));
  const config = path.join(dir, 'toolgraph.yaml');
  writeFileSync(config, o.yaml);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== 'TOOLGRAPH_KEY') env[k] = v;
  if (o.key) env.TOOLGRAPH_KEY = o.key;
  env.LOG_LEVEL = 'warn';
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp', '--config', config, '--db', path.join(dir, 'toolgraph.db'), '--port', '0', '--drain-ms', '0'],
    env,
    cwd: ROOT,
    stderr: 'pipe',
  });
  let err = '';
  const lines = new Promise<{ url: string; session: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`toolgraph mcp did not start within 60 s; stderr:\n${err}`)), 60_000);
    transport.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString('utf8');
      const url = /toolgraph serving (http:\/\/\S+?:\d+)\b/.exec(err)?.[1];
      const session = /serving MCP on stdio, session (\S+)/.exec(err)?.[1];
      if (url && session) {
        clearTimeout(timer);
        resolve({ url, session });
      }
    });
  });
  const client = new Client({ name: 'toolgraph-test', version: '1.0.0' });
  await client.connect(transport);
  const { url, session } = await lines;
  return {
    kind: 'stdio',
    client,
    session,
    rest: restOn(url, o.restToken),
    url,
    async close() {
      await client.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function startTarget(kind: TransportKind, o: TargetOptions): Promise<McpTarget> {
  return kind === 'http' ? startHttpTarget(o) : startStdioTarget(o);
}

/** The keys of `catalogYaml`: an agent of tenant acme and an operator. */
export const AGENT = 'agent-key-1234';
export const OPERATOR = 'operator-key-1234';

/**
 * The tests' config: the filesystem MCP server on `dir` (writes and reads per file), http tools on `ts`
 * (`write_doc` and `read_doc` of one `doc:{name}`, `slow` with concurrency 2, `launch` dangerous and
 * reviewed, `rm_doc` denied by policy), builtin `echo`, and the two keys.
 */
export function yamlFor(ts: ToolServer, dir: string): string {
  const http = (p: string) => `{ kind: http, url: "${ts.url(p)}" }`;
  const doc = '{ type: object, properties: { name: { type: string }, hold: { type: boolean } }, required: [name] }';
  return `
mcp:
  servers:
    - name: fs
      command: ${JSON.stringify(process.execPath)}
      args: [${JSON.stringify(FS_SERVER)}, ${JSON.stringify(dir)}]
      trustAnnotations: true
      tools:
        write_file: { writes: ["file:{path}"] }
        read_text_file: { reads: ["file:{path}"] }
tools:
  - name: write_doc
    description: Writes a document
    input: ${doc}
    reads: []
    writes: ["doc:{name}"]
    risk: write
    executor: ${http('/write')}
  - name: read_doc
    description: Reads a document
    input: ${doc}
    reads: ["doc:{name}"]
    risk: read
    idempotent: true
    executor: ${http('/read')}
  - name: slow
    description: Works until released
    input: { type: object }
    reads: []
    writes: []
    risk: read
    concurrency: 2
    executor: ${http('/slow')}
  - name: launch
    description: Launches (dangerous)
    input: { type: object, properties: { target: { type: string } }, required: [target] }
    reads: []
    writes: ["launch:{target}"]
    risk: dangerous
    executor: ${http('/launch')}
  - name: rm_doc
    input: { type: object }
    reads: []
    writes: ["doc:{name}"]
    executor: ${http('/rm')}
  - name: echo
    input: { type: object }
    reads: []
    writes: []
    idempotent: true
    executor: { kind: builtin, name: echo }
policy:
  rules:
    - match: { risk: dangerous }
      review: true
    - match: { tool: "rm_*" }
      deny: nothing is removed here
auth:
  keys:
    - { key: ${AGENT}, tenant: acme, role: agent, maxPriority: 2 }
    - { key: ${OPERATOR}, tenant: ops, role: operator }
defaults: { timeoutMs: 20000 }
`;
}

/** The text of a result's first content. */
export const text = (r: CallToolResult) => (r.content[0] as { text: string }).text;
/** The run behind a result. */
export const runIdOf = (r: CallToolResult) => (r._meta as Record<string, string>)['toolgraph/runId'] as string;
