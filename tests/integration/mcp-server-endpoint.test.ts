/**
 * toolgraph's MCP endpoint and its key rules (DESIGN §7, §16), with the official SDK's client:
 * `/mcp` without a key (or with a wrong one) is a 401 and a client cannot connect; a request without a
 * session id is a 400, `GET /mcp` a 405, `DELETE /mcp` a 204, too many messages in one POST a 400;
 * open mode needs no key (runs of tenant default) and refuses a foreign Host; `toolgraph serve` (a
 * child process) answers at `/mcp`; `toolgraph mcp` writes only the protocol to stdout, and stops
 * (exit 2) without `TOOLGRAPH_KEY` when the config has keys.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { BIN, ROOT, startServer } from '../helpers/child.js';
import { runCli } from '../helpers/cli.js';
import { AGENT, OPERATOR, runIdOf, startHttpApi, startTarget, yamlFor } from '../helpers/mcp-client.js';
import { ToolServer } from '../helpers/toolserver.js';
import { until } from '../helpers/wait.js';

describe('the endpoint and the key rules', () => {
  it('answers /mcp without a key 401, and a client without a key cannot connect', async () => {
    const ts = await ToolServer.start();
    const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-mcp-auth-'));
    const t = await startTarget('http', { yaml: yamlFor(ts, dir), key: AGENT, restToken: OPERATOR });
    try {
      const init = {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
      };
      const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      const res = await fetch(`${t.url}/mcp`, { method: 'POST', headers, body: JSON.stringify(init) });
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ error: { code: 'unauthorized' } });
      const wrong = await fetch(`${t.url}/mcp`, {
        method: 'POST',
        headers: { ...headers, authorization: 'Bearer nope' },
        body: JSON.stringify(init),
      });
      expect(wrong.status).toBe(401);
      const client = new Client({ name: 'no-key', version: '1' });
      await expect(client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`)))).rejects.toThrow(/unauthorized/);
      // With a key: a request without a session id is a 400, GET has no stream (405), DELETE ends a session.
      const auth = { ...headers, authorization: `Bearer ${AGENT}` };
      const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
      const noSession = await fetch(`${t.url}/mcp`, { method: 'POST', headers: auth, body: JSON.stringify(list) });
      expect(noSession.status).toBe(400);
      expect(await noSession.json()).toMatchObject({ error: { code: 'invalid_request' } });
      expect((await fetch(`${t.url}/mcp`, { headers: auth })).status).toBe(405);
      const many = Array.from({ length: 65 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' }));
      const tooMany = await fetch(`${t.url}/mcp`, {
        method: 'POST',
        headers: { ...auth, 'mcp-session-id': t.session },
        body: JSON.stringify(many),
      });
      expect(tooMany.status).toBe(400);
      expect((await fetch(`${t.url}/mcp`, { method: 'DELETE', headers: { ...auth, 'mcp-session-id': t.session } })).status).toBe(204);
    } finally {
      await t.close();
      await ts.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('open mode (no keys): a client needs no key, its runs are tenant default, and a foreign Host is a 403', async () => {
    const api = await startHttpApi('tools:\n  - { name: echo, reads: [], writes: [], executor: { kind: builtin, name: echo } }\n');
    try {
      const client = new Client({ name: 'open', version: '1' });
      const transport = new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`));
      await client.connect(transport);
      const r = (await client.callTool({ name: 'echo', arguments: { a: 1 } })) as CallToolResult;
      expect(r.structuredContent).toEqual({ a: 1 });
      const listed = (await (await fetch(`${api.url}/v1/runs?tag=mcp.session:${transport.sessionId}`)).json()) as {
        items: { tenant: string }[];
      };
      expect(listed.items.map((i) => i.tenant)).toEqual(['default']);
      await client.close();
      const { port } = new URL(api.url);
      const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          { host: '127.0.0.1', port, path: '/mcp', method: 'POST', headers: { host: 'evil.example', 'content-type': 'application/json' } },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
      });
      expect(answer.status).toBe(403);
      expect(JSON.parse(answer.body)).toMatchObject({ error: { code: 'forbidden_host' } });
    } finally {
      await api.close();
    }
  });

  it('toolgraph serve answers MCP at /mcp: a client connects, and its call is a run with its graph', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-mcp-serve-'));
    const config = path.join(dir, 'toolgraph.yaml');
    writeFileSync(config, 'tools:\n  - { name: echo, reads: [], writes: [], executor: { kind: builtin, name: echo } }\n');
    const server = await startServer({ config, db: path.join(dir, 'x.db') });
    try {
      const client = new Client({ name: 'serve', version: '1' });
      const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`));
      await client.connect(transport);
      const r = (await client.callTool({ name: 'echo', arguments: { via: 'serve' } })) as CallToolResult;
      expect(r.structuredContent).toEqual({ via: 'serve' });
      const graph = (await (await fetch(`${server.url}/v1/runs/${runIdOf(r)}/graph`)).json()) as { nodes: unknown[] };
      expect(graph.nodes).toEqual([{ id: expect.stringMatching(/^mcp-/), tool: 'echo', status: 'succeeded' }]);
      const listed = (await (await fetch(`${server.url}/v1/runs?tag=mcp.session:${transport.sessionId}`)).json()) as { items: unknown[] };
      expect(listed.items.length).toBe(1);
      await client.close();
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('toolgraph mcp writes nothing but the protocol to stdout, its logs to stderr', async () => {
    const ts = await ToolServer.start();
    const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-mcp-stdout-'));
    const config = path.join(dir, 'toolgraph.yaml');
    writeFileSync(config, yamlFor(ts, dir));
    const child = spawn(process.execPath, [BIN, 'mcp', '--config', config, '--db', path.join(dir, 'x.db')], {
      cwd: ROOT,
      env: { ...process.env, TOOLGRAPH_KEY: AGENT, LOG_LEVEL: 'debug' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    try {
      const send = (m: object) => child.stdin.write(`${JSON.stringify(m)}\n`);
      send({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      });
      send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { hi: 1 } } });
      await until('the call answered', () => (out.includes('"id":2') ? true : undefined), 60_000);
      child.stdin.end();
      await new Promise((resolve) => child.once('exit', resolve));
      const lines = out.trim().split('\n');
      expect(lines.map((l) => JSON.parse(l).jsonrpc)).toEqual(['2.0', '2.0']);
      expect(JSON.parse(lines[1] as string).result.structuredContent).toEqual({ hi: 1 });
      expect(err).toMatch(/serving MCP on stdio/);
    } finally {
      child.kill('SIGKILL');
      await ts.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('stops toolgraph mcp (exit 2) when the config has keys and TOOLGRAPH_KEY is not set', async () => {
    const ts = await ToolServer.start();
    const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-mcp-auth-'));
    const config = path.join(dir, 'toolgraph.yaml');
    writeFileSync(config, yamlFor(ts, dir));
    try {
      const before = process.env.TOOLGRAPH_KEY;
      delete process.env.TOOLGRAPH_KEY;
      const res = await runCli(['mcp', '--config', config, '--db', path.join(dir, 'x.db')]);
      if (before !== undefined) process.env.TOOLGRAPH_KEY = before;
      expect(res.code).toBe(2);
      expect(res.err).toMatch(/TOOLGRAPH_KEY/);
      expect(res.out).toBe('');
    } finally {
      await ts.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
