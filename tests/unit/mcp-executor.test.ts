/**
 * The mcp executor's mapping of a tools/call result, with a server stand-in (an `McpCaller`) that
 * answers as the SDK would: structuredContent or { content }, isError, output_too_large, the SDK's
 * request timeout, a server that is down (retryable), a JSON-RPC error (not retryable), and cancel.
 */
import { describe, expect, it } from 'vitest';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ToolManifest } from '../../src/core/tool.js';
import { createMcpExecutor, type McpCaller } from '../../src/executors/mcp.js';

const tool: ToolManifest = {
  name: 's__t', scope: 'tenant', risk: 'write', idempotent: false, timeoutMs: 1000, after: [], requires: [],
  executor: { kind: 'mcp', server: 's', tool: 't', maxOutputBytes: 50 },
};
const named = (name: string, props: Record<string, unknown> = {}) => Object.assign(new Error(name), { name, ...props });

function run(answer: (signal: AbortSignal, timeoutMs: number) => Promise<CallToolResult>, signal = new AbortController().signal) {
  const seen: { tool?: string; timeoutMs?: number } = {};
  const caller: McpCaller = {
    call: (t, _args, s, timeoutMs) => {
      seen.tool = t;
      seen.timeoutMs = timeoutMs;
      return answer(s, timeoutMs);
    },
  };
  const executor = createMcpExecutor(new Map([['s', caller]]));
  return executor.execute({ runId: 'r', callId: 'c', tool, args: {}, attempt: 1, timeoutMs: 500, signal }).then((r) => ({ r, seen }));
}

describe('mcp executor', () => {
  it('calls the server\'s own tool name with the attempt\'s budget; structuredContent is the output', async () => {
    const { r, seen } = await run(async () => ({ content: [{ type: 'text', text: '{}' }], structuredContent: { a: 1 } }));
    expect(r).toEqual({ ok: true, output: { a: 1 } });
    expect(seen).toEqual({ tool: 't', timeoutMs: 500 });
  });

  it('without structuredContent the output is { content }', async () => {
    const { r } = await run(async () => ({ content: [{ type: 'text', text: 'hi' }] }));
    expect(r).toEqual({ ok: true, output: { content: [{ type: 'text', text: 'hi' }] } });
  });

  it('isError is a tool_error with the text as the message, not retryable', async () => {
    const { r } = await run(async () => ({ content: [{ type: 'text', text: 'no such file' }], isError: true }));
    expect(r).toMatchObject({ ok: false, retryable: false, error: { code: 'tool_error', message: 'no such file' } });
  });

  it('an output over maxOutputBytes is output_too_large', async () => {
    const { r } = await run(async () => ({ content: [{ type: 'text', text: 'x'.repeat(60) }] }));
    expect(r).toMatchObject({ ok: false, retryable: false, error: { code: 'output_too_large', details: { maxOutputBytes: 50 } } });
  });

  it('the SDK\'s request timeout is timeout (retryable)', async () => {
    const { r } = await run(async () => Promise.reject(named('McpError', { code: -32001 })));
    expect(r).toMatchObject({ ok: false, retryable: true, error: { code: 'timeout', message: 'timed out after 500 ms' } });
  });

  it('a server that is down is a retryable tool_error; a JSON-RPC error is not retryable', async () => {
    const down = await run(async () => Promise.reject(named('McpUnavailableError')));
    expect(down.r).toMatchObject({ ok: false, retryable: true, error: { code: 'tool_error' } });
    const rpc = await run(async () => Promise.reject(named('McpError', { code: -32602 })));
    expect(rpc.r).toMatchObject({ ok: false, retryable: false, error: { code: 'tool_error', details: { server: 's', code: -32602 } } });
  });

  it('cancel: the signal reaches the call, and the result is cancelled', async () => {
    const ac = new AbortController();
    const pending = run((signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))), ac.signal);
    ac.abort();
    expect((await pending).r).toMatchObject({ ok: false, retryable: false, error: { code: 'cancelled' } });
  });

  it('a tool of a server that is not connected fails without calling anything', async () => {
    const r = await createMcpExecutor(new Map()).execute({ runId: 'r', callId: 'c', tool, args: {}, attempt: 1, timeoutMs: 5, signal: new AbortController().signal });
    expect(r).toMatchObject({ ok: false, retryable: false, error: { code: 'tool_error', message: 'no mcp server named "s" is connected' } });
  });
});
