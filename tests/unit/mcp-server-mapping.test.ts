/**
 * The pure mappings of toolgraph's MCP server (DESIGN §16): a manifest to an MCP tool (annotations from
 * its declared effects, risk and idempotence; an input schema MCP clients accept), the pages of
 * tools/list with toolgraph_batch last, and a run to a tools/call result (structured content, text,
 * an MCP server's own content handed on, errors with their code).
 */
import { describe, expect, it } from 'vitest';
import type { ToolManifest } from '../../src/core/tool.js';
import type { CallView, RunView } from '../../src/core/view.js';
import { callIdOf } from '../../src/mcp-server/calls.js';
import { batchResult, callResult, refusedResult } from '../../src/mcp-server/results.js';
import { BadCursorError, mcpToolOf, toolPage, writesNothing } from '../../src/mcp-server/tools.js';

function manifest(o: Partial<ToolManifest> = {}): ToolManifest {
  return {
    name: 't',
    scope: 'tenant',
    risk: 'write',
    idempotent: false,
    timeoutMs: 1000,
    after: [],
    requires: [],
    executor: { kind: 'builtin', name: 'echo' },
    ...o,
  };
}

function call(o: Partial<CallView> = {}): CallView {
  return {
    id: 'c',
    tool: 't',
    args: {},
    status: 'succeeded',
    dependsOn: [],
    attempts: 1,
    output: null,
    error: null,
    blockedBy: null,
    startedAt: null,
    endedAt: null,
    ...o,
  };
}

function runOf(calls: CallView[], status: RunView['status'] = 'succeeded'): RunView {
  return { id: 'run_1', tenant: 'a', status, failure: 'partial', tags: {}, createdAt: '', endedAt: '', calls, diagnostics: [] };
}

describe('tools/list', () => {
  it('says readOnlyHint only for a tool that declares its effects and writes nothing', () => {
    expect(writesNothing(manifest())).toBe(false); // undeclared: unknown effects, writes *
    expect(writesNothing(manifest({ reads: ['x'] }))).toBe(true);
    expect(writesNothing(manifest({ reads: [], writes: [] }))).toBe(true);
    expect(writesNothing(manifest({ writes: ['file:{path}'] }))).toBe(false);
  });

  it('maps risk and idempotence to annotations, and gives every input schema type object', () => {
    expect(mcpToolOf(manifest({ name: 'd', description: 'D', risk: 'dangerous', idempotent: true, writes: ['x'] }))).toEqual({
      name: 'd',
      description: 'D',
      inputSchema: { type: 'object' },
      annotations: { readOnlyHint: false, idempotentHint: true, destructiveHint: true },
    });
    const anyOf = { anyOf: [{ required: ['a'] }, { required: ['b'] }] };
    expect(mcpToolOf(manifest({ input: anyOf })).inputSchema).toEqual({ ...anyOf, type: 'object' });
    const obj = { type: 'object', properties: { a: { type: 'string' } } };
    expect(mcpToolOf(manifest({ input: obj })).inputSchema).toBe(obj);
  });

  it('pages the catalog with toolgraph_batch last, and refuses a cursor it did not give', () => {
    const catalog = ['a', 'b', 'c', 'd', 'e'].map((name) => manifest({ name }));
    const names: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = toolPage(catalog, { pageSize: 2, maxCalls: 10, ...(cursor ? { cursor } : {}) });
      names.push(page.tools.map((t) => t.name));
      cursor = page.nextCursor;
    } while (cursor);
    expect(names).toEqual([
      ['a', 'b'],
      ['c', 'd'],
      ['e', 'toolgraph_batch'],
    ]);
    const batch = toolPage([], { pageSize: 5, maxCalls: 7 }).tools[0];
    expect(batch?.inputSchema.properties?.calls).toMatchObject({ maxItems: 7 });
    expect(() => toolPage(catalog, { pageSize: 2, maxCalls: 10, cursor: 'bm9wZQ' })).toThrow(BadCursorError);
    expect(() => toolPage(catalog, { pageSize: 2, maxCalls: 10, cursor: 'x'.repeat(100) })).toThrow(BadCursorError);
  });
});

describe('tools/call results', () => {
  it('gives an object output as structured content and text, anything else as text only', () => {
    expect(callResult(runOf([call({ output: { a: 1 } })]), manifest())).toEqual({
      content: [{ type: 'text', text: '{"a":1}' }],
      structuredContent: { a: 1 },
      _meta: { 'toolgraph/runId': 'run_1' },
    });
    expect(callResult(runOf([call({ output: 'plain' })]), manifest()).content).toEqual([{ type: 'text', text: 'plain' }]);
    const list = callResult(runOf([call({ output: [1, 2] })]), manifest());
    expect(list.structuredContent).toBeUndefined();
    expect(list.content).toEqual([{ type: 'text', text: '[1,2]' }]);
  });

  it("hands on an MCP server's own content, and only for an MCP tool", () => {
    const content = [{ type: 'image', data: 'AAAA', mimeType: 'image/png' }];
    const mcp = manifest({ executor: { kind: 'mcp', server: 's', tool: 't' } });
    expect(callResult(runOf([call({ output: { content } })]), mcp)).toEqual({ content, _meta: { 'toolgraph/runId': 'run_1' } });
    expect(callResult(runOf([call({ output: { content } })]), manifest()).structuredContent).toEqual({ content });
  });

  it('makes a failed, blocked or cancelled call an error with its code', () => {
    const denied = callResult(runOf([call({ status: 'failed', error: { code: 'policy_denied', message: 'no' } })], 'failed'), manifest());
    expect(denied).toMatchObject({
      isError: true,
      content: [{ type: 'text', text: 'policy_denied: no' }],
      structuredContent: { error: { code: 'policy_denied' } },
    });
    const blocked = callResult(
      runOf([call({ status: 'blocked', blockedBy: { code: 'cycle', message: 'loop' } })], 'deadlocked'),
      manifest(),
    );
    expect(blocked.content).toEqual([{ type: 'text', text: 'cycle: loop' }]);
    expect(callResult(runOf([call({ status: 'cancelled' })], 'cancelled'), manifest())).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'cancelled' } },
    });
  });

  it('gives a batch its results in call order, an error unless the run succeeded', () => {
    const r = batchResult(
      runOf([call({ id: 'a', output: 1 }), call({ id: 'b', status: 'failed', error: { code: 'tool_error', message: 'x' } })], 'partial'),
    );
    expect(r.structuredContent).toEqual({
      runId: 'run_1',
      status: 'partial',
      results: [
        { id: 'a', tool: 't', status: 'succeeded', output: 1 },
        { id: 'b', tool: 't', status: 'failed', error: { code: 'tool_error', message: 'x' } },
      ],
    });
    expect(r.isError).toBe(true);
    expect(batchResult(runOf([call({ id: 'a', output: 1 })])).isError).toBeUndefined();
  });

  it('says when to retry a refused request, and names one-call runs by the request id', () => {
    expect(refusedResult('too_many_runs', 'later', '2')._meta).toEqual({ retryAfterMs: 2000 });
    expect(refusedResult('invalid_request', 'bad')._meta).toBeUndefined();
    expect(callIdOf(7)).toBe('mcp-7');
    expect(callIdOf('a b')).toBe('call');
  });
});
