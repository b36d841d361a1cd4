/**
 * The catalog as `GET /v1/tools` and `toolgraph tools` show it (DESIGN §7, §13): each tool with its
 * `source`, or the tool definitions a model API takes (`format=openai|anthropic`), so a backend hands
 * the model exactly the tools toolgraph will run. A tool whose name the vendor refuses (outside
 * `^[a-zA-Z0-9_-]{1,64}$`, e.g. with a dot) is exported under a vendor-safe name
 * (contract/model-names.ts), listed in `renamed`; a model's call of that name runs the tool.
 */
import { z } from 'zod';
import type { Catalog, ToolManifest } from '../core/tool.js';
import { MODEL_TOOL_NAME_RE, modelNames, type ModelNames } from '../contract/model-names.js';

export const TOOL_FORMATS = ['openai', 'anthropic'] as const;
export type ToolFormat = (typeof TOOL_FORMATS)[number];

export const ToolsQuery = z.strictObject({ format: z.enum(TOOL_FORMATS).optional() });

export { MODEL_TOOL_NAME_RE };

const namesByCatalog = new WeakMap<Catalog, ModelNames>();

/** The names a model sees for the catalog's tools (made once per catalog). */
export function catalogModelNames(catalog: Catalog): ModelNames {
  let names = namesByCatalog.get(catalog);
  if (!names) {
    names = modelNames(catalog.list().map((t) => t.name));
    namesByCatalog.set(catalog, names);
  }
  return names;
}

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
  /** Tools left out: none any more (every name is exported, renamed if need be); kept for older clients. */
  skipped: { name: string; reason: string }[];
  /** The tools exported under another name than their own: `{ name, exported }`. */
  renamed: { name: string; exported: string }[];
}

const EMPTY_OBJECT_SCHEMA = { type: 'object', properties: {} };

export function modelTools(tools: readonly ToolManifest[], format: ToolFormat, names = modelNames(tools.map((t) => t.name))): ModelTools {
  const out: ModelTools = { tools: [], skipped: [], renamed: [] };
  for (const t of tools) {
    const name = names.exported(t.name) ?? t.name;
    if (name !== t.name) out.renamed.push({ name: t.name, exported: name });
    const schema = t.input ?? EMPTY_OBJECT_SCHEMA;
    const description = t.description !== undefined ? { description: t.description } : {};
    out.tools.push(
      format === 'openai'
        ? { type: 'function', function: { name, ...description, parameters: schema } }
        : { name, ...description, input_schema: schema },
    );
  }
  return out;
}
