/**
 * The mcp executor's mapping of a tools/call result, with a server stand-in (an `McpCaller`) that
 * answers as the SDK would: structuredContent or { content }, isError, the SDK's
 * request timeout, a server that is down (retryable), a JSON-RPC error (not retryable), and cancel.
 */
import { describe, expect, it } from 'vitest';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ToolManifest } from '../../src/core/tool.js';
import { createMcpExecutor, type McpCaller } from '../../src/executors/mcp.js';

const tool: ToolManifest = {
  name: 's__t',
  scope: 'tenant',
  risk: 'write',
  idempotent: false,
  timeoutMs: 1000,
  after: [],
  requires: [],
  executor: { kind: 'mcp', server: 's', tool: 't' },
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
  it("calls the server's own tool name with the attempt's budget; structuredContent is the output", async () => {
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

  it('backpressure (DESIGN §4): an error result with _meta.retryAfterMs pauses the tool that long, and is retryable', async () => {
    const { r } = await run(async () => ({ content: [{ type: 'text', text: 'slow down' }], isError: true, _meta: { retryAfterMs: 1500 } }));
    expect(r).toMatchObject({ ok: false, retryable: true, retryAfterMs: 1500, pauseMs: 1500, error: { message: 'slow down' } });
  });

  it('does not measure the output: the engine holds it to maxOutputBytes, once (tests/integration/mcp-own-server)', async () => {
    const big = { content: [{ type: 'text' as const, text: 'x'.repeat(60) }] };
    const { r } = await run(async () => big);
    expect(r).toEqual({ ok: true, output: big });
  });

  it("the SDK's request timeout is timeout (retryable)", async () => {
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
    const pending = run(
      (signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))),
      ac.signal,
    );
    ac.abort();
    expect((await pending).r).toMatchObject({ ok: false, retryable: false, error: { code: 'cancelled' } });
  });

  it('never rejects: a caller that throws at once, or answers something that is not a result, is a result', async () => {
    const thrown = await run(() => {
      throw named('McpUnavailableError');
    });
    expect(thrown.r).toMatchObject({ ok: false, retryable: true, error: { code: 'tool_error' } });
    const odd = await run(async () => null as unknown as CallToolResult);
    expect(odd.r).toMatchObject({ ok: false, retryable: false, error: { code: 'tool_error' } });
  });

  it('a signal aborted before the call: cancelled, and the server is not called', async () => {
    const ac = new AbortController();
    ac.abort();
    const { r, seen } = await run(async () => ({ content: [] }), ac.signal);
    expect(r).toMatchObject({ ok: false, error: { code: 'cancelled' } });
    expect(seen).toEqual({});
  });

  it('a tool of a server that is not connected fails without calling anything', async () => {
    const r = await createMcpExecutor(new Map()).execute({
      runId: 'r',
      callId: 'c',
      tool,
      args: {},
      attempt: 1,
      timeoutMs: 5,
      signal: new AbortController().signal,
    });
    expect(r).toMatchObject({
      ok: false,
      retryable: false,
      error: { code: 'tool_error', message: 'no mcp server named "s" is connected' },
    });
  });
});
