/**
 * MCP executor (DESIGN §13): `{ kind: mcp, server, tool }` is a `tools/call` on the server's shared
 * connection.
 *
 * - The output is the result's `structuredContent` when there is one, else `{ content: [...] }`.
 * - `isError: true` fails the call with `tool_error`, the result's text as the message.
 * - Cancel and timeout abort the request, which sends `notifications/cancelled` to the server.
 * - A server that is down, or a connection lost during the call, is a retryable `tool_error`; the
 *   connection is made again for the next call.
 *
 * The output's size is not checked here: the engine holds every output to the tool's `maxOutputBytes`
 * (a server's or a tool's own, in the manifest; else `limits.maxOutputBytes`), for every kind of tool.
 * An answer far past it is dropped by the connection as it is read (src/mcp/frames.ts): `output_too_large`.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { callError } from '../core/errors.js';
import { OUTPUT_TOO_LARGE_RPC } from '../contract/mcp-codes.js';
import type { ExecuteRequest, ExecuteResult, Executor } from './types.js';
import { MAX_PAUSE_MS } from './http.js';
import { budgetOf, cancelledResult, lostAnswer, messageOf, timeoutResult, toolError } from './deadline.js';

/** What the executor needs of a server: the `McpConnection` of src/mcp is one. */
export interface McpCaller {
  call(tool: string, args: Record<string, unknown>, signal: AbortSignal, timeoutMs: number): Promise<CallToolResult>;
}

/** Thrown by a caller when the server cannot be reached now (retryable). Matched by name, so this
 * module loads nothing of the SDK. */
const UNAVAILABLE = 'McpUnavailableError';
/** JSON-RPC error code of the SDK's own request timeout. */
const REQUEST_TIMEOUT = -32001;
/** JSON-RPC error code of the SDK's "connection closed" (the server went away during the call). */
const CONNECTION_CLOSED = -32000;

/** The JSON-RPC error code of an SDK `McpError`, if it is one. */
function rpcCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof Error && err.name === 'McpError' && typeof code === 'number' ? code : undefined;
}

/** The text parts of a result's content, joined: an error's message. */
function textOf(result: CallToolResult): string {
  const parts = (result.content ?? []).flatMap((c) => (c.type === 'text' && typeof c.text === 'string' ? [c.text] : []));
  return parts.join('\n').trim();
}

function outputOf(result: CallToolResult): unknown {
  return result.structuredContent !== undefined ? result.structuredContent : { content: result.content ?? [] };
}

/** The attempt's result from the server's answer. */
function resultOf(result: CallToolResult, server: string, tool: string): ExecuteResult {
  if (result.isError === true) {
    const text = textOf(result);
    // Backpressure (DESIGN §4): an error result whose `_meta.retryAfterMs` asks to be left alone.
    const after = (result._meta as { retryAfterMs?: unknown } | undefined)?.retryAfterMs;
    const pauseMs = typeof after === 'number' && Number.isFinite(after) && after > 0 ? Math.min(MAX_PAUSE_MS, Math.ceil(after)) : undefined;
    const message = text === '' ? `${tool} failed on mcp server "${server}"` : text;
    if (pauseMs !== undefined) return toolError(message, true, { content: result.content ?? [], retryAfterMs: pauseMs }, pauseMs, pauseMs);
    return toolError(message, false, { content: result.content ?? [] });
  }
  return { ok: true, output: outputOf(result) };
}

/** The attempt's result from a failed call. */
function failureOf(err: unknown, request: ExecuteRequest, budget: number, server: string): ExecuteResult {
  const signal = request.signal;
  if (signal.aborted) return cancelledResult();
  const rpc = rpcCode(err);
  if (rpc === REQUEST_TIMEOUT) return timeoutResult(budget);
  if (rpc === OUTPUT_TOO_LARGE_RPC) {
    const data = (err as { data?: { bytes?: number; maxFrameBytes?: number } }).data;
    const message = `${request.callId}: the answer of mcp server "${server}" passes its maxOutputBytes (${data?.bytes ?? '?'} bytes): dropped unread`;
    return { ok: false, error: callError('output_too_large', message, { details: { server, bytes: data?.bytes } }), retryable: false };
  }
  if (err instanceof Error && err.name === UNAVAILABLE)
    return (err as { sent?: boolean }).sent === true ? lostAnswer(err.message, { server }) : toolError(err.message, true, { server });
  if (rpc === CONNECTION_CLOSED) return lostAnswer(`mcp server "${server}": ${messageOf(err)}`, { server, code: rpc });
  return toolError(`mcp server "${server}": ${messageOf(err)}`, false, { server, ...(rpc !== undefined ? { code: rpc } : {}) });
}

/**
 * One attempt: the caller's promise and one reaction to it, nothing more (no async wrappers: each
 * would add a promise and a turn of the microtask queue to every call). The SDK's own request timeout
 * is the attempt's budget (it sends notifications/cancelled when it fires), and the request's signal
 * is the cancel: no second timer or AbortController per call.
 */
function call(request: ExecuteRequest, caller: McpCaller, server: string, tool: string): Promise<ExecuteResult> {
  const signal = request.signal;
  if (signal.aborted) return Promise.resolve(cancelledResult());
  const budget = budgetOf(request);
  let answer: Promise<CallToolResult>;
  try {
    answer = caller.call(tool, request.args ?? {}, signal, budget);
  } catch (err) {
    answer = Promise.reject(err);
  }
  return answer.then(
    (result) => {
      try {
        return resultOf(result, server, tool);
      } catch (err) {
        return toolError(`mcp server "${server}": an answer that is not a tools/call result: ${messageOf(err)}`, false, { server });
      }
    },
    (err: unknown) => failureOf(err, request, budget, server),
  );
}

/**
 * @param servers the connections by server name (`McpRuntime.servers`); a tool of a server not
 *   there fails with a permanent `tool_error`.
 */
export function createMcpExecutor(servers: ReadonlyMap<string, McpCaller>): Executor {
  return {
    execute(request) {
      try {
        const spec = request.tool.executor;
        if (spec.kind !== 'mcp') return Promise.resolve(toolError(`not an mcp tool: ${spec.kind}`, false));
        const caller = servers.get(spec.server);
        if (!caller) return Promise.resolve(toolError(`no mcp server named "${spec.server}" is connected`, false));
        return call(request, caller, spec.server, spec.tool);
      } catch (err) {
        return Promise.resolve(toolError(messageOf(err), false));
      }
    },
    // The connections belong to whoever started them (`McpRuntime.close`).
    async close() {},
  };
}
