/**
 * toolgraph as an MCP server (DESIGN §16), through the official SDK's MCP client, over both transports
 * (Streamable HTTP on `/mcp`, and stdio with `toolgraph mcp` as a child process): tools/list is the
 * catalog with an imported MCP server's tools (server-filesystem), paged; a write and a read of one
 * document in flight at once run one after the other; a tool limit is never exceeded and reached across
 * concurrent calls; a denied call, a review approved through REST while the call waits,
 * toolgraph_batch with a reference and with a priority (capped by the key), the client's cancel, and every call a run of the key's tenant
 * listed under the session's tag. The filesystem server's calls are runs with their graph. The key
 * rules (401 without a key) are in mcp-server-endpoint.test.ts.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT, OPERATOR, runIdOf, startTarget, text, yamlFor, type McpTarget, type TransportKind } from '../helpers/mcp-client.js';
import { ToolServer, type ToolRequest } from '../helpers/toolserver.js';
import { until } from '../helpers/wait.js';

describe.each<TransportKind>(['http', 'stdio'])('toolgraph as an MCP server over %s', (kind) => {
  let ts: ToolServer;
  let t: McpTarget;
  let dir: string;
  /** tools/call requests this session made: each is one run. */
  let calls = 0;
  /** The arrivals at /slow: the most held at once. */
  let mostSlow = 0;
  const call = (name: string, args: Record<string, unknown>, options?: Parameters<Client['callTool']>[2]) => {
    calls++;
    return t.client.callTool({ name, arguments: args }, undefined, options) as Promise<CallToolResult>;
  };
  const sessionRuns = async () =>
    (await t.rest('GET', `/v1/runs?limit=100&tag=${encodeURIComponent(`mcp.session:${t.session}`)}`, { token: AGENT })).body.items as {
      id: string;
      status: string;
      tenant: string;
      tags: Record<string, string>;
    }[];
  const run = async (id: string) => (await t.rest('GET', `/v1/runs/${id}`, { token: OPERATOR })).body;

  beforeAll(async () => {
    ts = await ToolServer.start();
    ts.on('/slow', (r) => {
      mostSlow = Math.max(mostSlow, ts.requests.filter((x) => x.path === '/slow' && !x.answered).length);
      return r.body.args.hold === true ? 'hold' : { status: 200, body: { ok: true } };
    });
    dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-mcp-server-'));
    t = await startTarget(kind, {
      yaml: yamlFor(ts, dir),
      key: AGENT,
      restToken: OPERATOR,
      http: { pageSize: 4, progressIntervalMs: 100 },
    });
  }, 90_000);
  afterAll(async () => {
    await t?.close();
    await ts?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists the catalog, the MCP server tools among them, with annotations from the manifests, and toolgraph_batch', async () => {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await t.client.listTools(cursor !== undefined ? { cursor } : {});
      tools.push(...page.tools);
      cursor = page.nextCursor;
      pages++;
    } while (cursor !== undefined);
    if (kind === 'http') expect(pages, JSON.stringify(tools.map((x) => x.name))).toBeGreaterThan(2); // 4 per page
    const byName = new Map(tools.map((x) => [x.name, x]));
    expect(tools.length).toBe(byName.size);
    expect(byName.get('write_doc')).toMatchObject({
      description: 'Writes a document',
      inputSchema: { type: 'object', required: ['name'] },
      annotations: { readOnlyHint: false, idempotentHint: false },
    });
    expect(byName.get('read_doc')?.annotations).toEqual({ readOnlyHint: true, idempotentHint: true });
    expect(byName.get('launch')?.annotations).toEqual({ readOnlyHint: false, idempotentHint: false, destructiveHint: true });
    expect(byName.get('rm_doc')?.annotations?.readOnlyHint).toBe(false);
    // The filesystem server's tools, under their prefix, with its schemas and descriptions.
    expect(byName.get('fs__read_text_file')).toMatchObject({
      inputSchema: { type: 'object', required: expect.arrayContaining(['path']) },
      annotations: { readOnlyHint: true },
    });
    expect(byName.get('fs__read_text_file')?.description).toMatch(/file/i);
    expect(byName.get('fs__write_file')?.annotations).toMatchObject({ readOnlyHint: false, idempotentHint: true });
    expect(byName.get('toolgraph_batch')).toMatchObject({
      inputSchema: { type: 'object', required: ['calls'] },
      outputSchema: { type: 'object', required: ['runId', 'status', 'results'] },
    });
    expect(tools.at(-1)?.name).toBe('toolgraph_batch');
  });

  it('runs a write and a read of one document in flight at once one after the other: the read starts after the write ends', async () => {
    const name = `doc-${kind}`;
    const isWrite = (r: ToolRequest) => r.path === '/write' && r.body.args.name === name;
    const isRead = (r: ToolRequest) => r.path === '/read' && r.body.args.name === name;
    const write = call('write_doc', { name, hold: true });
    // stdio: both go down one pipe in this order now; HTTP: the read is sent once the write has arrived.
    let read = kind === 'stdio' ? call('read_doc', { name }) : undefined;
    const held = await ts.next(isWrite);
    read ??= call('read_doc', { name });
    // The read's run exists and waits for the write's lock; it has not reached the tool.
    const readRun = await until('the read waiting for the lock', async () => {
      for (const r of await sessionRuns()) {
        const v = await run(r.id);
        const c = v.calls[0];
        if (c.tool === 'read_doc' && c.args.name === name && c.waitingFor?.some((w: { kind: string }) => w.kind === 'lock')) return v;
      }
      return undefined;
    });
    expect(ts.requests.filter(isRead)).toEqual([]);
    held.respond({ status: 200, body: { wrote: name } });
    const [w, r] = await Promise.all([write, read]);
    expect(w.isError, JSON.stringify(w)).toBeFalsy();
    expect(w.structuredContent).toEqual({ wrote: name });
    expect(r.isError).toBeFalsy();
    expect(runIdOf(r)).toBe(readRun.id);
    const wc = (await run(runIdOf(w))).calls[0];
    const rc = (await run(runIdOf(r))).calls[0];
    expect(Date.parse(rc.startedAt)).toBeGreaterThanOrEqual(Date.parse(wc.endedAt));
    expect(Date.parse(readRun.createdAt)).toBeLessThan(Date.parse(wc.endedAt));
  });

  it('serves a write and a read sent in the same tick in their arrival order, never overlapping', async () => {
    const name = `tick-${kind}`;
    const [w, r] = [call('write_doc', { name, hold: true }), call('read_doc', { name })];
    (await ts.next((q) => q.path === '/write' && q.body.args.name === name)).respond({ status: 200, body: { wrote: name } });
    await Promise.all([w, r]);
    const [wv, rv] = await Promise.all([run(runIdOf(await w)), run(runIdOf(await r))]);
    // Whichever arrived first ran first; the other started only once it had ended.
    const [first, second] = [wv, rv].sort((x, y) => Date.parse(x.calls[0].startedAt) - Date.parse(y.calls[0].startedAt));
    expect(Date.parse(second.calls[0].startedAt)).toBeGreaterThanOrEqual(Date.parse(first.calls[0].endedAt));
    // One pipe (stdio) keeps the client's order: the write arrives first.
    if (kind === 'stdio') expect(Date.parse(rv.calls[0].startedAt)).toBeGreaterThanOrEqual(Date.parse(wv.calls[0].endedAt));
  });

  it('holds a tool limit across concurrent calls: never more than 2 at once, and 2 reached; the waiting calls hear why', async () => {
    mostSlow = 0;
    const progress: string[] = [];
    const pending = Array.from({ length: 5 }, (_, i) =>
      call('slow', { hold: true, n: i }, { onprogress: (p) => void progress.push(String(p.message)), resetTimeoutOnProgress: true }),
    );
    const slow = () => ts.requests.filter((r) => r.path === '/slow' && r.body.args.hold === true);
    await until('two calls at the tool', () => (slow().length >= 2 ? true : undefined));
    // Every run is in; the three others wait for the tool's limit.
    await until('three calls waiting for the tool limit', async () => {
      let waiting = 0;
      for (const r of await sessionRuns()) {
        const c = (await run(r.id)).calls[0];
        if (c.tool === 'slow' && c.waitingFor?.some((w: { kind: string; key?: string }) => w.kind === 'tool' && w.key === 'slow'))
          waiting++;
      }
      return waiting === 3 ? true : undefined;
    });
    expect(slow().length).toBe(2);
    for (let answered = 0; answered < 5; answered++) {
      const next = await until('a held call', () => slow().find((r) => !r.answered));
      next.respond({ status: 200, body: { n: next.body.args.n } });
    }
    const results = await Promise.all(pending);
    expect(results.map((r) => r.structuredContent)).toEqual([0, 1, 2, 3, 4].map((n) => ({ n })));
    expect(mostSlow).toBe(2);
    expect(progress.some((m) => /waiting for tool limit slow \(2\/2 in use\)/.test(m))).toBe(true);
  });

  it('answers a denied call with isError, its code and message', async () => {
    const r = await call('rm_doc', { name: 'x' });
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/^policy_denied: .*nothing is removed here/);
    expect(r.structuredContent).toMatchObject({ error: { code: 'policy_denied' } });
    expect(ts.requests.filter((q) => q.path === '/rm')).toEqual([]);
  });

  it('answers a call awaiting review once an operator approves it through REST', async () => {
    const target = `moon-${kind}`;
    const pending = call('launch', { target });
    const review = await until('the review', async () => {
      const items = (await t.rest('GET', '/v1/reviews?status=pending')).body.items as {
        id: string;
        tool: string;
        args: { target: string };
      }[];
      return items.find((i) => i.tool === 'launch' && i.args.target === target);
    });
    expect(ts.requests.filter((q) => q.path === '/launch' && q.body.args.target === target)).toEqual([]);
    expect((await t.rest('POST', `/v1/reviews/${review.id}`, { json: { decision: 'approve' } })).status).toBe(200);
    const r = await pending;
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toMatchObject({ args: { target } });
  });

  it('runs toolgraph_batch with a reference, the results in call order', async () => {
    const r = await call('toolgraph_batch', {
      calls: [
        { id: 'first', tool: 'echo', args: { v: 41 } },
        { id: 'second', tool: 'echo', args: { got: '${first.output.v}', text: 'v=${first.output.v}' } },
        { id: 'third', tool: 'rm_doc', args: { name: 'y' } },
      ],
    });
    expect(r.structuredContent).toEqual({
      runId: runIdOf(r),
      status: 'partial',
      results: [
        { id: 'first', tool: 'echo', status: 'succeeded', output: { v: 41 } },
        { id: 'second', tool: 'echo', status: 'succeeded', output: { got: 41, text: 'v=41' } },
        { id: 'third', tool: 'rm_doc', status: 'failed', error: expect.objectContaining({ code: 'policy_denied' }) },
      ],
    });
    expect(r.isError).toBe(true);
    const graph = (await t.rest('GET', `/v1/runs/${runIdOf(r)}/graph`)).body;
    expect(graph.edges).toContainEqual(expect.objectContaining({ from: 'first', to: 'second', kind: 'data' }));
    const bad = await call('toolgraph_batch', { calls: [{ id: 'a', tool: 'echo' }], extra: 1 });
    expect(bad.isError).toBe(true);
    expect(text(bad)).toMatch(/^invalid_request: /);
    calls--; // refused before it became a run
  });

  it('toolgraph_batch takes a priority, capped by the key (maxPriority 2): 1 is refused priority_not_allowed, 2 is the run’s', async () => {
    const denied = await call('toolgraph_batch', { calls: [{ id: 'a', tool: 'echo', args: { v: 1 } }], priority: 1 });
    expect(denied.isError).toBe(true);
    expect(text(denied)).toMatch(/^priority_not_allowed: /);
    calls--; // refused before it became a run
    const ok = await call('toolgraph_batch', { calls: [{ id: 'a', tool: 'echo', args: { v: 2 } }], priority: 2 });
    expect(ok.isError).toBeFalsy();
    expect(await run(runIdOf(ok))).toMatchObject({ priority: 2, status: 'succeeded' });
    const bad = await call('toolgraph_batch', { calls: [{ id: 'a', tool: 'echo' }], priority: 9 });
    expect(text(bad)).toMatch(/^invalid_request: .*priority/);
    calls--;
  });

  it('cancels the run when the client cancels the call', async () => {
    const controller = new AbortController();
    const pending = call('slow', { hold: true, cancel: kind }, { signal: controller.signal });
    const held = await ts.next((r) => r.path === '/slow' && r.body.args.cancel === kind);
    controller.abort('the user pressed stop');
    await expect(pending).rejects.toThrow();
    await held.aborted;
    const v = await until('the run cancelled', async () => {
      const r = await run(held.body.runId);
      return r.status === 'cancelled' ? r : undefined;
    });
    expect(v.calls[0].status).toBe('cancelled');
    expect(v.tags['mcp.session']).toBe(t.session);
  });

  it('runs the filesystem MCP server behind toolgraph: each call a run with its graph', async () => {
    const file = path.join(dir, `${kind}.txt`);
    const w = await call('fs__write_file', { path: file, content: `hello ${kind}` });
    expect(w.isError, JSON.stringify(w)).toBeFalsy();
    expect(readFileSync(file, 'utf8')).toBe(`hello ${kind}`);
    const r = await call('fs__read_text_file', { path: file });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toEqual({ content: `hello ${kind}` });
    const graph = (await t.rest('GET', `/v1/runs/${runIdOf(r)}/graph`)).body;
    expect(graph.nodes).toEqual([{ id: expect.stringMatching(/^mcp-/), tool: 'fs__read_text_file', status: 'succeeded' }]);
    const batch = await call('toolgraph_batch', {
      calls: [
        { id: 'w', tool: 'fs__write_file', args: { path: file, content: 'two' } },
        { id: 'r', tool: 'fs__read_text_file', args: { path: file } },
        { id: 'e', tool: 'echo', args: { seen: '${r.output.content}' } },
      ],
    });
    expect(batch.isError).toBeFalsy();
    expect((batch.structuredContent as { results: { output: unknown }[] }).results[2]?.output).toEqual({ seen: 'two' });
    const g = (await t.rest('GET', `/v1/runs/${runIdOf(batch)}/graph`)).body;
    expect(g.edges).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ from: 'w', to: 'r', kind: 'conflict' }),
        expect.objectContaining({ from: 'r', to: 'e', kind: 'data' }),
      ]),
    );
  });

  it('lists every call of the session as a run of the key tenant under the mcp.session tag', async () => {
    const runs = await sessionRuns();
    expect(runs.length).toBe(calls);
    for (const r of runs) {
      expect(r.tenant).toBe('acme');
      expect(r.tags['mcp.session']).toBe(t.session);
    }
    expect(runs.filter((r) => r.status === 'cancelled').length).toBe(1);
  });
});
