/**
 * `tools/list` of toolgraph's MCP server (DESIGN §16): the catalog (config tools and the tools of
 * `mcp.servers` alike) as MCP tool definitions, plus `toolgraph_batch`, in pages.
 *
 * Annotations come from the manifest, never from a guess: `readOnlyHint` when the tool writes nothing
 * (it declares its effects and its `writes` are empty), `idempotentHint` from `idempotent`,
 * `destructiveHint: true` for `risk: dangerous`. A tool with no input schema takes any object; an
 * input schema that is not `type: object` at its top (an `anyOf`, say) is given `type: object`, since
 * MCP clients refuse a tool list otherwise and args are always an object.
 */
import type { ListToolsResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ToolManifest } from '../core/tool.js';
import { FAILURE_MODES } from '../core/tool.js';

/** The name of the tool that runs a whole batch as one run. */
export const BATCH_TOOL = 'toolgraph_batch';

/** Tools per page of `tools/list`. */
export const DEFAULT_PAGE_SIZE = 100;

/** Whether a manifest writes nothing: its effects are declared and its `writes` are empty. */
export function writesNothing(t: ToolManifest): boolean {
  if (t.reads === undefined && t.writes === undefined) return false;
  return (t.writes ?? []).length === 0;
}

function inputSchemaOf(t: ToolManifest): Tool['inputSchema'] {
  const input = t.input;
  if (input === undefined) return { type: 'object' };
  return (input.type === 'object' ? input : { ...input, type: 'object' }) as Tool['inputSchema'];
}

/** One catalog tool as MCP lists it. */
export function mcpToolOf(t: ToolManifest): Tool {
  const annotations: NonNullable<Tool['annotations']> = { readOnlyHint: writesNothing(t), idempotentHint: t.idempotent };
  if (t.risk === 'dangerous') annotations.destructiveHint = true;
  return {
    name: t.name,
    ...(t.description !== undefined ? { description: t.description } : {}),
    inputSchema: inputSchemaOf(t),
    annotations,
  };
}

const CALL_RESULT_SCHEMA = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    tool: { type: 'string' },
    status: { type: 'string' },
    output: {},
    error: {
      type: 'object',
      properties: { code: { type: 'string' }, message: { type: 'string' }, callId: { type: 'string' } },
      required: ['code', 'message'],
    },
  },
  required: ['id', 'tool', 'status'],
};

/** `toolgraph_batch`: the body of `POST /v1/runs` (`calls`, `failure`, `priority`) in, the calls' results in call order out. */
export function batchTool(maxCalls: number): Tool {
  return {
    name: BATCH_TOOL,
    description:
      'Runs several tool calls as one toolgraph run: calls that conflict (a write and a read of the same thing) run in ' +
      'call order, the others in parallel, under the limits and policy of the server. A string "${ID.output}" or ' +
      '"${ID.output.a.b[0]}" in args is replaced by that call\'s output, so a call can use what an earlier one returned. ' +
      'The result lists every call in the order given, with its status and its output or error.',
    inputSchema: {
      type: 'object',
      properties: {
        calls: {
          type: 'array',
          minItems: 1,
          maxItems: maxCalls,
          description: 'The calls, in order; each id is unique within the batch.',
          items: {
            type: 'object',
            properties: {
              id: { type: 'string', pattern: '^[A-Za-z0-9_.:-]{1,128}$', description: 'The call id, used in references' },
              tool: { type: 'string', description: 'The name of a tool of tools/list' },
              args: { type: 'object', description: "The tool's arguments" },
            },
            required: ['id', 'tool'],
            additionalProperties: false,
          },
        },
        failure: {
          type: 'string',
          enum: [...FAILURE_MODES],
          description: 'fail_fast: the first failure cancels the rest; partial (default): calls that do not depend on it go on',
        },
        priority: {
          type: 'integer',
          minimum: 1,
          maximum: 5,
          description: '1 (most urgent) to 5; default 3. Under busy limits the more urgent run goes first; a key may be capped.',
        },
      },
      required: ['calls'],
      additionalProperties: false,
    },
    outputSchema: {
      type: 'object',
      properties: {
        runId: { type: 'string' },
        status: { type: 'string' },
        results: { type: 'array', items: CALL_RESULT_SCHEMA },
      },
      required: ['runId', 'status', 'results'],
    },
    annotations: { readOnlyHint: false, idempotentHint: false },
  };
}

/** Thrown for a cursor that no page of ours gave: an invalid `tools/list` request. */
export class BadCursorError extends Error {
  override readonly name = 'BadCursorError';
}

function cursorOf(offset: number): string {
  return Buffer.from(`tools:${offset}`).toString('base64url');
}

function offsetOf(cursor: string): number {
  const m = cursor.length <= 40 ? /^tools:(\d{1,9})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8')) : null;
  if (!m) throw new BadCursorError(`the cursor ${JSON.stringify(cursor.slice(0, 50))} was not given by this server`);
  return Number(m[1]);
}

export type ToolPage = ListToolsResult;

/**
 * One page of `tools/list`: the catalog in its order, then `toolgraph_batch`. The cursor is an offset
 * (a catalog refreshed between pages shifts it, as any list that changes between pages does).
 */
export function toolPage(catalog: readonly ToolManifest[], opts: { cursor?: string; pageSize: number; maxCalls: number }): ToolPage {
  const start = opts.cursor === undefined ? 0 : offsetOf(opts.cursor);
  const total = catalog.length + 1;
  const end = Math.min(total, start + opts.pageSize);
  const tools: Tool[] = [];
  for (let i = start; i < end; i++) tools.push(i < catalog.length ? mcpToolOf(catalog[i] as ToolManifest) : batchTool(opts.maxCalls));
  return end < total ? { tools, nextCursor: cursorOf(end) } : { tools };
}
