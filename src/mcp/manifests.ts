/**
 * An MCP server's tools as catalog manifests (DESIGN §13).
 *
 * - `include` globs and the keys under `tools:` use the server's own names; the catalog name is
 *   `prefix + name`.
 * - The input schema is the tool's `inputSchema` (draft-07 or 2020-12); one that does not compile, or
 *   a name toolgraph cannot use, skips the tool with a warning that names it.
 * - Trusted annotations give the defaults: `readOnlyHint: true` → `reads: [mcp:<server>]`, `writes: []`,
 *   `risk: read`; otherwise `writes: [mcp:<server>]`, `risk: write`; `idempotentHint: true` →
 *   `idempotent: true`. An untrusted server's tools are opaque: `writes: ["*"]`, not idempotent.
 * - An override wins field by field; one that declares `reads` or `writes` declares the tool's effects
 *   (the one it leaves out is empty).
 * - `maxOutputBytes` (the tool's override, else the server's) is the manifest's own, so the engine's
 *   one check of an output's size uses it; without either, `limits.maxOutputBytes` applies.
 */
import type { Ajv } from 'ajv';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Defaults, Limits, ToolManifest } from '../core/tool.js';
import { compileSchema } from '../config/catalog.js';
import type { McpServerConfig, ToolOverride } from '../config/mcp-schema.js';
import { TOOL_NAME_RE } from '../config/schema.js';
import { serverPath } from './checks.js';

export interface ServerManifests {
  manifests: ToolManifest[];
  /** Tools left out, each naming the tool and why. */
  warnings: string[];
  /** Config problems (an override for a tool the server does not list, retry without idempotent). */
  problems: string[];
}

export interface ManifestContext {
  /** Where the server sits in `mcp.servers`, for messages. */
  index: number;
  defaults: Defaults;
  limits: Limits;
  ajv: Ajv;
}

/** `*` and `?` globs, as policy globs are. */
export function globMatch(glob: string, name: string): boolean {
  const re = new RegExp(
    `^${glob
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
  );
  return re.test(name);
}

export function manifestsOf(server: McpServerConfig, tools: readonly Tool[], ctx: ManifestContext): ServerManifests {
  const out: ServerManifests = { manifests: [], warnings: [], problems: [] };
  const listed = new Set(tools.map((t) => t.name));
  for (const key of Object.keys(server.tools)) {
    if (!listed.has(key))
      out.problems.push(
        `${serverPath(ctx.index, key)}: expected the name of a tool the server lists, got ${JSON.stringify(key)} (it lists ${[...listed].slice(0, 20).join(', ') || 'no tools'})`,
      );
  }
  for (const tool of tools) {
    if (server.include && !server.include.some((g) => globMatch(g, tool.name))) continue;
    const name = `${server.prefix}${tool.name}`;
    const skip = (why: string) => out.warnings.push(`mcp server "${server.name}": tool ${JSON.stringify(tool.name)} skipped: ${why}`);
    if (!TOOL_NAME_RE.test(name)) {
      skip(`its catalog name ${JSON.stringify(name)} is not 1–64 characters [A-Za-z0-9_.-]`);
      continue;
    }
    const input = tool.inputSchema as Record<string, unknown>;
    try {
      compileSchema(ctx.ajv, input);
    } catch (err) {
      skip(`its input schema does not compile: ${(err as Error).message}`);
      continue;
    }
    const manifest = manifestOf(server, tool, name, server.tools[tool.name] ?? {}, ctx);
    if (manifest.retry !== undefined && !manifest.idempotent) {
      out.problems.push(
        `${serverPath(ctx.index, tool.name)}.retry: retry needs idempotent: true (set idempotent: true, or trust a server that marks the tool idempotentHint)`,
      );
    }
    out.manifests.push(manifest);
  }
  return out;
}

function manifestOf(server: McpServerConfig, tool: Tool, name: string, o: ToolOverride, ctx: ManifestContext): ToolManifest {
  const hints = server.trustAnnotations ? (tool.annotations ?? {}) : undefined;
  const resource = `mcp:${server.name}`;
  const readOnly = hints?.readOnlyHint === true;
  let reads: string[] | undefined = hints ? (readOnly ? [resource] : []) : [];
  let writes: string[] | undefined = hints ? (readOnly ? [] : [resource]) : ['*'];
  if (o.reads !== undefined || o.writes !== undefined) {
    reads = o.reads ?? [];
    writes = o.writes ?? [];
  }
  const description = o.description ?? tool.description ?? tool.title;
  const m: ToolManifest = {
    name,
    ...(description !== undefined ? { description } : {}),
    input: tool.inputSchema as Record<string, unknown>,
    reads,
    writes,
    scope: o.scope ?? server.scope,
    risk: o.risk ?? (readOnly ? 'read' : 'write'),
    idempotent: o.idempotent ?? hints?.idempotentHint === true,
    timeoutMs: o.timeoutMs ?? ctx.defaults.timeoutMs,
    after: o.after ?? [],
    requires: o.requires ?? [],
    executor: { kind: 'mcp', server: server.name, tool: tool.name },
  };
  // The tool's own cap, which the engine holds every output to (else `limits.maxOutputBytes`).
  const maxOutputBytes = o.maxOutputBytes ?? server.maxOutputBytes;
  if (maxOutputBytes !== undefined) m.maxOutputBytes = maxOutputBytes;
  if (o.retry !== undefined) m.retry = o.retry;
  if (typeof o.concurrency === 'number') m.concurrency = o.concurrency;
  else if (o.concurrency !== undefined) m.keyedConcurrency = o.concurrency;
  if (o.queueTimeoutMs !== undefined) m.queueTimeoutMs = o.queueTimeoutMs;
  if (o.rate !== undefined) m.rate = o.rate;
  if (o.failure !== undefined) m.failure = o.failure;
  if (o.compensate !== undefined) m.compensate = o.compensate;
  return m;
}
