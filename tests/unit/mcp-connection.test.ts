/**
 * McpConnection with an in-process server (the SDK's Server over its InMemoryTransport, through the
 * connection's `transport` option): the mcp executor's whole path on a live connection (the output,
 * the server's own tool name, cancel reaching the server), and a connection that is gone failing
 * retryably. The stdio and HTTP transports are in tests/integration/mcp-*.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { ToolManifest } from '../../src/core/tool.js';
import { createMcpExecutor } from '../../src/executors/mcp.js';
import { McpConnection } from '../../src/mcp/connection.js';

const seen: string[] = [];

async function inProcess(): Promise<McpConnection> {
  const [client, serverEnd] = InMemoryTransport.createLinkedPair();
  const server = new Server({ name: 'p', version: '1' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      { name: 'echo', inputSchema: { type: 'object' } },
      { name: 'hang', inputSchema: { type: 'object' } },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    seen.push(`call ${req.params.name}`);
    if (req.params.name === 'hang') {
      return new Promise((resolve) =>
        extra.signal.addEventListener('abort', () => {
          seen.push('cancelled');
          resolve({ content: [] });
        }),
      );
    }
    return { content: [{ type: 'text', text: 'ok' }], structuredContent: req.params.arguments ?? {} };
  });
  await server.connect(serverEnd);
  const connection = new McpConnection(
    { name: 'p', args: [], prefix: 'p__', trustAnnotations: true, scope: 'tenant', tools: {} },
    { transport: () => client },
  );
  await connection.start();
  return connection;
}

const manifest = (tool: string): ToolManifest => ({
  name: `p__${tool}`,
  scope: 'tenant',
  risk: 'read',
  idempotent: true,
  timeoutMs: 5000,
  after: [],
  requires: [],
  executor: { kind: 'mcp', server: 'p', tool },
});
const request = (tool: string, signal = new AbortController().signal) => ({
  runId: 'r',
  callId: 'c',
  tool: manifest(tool),
  args: { a: 1 },
  attempt: 1,
  timeoutMs: 5000,
  signal,
});

let open: McpConnection | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
  seen.length = 0;
});

describe('McpConnection in process', () => {
  it('lists the tools and calls one through the executor: structuredContent is the output', async () => {
    open = await inProcess();
    expect((await open.listTools()).map((t) => t.name)).toEqual(['echo', 'hang']);
    const executor = createMcpExecutor(new Map([['p', open]]));
    expect(await executor.execute(request('echo'))).toEqual({ ok: true, output: { a: 1 } });
    expect(seen).toEqual(['call echo']);
  });

  it('cancel reaches the server (notifications/cancelled) and the call is cancelled', async () => {
    open = await inProcess();
    const executor = createMcpExecutor(new Map([['p', open]]));
    const ac = new AbortController();
    const pending = executor.execute(request('hang', ac.signal));
    await expect.poll(() => seen).toEqual(['call hang']);
    ac.abort();
    expect(await pending).toMatchObject({ ok: false, retryable: false, error: { code: 'cancelled' } });
    await expect.poll(() => seen).toEqual(['call hang', 'cancelled']);
  });

  it('a closed connection fails the call retryably, without calling the server', async () => {
    open = await inProcess();
    await open.close();
    const r = await createMcpExecutor(new Map([['p', open]])).execute(request('echo'));
    expect(r).toMatchObject({ ok: false, retryable: true, error: { code: 'tool_error', message: 'mcp server "p" is closed' } });
    expect(seen).toEqual([]);
  });
});
