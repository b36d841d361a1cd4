/**
 * The memory and everything MCP servers from npm (dev dependencies), started by the test over stdio:
 * a knowledge-graph batch in the order the hints imply, a long-running call cancelled (the run ends at
 * once, not when the operation would have), and the server's errors as `tool_error`.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpExecutor } from '../../src/executors/mcp.js';
import { EVERYTHING_SERVER, MEMORY_SERVER, startToolgraph, trace, type Toolgraph } from '../helpers/mcp.js';

const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-mcp-pub-'));
const node = JSON.stringify(process.execPath);

describe('memory MCP server', () => {
  let tg: Toolgraph;
  beforeAll(async () => {
    tg = await startToolgraph(`
mcp:
  servers:
    - name: memory
      command: ${node}
      args: [${JSON.stringify(MEMORY_SERVER)}]
      env: { MEMORY_FILE_PATH: ${JSON.stringify(path.join(dir, 'memory.jsonl'))} }
      trustAnnotations: true
`);
  });
  afterAll(async () => {
    await tg?.close();
  });

  it('writes then reads the graph in model order, and runs the reads together', async () => {
    const view = await tg.run([
      {
        id: 'create',
        tool: 'memory__create_entities',
        args: { entities: [{ name: 'toolgraph', entityType: 'project', observations: ['runs tool calls in parallel'] }] },
      },
      { id: 'graph', tool: 'memory__read_graph', args: {} },
      { id: 'search', tool: 'memory__search_nodes', args: { query: 'toolgraph' } },
    ]);
    expect(view.status).toBe('succeeded');
    const graph = view.calls[1]?.output as { entities: { name: string }[] };
    expect(graph.entities.map((e) => e.name)).toEqual(['toolgraph']);
    expect(view.calls.map((c) => c.dependsOn)).toEqual([[], ['create'], ['create']]);
    const order = trace(tg.events, view.id, ['call.started', 'call.succeeded']);
    expect(order.indexOf('succeeded create')).toBeLessThan(order.indexOf('started graph'));
    // Both reads start before either ends.
    expect(Math.max(order.indexOf('started graph'), order.indexOf('started search'))).toBeLessThan(
      Math.min(order.indexOf('succeeded graph'), order.indexOf('succeeded search')),
    );
  });
});

describe('everything MCP server', () => {
  let tg: Toolgraph;
  beforeAll(async () => {
    tg = await startToolgraph(`
mcp:
  servers:
    - name: ev
      command: ${node}
      args: [${JSON.stringify(EVERYTHING_SERVER)}]
      trustAnnotations: true
      include: ["get-*", "trigger-long-running-operation", echo]
`);
  });
  afterAll(async () => {
    await tg?.close();
  });

  it('keeps only the included tools; names with dashes are fine', () => {
    const names = tg.config.catalog.list().map((t) => t.name);
    expect(names).toContain('ev__get-sum');
    expect(names).toContain('ev__trigger-long-running-operation');
    expect(names).not.toContain('ev__toggle-simulated-logging');
  });

  it('takes structuredContent as the output, else { content }', async () => {
    const view = await tg.run([
      { id: 'sum', tool: 'ev__get-sum', args: { a: 2, b: 3 } },
      { id: 'weather', tool: 'ev__get-structured-content', args: { location: 'Chicago' } },
    ]);
    expect(view.calls[0]?.output).toEqual({ content: [{ type: 'text', text: 'The sum of 2 and 3 is 5.' }] });
    expect(view.calls[1]?.output).toMatchObject({ temperature: expect.any(Number), conditions: expect.any(String) });
  });

  it('cancels a long-running call: the run ends at once, not after the operation', async () => {
    const started = await tg.engine.submit({
      calls: [{ id: 'long', tool: 'ev__trigger-long-running-operation', args: { duration: 20, steps: 4 } }],
    });
    // The attempt has started (its event is stored) before the cancel.
    while (!tg.events.some((e) => e.runId === started.id && e.type === 'call.started')) await new Promise((r) => setTimeout(r, 5));
    const t0 = Date.now();
    await tg.engine.cancel(started.id);
    const view = await tg.engine.wait(started.id);
    expect(view?.status).toBe('cancelled');
    expect(view?.calls[0]?.status).toBe('cancelled');
    expect(Date.now() - t0).toBeLessThan(5000);
    // The connection is still good for the next call.
    const next = await tg.run([{ id: 'e', tool: 'ev__echo', args: { message: 'still here' } }]);
    expect(next.calls[0]?.output).toEqual({ content: [{ type: 'text', text: 'Echo: still here' }] });
  });

  it("reports the server's errors as tool_error: bad args (past the schema) and an unknown tool", async () => {
    const executor = createMcpExecutor(tg.mcp.servers);
    const sum = tg.config.catalog.get('ev__get-sum')!;
    const request = (tool: typeof sum, args: Record<string, unknown>) => ({
      runId: 'r',
      callId: 'c',
      tool,
      args,
      attempt: 1,
      timeoutMs: 5000,
      signal: new AbortController().signal,
    });
    const bad = await executor.execute(request(sum, { a: 'x', b: 1 }));
    expect(bad).toMatchObject({ ok: false, retryable: false, error: { code: 'tool_error' } });
    expect(bad.ok === false && bad.error.message).toMatch(/Input validation error/);
    const gone = await executor.execute(request({ ...sum, executor: { kind: 'mcp', server: 'ev', tool: 'no-such-tool' } }, {}));
    expect(gone).toMatchObject({ ok: false, retryable: false, error: { code: 'tool_error' } });
    expect(gone.ok === false && gone.error.message).toMatch(/no-such-tool not found/);
  });
});
