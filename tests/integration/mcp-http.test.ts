/**
 * Streamable HTTP: an MCP server the test starts in process (the SDK's McpServer behind a node:http
 * server on 127.0.0.1:0, one session per client), with a bearer header read from `env:NAME`. Tools are
 * listed and called in parallel over one session; a server that restarts (its session gone) is
 * reconnected, and an idempotent call retried on it; a wrong key is a start error naming the server.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { McpStartError } from '../../src/mcp/runtime.js';
import { startToolgraph, trace, type Toolgraph } from '../helpers/mcp.js';

const KEY = 'sekret-for-tests';

interface HttpMcp {
  url: string;
  port: number;
  /** Sessions opened so far (one per client connection). */
  sessions: () => number;
  /** Calls of `slow` in progress right now, and the most at once. */
  peak: () => number;
  close(): Promise<void>;
}

async function startHttpMcp(port = 0): Promise<HttpMcp> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  let sessions = 0;
  let inFlight = 0;
  let peak = 0;
  const makeServer = () => {
    const s = new McpServer({ name: 'http-test', version: '1.0.0' });
    s.registerTool(
      'add',
      { description: 'Adds', inputSchema: { a: z.number(), b: z.number() }, annotations: { readOnlyHint: true, idempotentHint: true } },
      async ({ a, b }) => ({
        content: [{ type: 'text', text: String(a + b) }],
        structuredContent: { sum: a + b },
      }),
    );
    s.registerTool(
      'slow',
      { description: 'Waits a little', inputSchema: { ms: z.number() }, annotations: { readOnlyHint: true, idempotentHint: true } },
      async ({ ms }) => {
        inFlight++;
        peak = Math.max(peak, inFlight);
        await new Promise((r) => setTimeout(r, ms));
        inFlight--;
        return { content: [{ type: 'text', text: 'done' }] };
      },
    );
    return s;
  };
  const server = http.createServer(async (req, res) => {
    if (req.headers.authorization !== `Bearer ${KEY}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'unauthorized' }));
      return;
    }
    let body: unknown;
    if (req.method === 'POST') {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    }
    const sid = req.headers['mcp-session-id'];
    let transport = typeof sid === 'string' ? transports.get(sid) : undefined;
    if (!transport) {
      if (typeof sid === 'string') {
        res.writeHead(404).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
        return;
      }
      const t: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          sessions++;
          transports.set(id, t);
        },
      });
      await makeServer().connect(t);
      transport = t;
    }
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  const actual = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${actual}/mcp`,
    port: actual,
    sessions: () => sessions,
    peak: () => peak,
    async close() {
      for (const t of transports.values()) await t.close().catch(() => {});
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

describe('Streamable HTTP MCP server', () => {
  let mcp: HttpMcp;
  let tg: Toolgraph;
  const yaml = (url: string) => `
mcp:
  servers:
    - name: remote
      url: ${url}
      headers: { Authorization: "env:REMOTE_AUTH" }
      trustAnnotations: true
      tools:
        add: { retry: { attempts: 3, backoffMs: 20 } }
`;
  beforeAll(async () => {
    mcp = await startHttpMcp();
    tg = await startToolgraph(yaml(mcp.url), { REMOTE_AUTH: `Bearer ${KEY}` });
  });
  afterAll(async () => {
    await tg?.close();
    await mcp?.close();
  });

  it('lists and calls the tools over one session, in parallel', async () => {
    expect(tg.config.catalog.list().map((t) => t.name)).toEqual(['remote__add', 'remote__slow']);
    const view = await tg.run([
      { id: 's1', tool: 'remote__slow', args: { ms: 150 } },
      { id: 's2', tool: 'remote__slow', args: { ms: 150 } },
      { id: 's3', tool: 'remote__slow', args: { ms: 150 } },
      { id: 'sum', tool: 'remote__add', args: { a: 2, b: 40 } },
    ]);
    expect(view.status).toBe('succeeded');
    expect(view.calls[3]?.output).toEqual({ sum: 42 });
    expect(mcp.peak()).toBe(3);
    expect(mcp.sessions()).toBe(1);
    expect(trace(tg.events, view.id, ['call.started']).length).toBe(4);
  });

  it('reconnects to a restarted server and retries the idempotent call on it', async () => {
    const port = mcp.port;
    await mcp.close();
    mcp = await startHttpMcp(port);
    const view = await tg.run([{ id: 'sum', tool: 'remote__add', args: { a: 1, b: 1 } }]);
    expect(view.calls[0]).toMatchObject({ status: 'succeeded', output: { sum: 2 } });
    expect(view.calls[0]?.attempts).toBe(2);
    expect(mcp.sessions()).toBe(1);
  });

  it('a server that refuses the key is a start error naming the server', async () => {
    const err = await startToolgraph(yaml(mcp.url), { REMOTE_AUTH: 'Bearer wrong' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpStartError);
    expect((err as Error).message).toMatch(/^mcp server "remote" could not be reached at http:\/\/127\.0\.0\.1:\d+\/mcp: .*unauthorized/);
  });
});
