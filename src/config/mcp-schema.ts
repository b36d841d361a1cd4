/**
 * The `mcp:` section of the config file (DESIGN §13): the MCP servers whose tools join the catalog.
 *
 * ```yaml
 * mcp:
 *   servers:
 *     - name: fs
 *       command: node                       # stdio: command, args, env, cwd
 *       args: [./node_modules/@modelcontextprotocol/server-filesystem/dist/index.js, /srv/repo]
 *       # url: https://mcp.example.com/mcp  # Streamable HTTP instead: url, headers (values may be env:NAME)
 *       prefix: fs__                        # default "<name>__"
 *       trustAnnotations: true              # default false: every tool opaque (writes *)
 *       include: ["read_*", write_file]     # globs on the server's own tool names
 *       scope: tenant
 *       maxOutputBytes: 1048576             # default limits.maxOutputBytes
 *       tools:                              # per-tool overrides: any field of tools[] but name/input/executor
 *         write_file: { writes: ["file:{path}"] }
 * ```
 *
 * This file checks the section's shape only; the tools themselves are known once the servers have
 * listed them (src/mcp/catalog.ts merges them and checks the names that the config mentions).
 */
import path from 'node:path';
import { z } from 'zod';
import { isHttpUrl, secretText, strict, text, type SchemaCtx as Ctx } from './schema-parts.js';
import type { KeyedConcurrency, ToolManifest } from '../core/tool.js';

/** Fields of a tool that an override may set: everything but name, input and executor, plus the output cap. */
export type ToolOverride = Partial<Omit<ToolManifest, 'name' | 'input' | 'executor' | 'concurrency' | 'keyedConcurrency'>> & {
  maxOutputBytes?: number;
  /** A count, or a keyed limit `{ limit, per }` (DESIGN §4). */
  concurrency?: number | KeyedConcurrency;
};

/** One server, validated (env:NAME values already read). */
export interface McpServerConfig {
  name: string;
  /** stdio transport. */
  command?: string;
  args: string[];
  env?: Record<string, string>;
  cwd?: string;
  /** Streamable HTTP transport. */
  url?: string;
  headers?: Record<string, string>;
  prefix: string;
  trustAnnotations: boolean;
  include?: string[];
  scope: 'run' | 'tenant' | 'global';
  maxOutputBytes?: number;
  /** Keyed by the server's own tool name (without the prefix). */
  tools: Record<string, ToolOverride>;
}

export interface McpSection {
  servers: McpServerConfig[];
}

export const MCP_SERVER_NAME_RE = /^[A-Za-z0-9_-]{1,32}$/;
const PREFIX_RE = /^[A-Za-z0-9_.-]{0,32}$/;

const posInt = () => z.int({ error: 'expected an integer ≥ 1' }).min(1, { error: 'expected an integer ≥ 1' });

const stringMap = <T extends z.ZodType>(value: T) =>
  z.record(z.string().min(1, { error: 'expected a non-empty key' }), value, { error: 'expected a mapping' });

/** A tool field's schema without its default, optional: an override sets only what it names. */
function overrideField(schema: z.ZodType): z.ZodType {
  const bare = schema instanceof z.ZodDefault ? (schema.unwrap() as z.ZodType) : schema;
  return bare.optional();
}

/**
 * The schema of `mcp:`. `toolShape` is the shape of `tools[]` entries (from ./schema.ts), whose field
 * checks the per-tool overrides reuse.
 */
export function mcpSchema(ctx: Ctx, toolShape: Record<string, z.ZodType>) {
  const { name: _n, input: _i, executor: _e, ...fields } = toolShape;
  const overrideShape: Record<string, z.ZodType> = { maxOutputBytes: posInt().optional() };
  for (const [k, s] of Object.entries(fields)) overrideShape[k] = overrideField(s);
  const override = strict(overrideShape);

  const server = strict({
    name: z
      .string({ error: 'expected a server name' })
      .regex(MCP_SERVER_NAME_RE, { error: 'expected a server name of 1–32 characters [A-Za-z0-9_-]' }),
    command: text().optional(),
    args: z.array(z.string({ error: 'expected a string' }), { error: 'expected a list' }).default([]),
    env: stringMap(secretText(ctx)).optional(),
    cwd: text()
      .transform((d) => path.resolve(ctx.baseDir, d))
      .optional(),
    url: z
      .string({ error: 'expected an http:// or https:// URL' })
      .refine(isHttpUrl, { error: 'expected an http:// or https:// URL' })
      .optional(),
    headers: stringMap(secretText(ctx)).optional(),
    prefix: z
      .string({ error: 'expected a string' })
      .regex(PREFIX_RE, { error: 'expected a prefix of 0–32 characters [A-Za-z0-9_.-]' })
      .optional(),
    trustAnnotations: z.boolean({ error: 'expected true or false' }).default(false),
    include: z.array(text(), { error: 'expected a list' }).optional(),
    scope: z.enum(['run', 'tenant', 'global'], { error: 'expected one of run, tenant, global' }).default('tenant'),
    maxOutputBytes: posInt().optional(),
    tools: stringMap(override).default({}),
  }).superRefine(
    (s, c) => {
      const v = s as Partial<Record<string, unknown>>;
      const stdio = v.command !== undefined;
      const http = v.url !== undefined;
      if (stdio === http) {
        c.addIssue({
          code: 'custom',
          input: undefined,
          message: 'expected either command (stdio) or url (Streamable HTTP), not both or neither',
        });
      }
      if (!stdio && ((Array.isArray(v.args) && v.args.length > 0) || v.env !== undefined || v.cwd !== undefined)) {
        c.addIssue({ code: 'custom', input: undefined, message: 'expected args, env and cwd only with command (stdio)' });
      }
      if (!http && v.headers !== undefined)
        c.addIssue({ code: 'custom', path: ['headers'], input: undefined, message: 'expected headers only with url (Streamable HTTP)' });
      const tools = v.tools;
      if (typeof tools === 'object' && tools !== null) {
        for (const [name, o] of Object.entries(tools as Record<string, Record<string, unknown> | undefined>)) {
          if (o?.retry !== undefined && o.idempotent === false) {
            c.addIssue({ code: 'custom', path: ['tools', name, 'retry'], message: 'retry needs idempotent: true' });
          }
        }
      }
    },
    { when: () => true },
  );

  return strict({
    servers: z
      .array(server, { error: 'expected a list' })
      .default([])
      .superRefine((servers, c) => {
        const seen = new Map<string, number>();
        servers.forEach((s, i) => {
          const first = seen.get(s.name);
          if (first !== undefined)
            c.addIssue({ code: 'custom', path: [i, 'name'], input: s.name, message: `expected a name not used by mcp.servers[${first}]` });
          else seen.set(s.name, i);
        });
      }),
  }).transform(
    (section): McpSection => ({
      servers: section.servers.map((s) => {
        const out: McpServerConfig = {
          name: s.name,
          args: s.args,
          prefix: s.prefix ?? `${s.name}__`,
          trustAnnotations: s.trustAnnotations,
          scope: s.scope,
          tools: s.tools as Record<string, ToolOverride>,
        };
        if (s.command !== undefined) out.command = s.command;
        if (s.env !== undefined) out.env = s.env;
        if (s.cwd !== undefined) out.cwd = s.cwd;
        if (s.url !== undefined) out.url = s.url;
        if (s.headers !== undefined) out.headers = s.headers;
        if (s.include !== undefined) out.include = s.include;
        if (s.maxOutputBytes !== undefined) out.maxOutputBytes = s.maxOutputBytes;
        return out;
      }),
    }),
  );
}
