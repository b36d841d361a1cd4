/**
 * The catalog as `GET /v1/tools` and `toolgraph tools` show it (DESIGN §7, §13): each tool with its
 * `source`, or the tool definitions a model API takes (`format=openai|anthropic`), so a backend hands
 * the model exactly the tools toolgraph will run. A tool whose name the vendor refuses (outside
 * `^[a-zA-Z0-9_-]{1,64}$`, e.g. with a dot) is left out and listed in `skipped`.
 */
import { z } from 'zod';
import type { ToolManifest } from '../core/tool.js';

export const TOOL_FORMATS = ['openai', 'anthropic'] as const;
export type ToolFormat = (typeof TOOL_FORMATS)[number];

export const ToolsQuery = z.strictObject({ format: z.enum(TOOL_FORMATS).optional() });

/** Tool names that OpenAI and Anthropic accept. */
export const MODEL_TOOL_NAME_RE = /^[a-zA-Z0-9_-]{1,64}$/;

/** Where a tool comes from: the config file, the builtin demo catalog, or an MCP server. */
export type ToolSource = 'config' | 'builtin' | `mcp:${string}`;

export function toolSource(t: ToolManifest, configSource: string): ToolSource {
  if (t.executor.kind === 'mcp') return `mcp:${t.executor.server}`;
  return configSource === 'builtin:demo' ? 'builtin' : 'config';
}

/** What the catalog shows of a tool: everything but executor secrets (header values), and its source. */
export function listedTool(t: ToolManifest, configSource: string) {
  const executor = t.executor.kind === 'http' ? { kind: 'http', url: t.executor.url } : t.executor;
  return { ...t, executor, source: toolSource(t, configSource) };
}

export interface ModelTools {
  tools: Record<string, unknown>[];
  skipped: { name: string; reason: string }[];
}

const EMPTY_OBJECT_SCHEMA = { type: 'object', properties: {} };

export function modelTools(tools: readonly ToolManifest[], format: ToolFormat): ModelTools {
  const out: ModelTools = { tools: [], skipped: [] };
  for (const t of tools) {
    if (!MODEL_TOOL_NAME_RE.test(t.name)) {
      out.skipped.push({ name: t.name, reason: `${format} takes tool names of 1–64 characters [a-zA-Z0-9_-] only` });
      continue;
    }
    const schema = t.input ?? EMPTY_OBJECT_SCHEMA;
    const description = t.description !== undefined ? { description: t.description } : {};
    out.tools.push(
      format === 'openai'
        ? { type: 'function', function: { name: t.name, ...description, parameters: schema } }
        : { name: t.name, ...description, input_schema: schema },
    );
  }
  return out;
}
