/**
 * MCP executor (DESIGN §13): `{ kind: mcp, server, tool }` is a `tools/call` on the server's shared
 * connection.
 *
 * - The output is the result's `structuredContent` when there is one, else `{ content: [...] }`.
 * - `isError: true` fails the call with `tool_error`, the result's text as the message.
 * - Cancel and timeout abort the request, which sends `notifications/cancelled` to the server.
 * - A server that is down, or a connection lost during the call, is a retryable `tool_error`; the
 *   connection is made again for the next call.
 * - An output whose JSON is larger than the tool's `maxOutputBytes` fails with `output_too_large`.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { callError } from '../core/errors.js';
import type { ExecuteRequest, ExecuteResult, Executor } from './types.js';
import { budgetOf, cancelledResult, messageOf, timeoutResult, toolError } from './deadline.js';

/** What the executor needs of a server: the `McpConnection` of src/mcp is one. */
export interface McpCaller {
  call(tool: string, args: Record<string, unknown>, signal: AbortSignal, timeoutMs: number): Promise<CallToolResult>;
}

/** Thrown by a caller when the server cannot be reached now (retryable). Matched by name, so this
 * module loads nothing of the SDK. */
const UNAVAILABLE = 'McpUnavailableError';
/** JSON-RPC error code of the SDK's own request timeout. */
const REQUEST_TIMEOUT = -32001;

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

async function call(request: ExecuteRequest, caller: McpCaller, server: string, tool: string, maxBytes: number | undefined): Promise<ExecuteResult> {
  // The SDK's own request timeout is the attempt's budget (it sends notifications/cancelled when it
  // fires), and the request's signal is the cancel: no second timer or AbortController per call.
  const budget = budgetOf(request);
  const signal = request.signal;
  if (signal.aborted) return cancelledResult();
  try {
    const result = await caller.call(tool, request.args ?? {}, signal, budget);
    if (result.isError === true) {
      const text = textOf(result);
      return toolError(text === '' ? `${tool} failed on mcp server "${server}"` : text, false, { content: result.content ?? [] });
    }
    const output = outputOf(result);
    if (maxBytes !== undefined) {
      const size = Buffer.byteLength(JSON.stringify(output) ?? '', 'utf8');
      if (size > maxBytes) {
        return {
          ok: false,
          error: callError('output_too_large', `the output of ${tool} is ${size} bytes of JSON, more than maxOutputBytes (${maxBytes})`, { details: { bytes: size, maxOutputBytes: maxBytes } }),
          retryable: false,
        };
      }
    }
    return { ok: true, output };
  } catch (err) {
    if (signal.aborted) return cancelledResult();
    if (rpcCode(err) === REQUEST_TIMEOUT) return timeoutResult(budget);
    if (err instanceof Error && err.name === UNAVAILABLE) return toolError(err.message, true, { server });
    const rpc = rpcCode(err);
    const code = rpc !== undefined ? { code: rpc } : {};
    return toolError(`mcp server "${server}": ${messageOf(err)}`, false, { server, ...code });
  }
}

/**
 * @param servers the connections by server name (`McpRuntime.servers`); a tool of a server not
 *   there fails with a permanent `tool_error`.
 */
export function createMcpExecutor(servers: ReadonlyMap<string, McpCaller>): Executor {
  return {
    async execute(request) {
      const spec = request.tool.executor;
      if (spec.kind !== 'mcp') return toolError(`not an mcp tool: ${spec.kind}`, false);
      const caller = servers.get(spec.server);
      if (!caller) return toolError(`no mcp server named "${spec.server}" is connected`, false);
      try {
        return await call(request, caller, spec.server, spec.tool, spec.maxOutputBytes);
      } catch (err) {
        return toolError(messageOf(err), false);
      }
    },
    // The connections belong to whoever started them (`McpRuntime.close`).
    async close() {},
  };
}
