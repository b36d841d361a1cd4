/**
 * From a run to what `tools/call` answers (DESIGN §16).
 *
 * - A succeeded call: its output as text (a string as it is, anything else as JSON) and, when it is a
 *   JSON object, as `structuredContent`. The output of an MCP server's tool that gave no structured
 *   content (`{ content: [...] }`, DESIGN §13) is handed on as that content, images and all.
 * - A failed, blocked or cancelled call: `isError: true`, the text `code: message`, and
 *   `structuredContent: { error }` with the code, message and details.
 * - `toolgraph_batch`: `{ runId, status, results }`, the calls in call order; `isError` unless the run
 *   succeeded.
 * - A request toolgraph refused before any run (bad input, too many runs, the store away): `isError`
 *   with the API's error code; a `Retry-After` becomes `_meta.retryAfterMs` (DESIGN §4).
 *
 * Every result names its run in `_meta["toolgraph/runId"]`, to find it in the dashboard.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { CallError } from '../core/errors.js';
import type { ToolManifest } from '../core/tool.js';
import type { CallView, RunView } from '../core/view.js';

/** The `_meta` key that names the run behind a result. */
export const RUN_META = 'toolgraph/runId';

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  return JSON.stringify(value) ?? 'null';
}

/** The content an MCP server gave, when the output is exactly that (`{ content: [...] }`). */
function passedContent(output: unknown, tool: ToolManifest | undefined): CallToolResult['content'] | undefined {
  if (tool?.executor.kind !== 'mcp' || !isPlainObject(output)) return undefined;
  const keys = Object.keys(output);
  return keys.length === 1 && keys[0] === 'content' && Array.isArray(output.content)
    ? (output.content as CallToolResult['content'])
    : undefined;
}

function errorResult(error: CallError, runId: string): CallToolResult {
  const { code, message } = error;
  return {
    content: [{ type: 'text', text: `${code}: ${message}` }],
    structuredContent: { error },
    isError: true,
    _meta: { [RUN_META]: runId },
  };
}

/** The error a call ended with (its own, or what blocked it), or `cancelled` for a call that never ended. */
export function callErrorOf(call: CallView): CallError {
  if (call.error) return call.error;
  if (call.blockedBy) return call.blockedBy;
  return { code: 'cancelled', message: `the call ended ${call.status} without a result` };
}

/** The result of a one-call run, once the run has ended. */
export function callResult(run: RunView, tool: ToolManifest | undefined): CallToolResult {
  const call = run.calls[0] as CallView;
  if (call.status !== 'succeeded') return errorResult(callErrorOf(call), run.id);
  const output = call.output;
  const meta = { [RUN_META]: run.id };
  const passed = passedContent(output, tool);
  if (passed) return { content: passed, _meta: meta };
  return {
    content: [{ type: 'text', text: textOf(output) }],
    ...(isPlainObject(output) ? { structuredContent: output } : {}),
    _meta: meta,
  };
}

/** The result of `toolgraph_batch`, once its run has ended. */
export function batchResult(run: RunView): CallToolResult {
  const results = run.calls.map((c) =>
    c.status === 'succeeded'
      ? { id: c.id, tool: c.tool, status: c.status, output: c.output }
      : { id: c.id, tool: c.tool, status: c.status, error: callErrorOf(c) },
  );
  const structured = { runId: run.id, status: run.status, results };
  return {
    content: [{ type: 'text', text: JSON.stringify(structured) }],
    structuredContent: structured,
    ...(run.status === 'succeeded' ? {} : { isError: true }),
    _meta: { [RUN_META]: run.id },
  };
}

/** A request refused before it became a run: the API's code and message, and when to try again. */
export function refusedResult(code: string, message: string, retryAfterSeconds?: string): CallToolResult {
  const retryAfterMs = retryAfterSeconds !== undefined ? Number(retryAfterSeconds) * 1000 : Number.NaN;
  return {
    content: [{ type: 'text', text: `${code}: ${message}` }],
    structuredContent: { error: { code, message } },
    isError: true,
    ...(Number.isFinite(retryAfterMs) ? { _meta: { retryAfterMs } } : {}),
  };
}
