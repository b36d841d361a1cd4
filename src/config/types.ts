import type { Defaults, Limits, Policy, ToolManifest, Catalog } from '../core/tool.js';
import type { McpSection } from './mcp-schema.js';
import type { HookConfig } from './hooks-schema.js';

export type Role = 'agent' | 'operator';

export interface AuthKey {
  /** The secret itself (already read from the environment when the file said `env:NAME`). */
  key: string;
  tenant: string;
  role: Role;
  /** The most urgent run `priority` this key may submit (1 most urgent … 5; DESIGN §4); none: any. */
  maxPriority?: number;
}

/** The whole validated configuration, deep-frozen. */
export interface Config {
  tools: readonly ToolManifest[];
  policy: Policy;
  limits: Limits;
  defaults: Defaults;
  auth: { keys: readonly AuthKey[] };
  server: { host: string; port: number; db: string };
  /** MCP servers whose tools join the catalog at start (DESIGN §13); absent or empty: none. */
  mcp?: McpSection;
  /** `url`: PostgreSQL (DESIGN §12), above `server.db`; `poolSize`: its most connections; `leaseMs`: a replica's lease on its runs;
   * `takeoverConcurrency`: the most runs of a dead replica this one resumes at once; `permitSlices`:
   * whether a replica grants calls of counted limits from slices it holds (cluster/permit-slices.ts). */
  store: { url?: string; poolSize: number; leaseMs: number; takeoverConcurrency: number; permitSlices: boolean };
  /** Hooks around every matching call (DESIGN §14), in config order; absent or empty: none. */
  hooks?: readonly HookConfig[];
  /** The catalog built from `tools`, with compiled Ajv checks. */
  catalog: Catalog;
  /** Where it came from: a file path, or `builtin:demo`. */
  source: string;
}
