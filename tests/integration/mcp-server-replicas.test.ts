/**
 * toolgraph as an MCP server on two replicas (DESIGN §12, §16): one MCP session whose requests land on
 * either replica of one PostgreSQL database, through the official SDK client (its fetch sends each
 * request to the replica the test names). The session minted on one replica is served by the other;
 * a write held on replica A keeps a read of the same document, sent through replica B, waiting on the
 * cluster-wide lock until it ends; a call running on A is cancelled by the client's cancel sent through
 * B (found by its tags, carried to its owner); the session's runs are listed on both.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpApi } from '../helpers/mcp-client.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { ToolServer, type ToolRequest } from '../helpers/toolserver.js';
import { until } from '../helpers/wait.js';

function yamlFor(ts: ToolServer): string {
  const doc = '{ type: object, properties: { name: { type: string }, hold: { type: boolean } }, required: [name] }';
  return `
tools:
  - name: write_doc
    input: ${doc}
    reads: []
    writes: ["doc:{name}"]
    executor: { kind: http, url: "${ts.url('/write')}" }
  - name: read_doc
    input: ${doc}
    reads: ["doc:{name}"]
    executor: { kind: http, url: "${ts.url('/read')}" }
store: { leaseMs: 3000 }
defaults: { timeoutMs: 20000 }
`;
}

describe('an MCP session across two replicas on PostgreSQL', () => {
  let pg: TestPostgres;
  let ts: ToolServer;
  let a: Awaited<ReturnType<typeof startHttpApi>>;
  let b: Awaited<ReturnType<typeof startHttpApi>>;
  let client: Client;
  let session: string;
  /** The replica the client's next requests go to. */
  let via: 'a' | 'b' = 'a';
  const landed: string[] = [];

  beforeAll(async () => {
    pg = await startPostgres();
    const db = await pg.createDatabase();
    ts = await ToolServer.start();
    a = await startHttpApi(yamlFor(ts), undefined, { db, replica: 'ra' });
    b = await startHttpApi(yamlFor(ts), undefined, { db, replica: 'rb' });
    client = new Client({ name: 'replicas-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${a.url}/mcp`), {
      fetch: (url, init) => {
        const base = via === 'a' ? a.url : b.url;
        landed.push(via);
        return fetch(`${base}${new URL(String(url)).pathname}`, init);
      },
    });
    await client.connect(transport);
    session = transport.sessionId as string;
  }, 120_000);
  afterAll(async () => {
    await client?.close();
    await a?.close();
    await b?.close();
    await ts?.close();
    await pg?.stop();
  });

  const runsOf = async (url: string) =>
    (
      (await (await fetch(`${url}/v1/runs?tag=${encodeURIComponent(`mcp.session:${session}`)}`)).json()) as {
        items: { id: string; status: string }[];
      }
    ).items;
  const run = async (url: string, id: string) => (await fetch(`${url}/v1/runs/${id}`)).json() as Promise<any>;

  it('serves the session minted on one replica on the other', async () => {
    expect(landed).toContain('a');
    via = 'b';
    const before = landed.length;
    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name)).toEqual(['write_doc', 'read_doc', 'toolgraph_batch']);
    expect(landed.slice(before)).toEqual(['b']);
  });

  it('keeps a read sent through B waiting for a write of the same document held on A', async () => {
    via = 'a';
    const write = client.callTool({ name: 'write_doc', arguments: { name: 'd', hold: true } }) as Promise<CallToolResult>;
    const held = await ts.next((r: ToolRequest) => r.path === '/write');
    via = 'b';
    const read = client.callTool({ name: 'read_doc', arguments: { name: 'd' } }) as Promise<CallToolResult>;
    const readRun = await until('the read waiting for the lock', async () => {
      for (const r of await runsOf(b.url)) {
        const v = await run(b.url, r.id);
        if (v.calls[0].tool === 'read_doc' && v.calls[0].waitingFor?.some((w: { kind: string }) => w.kind === 'lock')) return v;
      }
      return undefined;
    });
    expect(readRun.owner).toBe('rb');
    expect(ts.requests.filter((r) => r.path === '/read')).toEqual([]);
    held.respond({ status: 200, body: { wrote: 'd' } });
    const [w, r] = await Promise.all([write, read]);
    expect(w.isError).toBeFalsy();
    expect(r.isError).toBeFalsy();
    const wc = (await run(a.url, (w._meta as Record<string, string>)['toolgraph/runId'] as string)).calls[0];
    const rc = (await run(a.url, readRun.id)).calls[0];
    expect(Date.parse(rc.startedAt)).toBeGreaterThanOrEqual(Date.parse(wc.endedAt));
  });

  it("cancels a call running on A when the client's cancel lands on B", async () => {
    via = 'a';
    const controller = new AbortController();
    const pending = client.callTool({ name: 'write_doc', arguments: { name: 'e', hold: true } }, undefined, { signal: controller.signal });
    const held = await ts.next((r: ToolRequest) => r.path === '/write' && r.body.args.name === 'e');
    via = 'b';
    controller.abort('stop');
    await expect(pending).rejects.toThrow();
    await held.aborted;
    const v = await until('the run cancelled', async () => {
      const r = await run(b.url, held.body.runId);
      return r.status === 'cancelled' ? r : undefined;
    });
    expect(v.calls[0].status).toBe('cancelled');
  });

  it('lists the session runs on both replicas', async () => {
    const onA = await runsOf(a.url);
    const onB = await runsOf(b.url);
    expect(onA.map((r) => r.id).sort()).toEqual(onB.map((r) => r.id).sort());
    expect(onA.length).toBe(3);
  });
});
