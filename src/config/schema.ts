/**
 * The zod schema of the config file (DESIGN §2, §4, §5, §7 Auth, §8, §14): tools, policy, limits,
 * defaults, auth, server and hooks. Every object is strict (an unknown key is an error), every field says what
 * it expects in its error message (the loader appends what it found), and the cross-field rules
 * (unique names, retry needs idempotent, known tool names, compiling input schemas) are checks of the
 * same schema, so one parse reports every problem. The result is plain data shaped like `Config`
 * without `catalog` and `source`.
 */
import path from 'node:path';
import { z } from 'zod';
import type { Ajv } from 'ajv';
import type { Defaults, Limits, Policy, Rate, ToolManifest } from '../core/tool.js';
import { parseStoreValue } from './store-url.js';
import { strict, text } from './schema-parts.js';
import type { AuthKey } from './types.js';
import { DEFAULT_MAX_ARGS_BYTES, DEFAULT_MAX_OUTPUT_BYTES } from '../core/size.js';
import { DEFAULT_HOOKS_IN_FLIGHT } from '../core/hooks.js';
import { schemaProblem } from './input-schema.js';
import { parseKey, templateArgs } from '../core/resources.js';
import { mcpSchema, type McpSection } from './mcp-schema.js';
import { hooksSchema, type HookConfig } from './hooks-schema.js';

/** What the schema needs from outside the file. */
export interface SchemaContext {
  /** Where `env:NAME` keys are read. */
  env: Readonly<Record<string, string | undefined>>;
  /** The config file's directory: worker modules resolve against it. */
  baseDir: string;
  /** The Ajv instance input schemas are compiled with (the catalog reuses it). */
  ajv: Ajv;
}

/** The validated file: `Config` without the catalog and the source. */
export interface ConfigFile {
  tools: ToolManifest[];
  policy: Policy;
  limits: Limits;
  defaults: Defaults;
  auth: { keys: AuthKey[] };
  server: { host: string; port: number; db: string };
  mcp: McpSection;
  store: { url?: string; poolSize: number; leaseMs: number; takeoverConcurrency: number; permitSlices: boolean };
  hooks: HookConfig[];
}

export const BUILTIN_EXECUTORS = ['sleep', 'echo', 'fail'] as const;
export const TOOL_NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;
/** A tool name or a glob on tool names (`*`, `?`). */
export const TOOL_GLOB_RE = /^[A-Za-z0-9_.*?-]{1,64}$/;
const RESOURCE_TEMPLATE_RE = /^(?:[^{}]|\{[A-Za-z0-9_.[\]-]+\})+$/;
const RATE_RE = /^([1-9][0-9]*)\/(s|min|h)$/;
/** A keyed limit's `per` template: text with `{arg}` placeholders (an arg path: `{repo.name}`). */
const PER_TEMPLATE_RE = /^(?:[^{}]|\{[A-Za-z0-9_.-]+\})+$/;
const ENV_KEY_RE = /^env:([A-Za-z_][A-Za-z0-9_]*)$/;
const RATE_UNIT_MS: Record<string, number> = { s: 1000, min: 60_000, h: 3_600_000 };

/** Parses `5/s`, `30/min` or `100/h`; `undefined` when the text is not a rate. */
export function parseRate(text: string): Rate | undefined {
  const m = RATE_RE.exec(text.trim());
  if (!m) return undefined;
  const tokens = Number(m[1]);
  return Number.isSafeInteger(tokens) ? { tokens, perMs: RATE_UNIT_MS[m[2]!]! } : undefined;
}

export function isGlob(pattern: string): boolean {
  return pattern.includes('*') || pattern.includes('?');
}

// ---- field helpers: each carries its expectation as the message -------------------------------------

function int(min: number, max?: number) {
  const expected = max === undefined ? `expected an integer ≥ ${min}` : `expected an integer from ${min} to ${max}`;
  const schema = z.int({ error: expected }).min(min, { error: expected });
  return max === undefined ? schema : schema.max(max, { error: expected });
}

const posInt = () => int(1);
const bool = () => z.boolean({ error: 'expected true or false' });
const list = <T extends z.ZodType>(item: T) => z.array(item, { error: 'expected a list' });
const map = <T extends z.ZodType>(value: T) =>
  z.record(z.string().min(1, { error: 'expected a non-empty key' }), value, { error: 'expected a mapping' });
const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `expected one of ${values.join(', ')}` });

const toolName = () =>
  z.string({ error: 'expected a tool name' }).regex(TOOL_NAME_RE, { error: 'expected a tool name of 1–64 characters [A-Za-z0-9_.-]' });
const toolNameOrGlob = () =>
  z
    .string({ error: 'expected a tool name or glob' })
    .regex(TOOL_GLOB_RE, { error: 'expected a tool name or glob of 1–64 characters [A-Za-z0-9_.*?-]' });
const resourceTemplate = () =>
  z
    .string({ error: 'expected a resource template' })
    .regex(RESOURCE_TEMPLATE_RE, { error: 'expected a non-empty resource template like "file:{path}"' });

const rate = () =>
  z
    .string({ error: 'expected a rate like 5/s, 30/min or 100/h' })
    .refine((s) => parseRate(s) !== undefined, { error: 'expected a rate like 5/s, 30/min or 100/h' })
    .transform((s) => parseRate(s)!);

const plainObject = (expected: string) =>
  z.custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null && !Array.isArray(v), { error: expected });

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

// ---- sections ---------------------------------------------------------------------------------------

function executorSchema(ctx: SchemaContext) {
  const builtin = strict({ kind: z.literal('builtin'), name: oneOf(BUILTIN_EXECUTORS).optional() });
  const http = strict({
    kind: z.literal('http'),
    url: z.string({ error: 'expected an http:// or https:// URL' }).refine(isHttpUrl, { error: 'expected an http:// or https:// URL' }),
    headers: map(z.string({ error: 'expected a string' })).optional(),
  });
  const worker = strict({
    kind: z.literal('worker'),
    module: text().transform((m) => path.resolve(ctx.baseDir, m)),
  });
  const client = strict({ kind: z.literal('client') });
  return z.discriminatedUnion('kind', [builtin, http, worker, client], { error: 'expected one of builtin, http, worker, client' });
}

function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}

/** The fields of a tool (`tools[]`), each with its checks and default; MCP overrides reuse them. */
export function toolShape(ctx: SchemaContext) {
  const retry = strict({
    attempts: posInt(),
    backoffMs: int(0).default(200),
    maxBackoffMs: int(0).default(5000),
  }).superRefine((r, c) => {
    if (r.maxBackoffMs < r.backoffMs) {
      c.addIssue({
        code: 'custom',
        path: ['maxBackoffMs'],
        input: r.maxBackoffMs,
        message: `expected an integer ≥ backoffMs (${r.backoffMs})`,
      });
    }
  });
  const input = plainObject('expected a JSON Schema (a mapping)').superRefine((schema, c) => {
    // Which keyword and value are wrong (`input.type: "dict" is not a JSON Schema type`), not the
    // meta-schema validator's list of everything it tried.
    const problem = schemaProblem(ctx.ajv, schema);
    if (problem) c.addIssue({ code: 'custom', path: problem.path, input: undefined, message: problem.message });
  });
  const keyed = strict({
    limit: posInt(),
    per: z
      .string({ error: 'expected a template like "{owner}/{repo}"' })
      .regex(PER_TEMPLATE_RE, { error: 'expected a non-empty template like "{owner}/{repo}"' }),
  });
  const concurrency = z.union([posInt(), keyed], {
    error: (iss) =>
      iss.code === 'invalid_union' && isRecord(iss.input) ? undefined : 'expected an integer ≥ 1, or { limit, per } (a keyed limit)',
  });
  return {
    name: toolName(),
    description: z.string({ error: 'expected a string' }).optional(),
    input: input.optional(),
    reads: list(resourceTemplate()).optional(),
    writes: list(resourceTemplate()).optional(),
    scope: oneOf(['run', 'tenant', 'global']).default('tenant'),
    risk: oneOf(['read', 'write', 'dangerous']).default('write'),
    idempotent: bool().default(false),
    timeoutMs: posInt().optional(),
    retry: retry.optional(),
    concurrency: concurrency.optional(),
    queueTimeoutMs: posInt().optional(),
    rate: rate().optional(),
    failure: oneOf(['fail_fast']).optional(),
    maxOutputBytes: posInt().optional(),
    after: list(toolNameOrGlob()).default([]),
    requires: list(toolNameOrGlob()).default([]),
    compensate: strict({ tool: toolName(), args: plainObject('expected a mapping').default({}) }).optional(),
    executor: executorSchema(ctx),
  };
}

function toolSchema(ctx: SchemaContext) {
  return strict(toolShape(ctx)).superRefine(
    (tool, c) => {
      // Runs even when other fields failed, so it reads the (possibly partial) value defensively.
      const t = tool as Partial<Record<keyof typeof tool, unknown>>;
      if (t.retry !== undefined && t.idempotent !== true) {
        c.addIssue({ code: 'custom', path: ['retry'], message: 'retry needs idempotent: true' });
      }
      const ex = t.executor;
      if (isRecord(ex) && ex.kind === 'builtin' && ex.name === undefined && typeof t.name === 'string') {
        if (!(BUILTIN_EXECUTORS as readonly string[]).includes(t.name)) {
          c.addIssue({
            code: 'custom',
            path: ['executor', 'name'],
            input: undefined,
            message: `expected one of ${BUILTIN_EXECUTORS.join(', ')} (the tool's name ${JSON.stringify(t.name)} is not a builtin)`,
          });
        }
      }
    },
    { when: () => true },
  );
}

const policyRule = () =>
  strict({
    match: strict({
      tool: toolNameOrGlob().optional(),
      risk: oneOf(['read', 'write', 'dangerous']).optional(),
      tenant: text().optional(),
    }),
    after: list(toolNameOrGlob()).optional(),
    requires: list(toolNameOrGlob()).optional(),
    review: bool().optional(),
    deny: text().optional(),
    allow: bool().optional(),
  });

const limitsSchema = () =>
  strict({
    global: posInt().optional(),
    perRun: posInt().optional(),
    maxActiveRunsPerTenant: posInt().optional(),
    maxCallsPerRun: posInt().default(1000),
    maxArgsBytes: posInt().default(DEFAULT_MAX_ARGS_BYTES),
    maxOutputBytes: posInt().default(DEFAULT_MAX_OUTPUT_BYTES),
    hooksInFlight: posInt().default(DEFAULT_HOOKS_IN_FLIGHT),
    tenant: map(posInt()).default({}),
    tool: map(posInt()).default({}),
    resource: map(posInt()).default({}),
    rate: strict({ tenant: map(rate()).default({}) }).prefault({}),
    each: map(posInt())
      .superRefine((each, c) => {
        for (const pattern of Object.keys(each)) {
          const problem = eachPatternProblem(pattern);
          if (problem)
            c.addIssue({
              code: 'custom',
              path: [pattern],
              input: undefined,
              message: `${JSON.stringify(pattern)} is not a key pattern like "repo:*": ${problem}`,
            });
        }
      })
      .optional(),
    priorityAgingMs: posInt().optional(),
    weights: map(int(1, 1000)).optional(),
  });

/** What is wrong with a `limits.each` pattern, if anything (DESIGN §4: `repo:*`, `file:/repos/*`). */
export function eachPatternProblem(pattern: string): string | undefined {
  if (pattern.includes('{') || pattern.includes('}')) return 'a pattern has no {placeholders}';
  const segs = parseKey(pattern);
  if (segs.length < 2) return 'it needs a namespace or a segment before the *';
  if (segs.some((s) => s !== '*' && s.includes('*'))) return 'a * stands for a whole segment';
  if (segs[0] === '*') return 'its first segment cannot be *';
  if (segs[segs.length - 1] !== '*') return 'it must end in a * segment';
  return undefined;
}

const defaultsSchema = () =>
  strict({
    timeoutMs: posInt().default(60_000),
    queueTimeoutMs: posInt().optional(),
    failure: oneOf(['fail_fast', 'partial', 'replan']).default('partial'),
    openRunTimeoutMs: posInt().default(30_000),
  });

/** `key: env:NAME` reads the environment; the key's value never appears in a message. */
function authSchema(ctx: SchemaContext) {
  const key = text().transform((k, c) => {
    const m = ENV_KEY_RE.exec(k);
    if (!m) return k;
    const value = ctx.env[m[1]!];
    if (value === undefined || value === '') {
      c.addIssue({ code: 'custom', input: undefined, message: `expected environment variable ${m[1]} to be set (key: env:${m[1]})` });
      return z.NEVER;
    }
    return value;
  });
  const keys = list(strict({ key, tenant: text(), role: oneOf(['agent', 'operator']), maxPriority: int(1, 5).optional() })).superRefine(
    (ks, c) => {
      const seen = new Map<string, number>();
      ks.forEach((k, i) => {
        if (!isRecord(k) || typeof k.key !== 'string') return; // runs on partial values too
        const first = seen.get(k.key);
        if (first !== undefined) {
          c.addIssue({
            code: 'custom',
            path: [i, 'key'],
            message: `expected a key not already given to auth.keys[${first}], got the same key`,
          });
        } else seen.set(k.key, i);
      });
    },
    { when: () => true },
  );
  return strict({ keys: keys.default([]) });
}

/** `store.url` (`env:NAME` allowed): a PostgreSQL URL, or a SQLite file; checked like `--db`. */
function storeSchema(ctx: SchemaContext) {
  const url = text().transform((u, c) => {
    const m = ENV_KEY_RE.exec(u);
    const value = m ? ctx.env[m[1]!] : u;
    if (value === undefined || value === '') {
      c.addIssue({ code: 'custom', input: undefined, message: `expected environment variable ${m?.[1]} to be set (url: env:${m?.[1]})` });
      return z.NEVER;
    }
    try {
      parseStoreValue(value, 'store.url');
    } catch (e) {
      // The message names the key already; the value (a password, maybe) is not repeated.
      c.addIssue({ code: 'custom', input: undefined, message: (e as Error).message.replace(/^store\.url: /, '') });
      return z.NEVER;
    }
    return value;
  });
  return strict({
    url: url.optional(),
    poolSize: int(1, 1000).default(10),
    leaseMs: int(500, 600_000).default(10_000),
    takeoverConcurrency: int(1, 1000).default(32),
    permitSlices: bool().default(true),
  });
}

const serverSchema = () =>
  strict({
    host: text().default('127.0.0.1'),
    port: int(0, 65535).default(8080),
    db: text().default('./data/toolgraph.db'),
  });

// ---- the whole file -----------------------------------------------------------------------------

function rootObject(ctx: SchemaContext) {
  return strict({
    tools: list(toolSchema(ctx)).default([]),
    policy: strict({ rules: list(policyRule()).default([]) }).prefault({}),
    limits: limitsSchema().prefault({}),
    defaults: defaultsSchema().prefault({}),
    auth: authSchema(ctx).prefault({}),
    server: serverSchema().prefault({}),
    mcp: mcpSchema(ctx, toolShape(ctx)).prefault({}),
    store: storeSchema(ctx).prefault({}),
    hooks: hooksSchema(ctx),
  });
}

/** The root object before the cross-field checks and the final transform. */
type ParsedFile = z.output<ReturnType<typeof rootObject>>;

/** The schema of the whole file; parsing gives a `ConfigFile` (defaults applied, names checked). */
export function configFileSchema(ctx: SchemaContext) {
  return rootObject(ctx)
    .superRefine(checkNames, { when: () => true })
    .transform(toConfigFile);
}

/** Tool names are unique; names (not globs) in after/requires/compensate/limits.tool name catalog tools. */
function checkNames(file: ParsedFile, c: z.RefinementCtx): void {
  // May run on a partial value (when: always), so every access is guarded.
  const tools = Array.isArray(file.tools) ? file.tools.filter(isRecord) : [];
  const names = new Map<string, number>();
  (file.tools ?? []).forEach((tool, i) => {
    if (!isRecord(tool) || typeof tool.name !== 'string') return;
    const first = names.get(tool.name);
    if (first !== undefined) {
      c.addIssue({ code: 'custom', path: ['tools', i, 'name'], input: tool.name, message: `expected a name not used by tools[${first}]` });
    } else names.set(tool.name, i);
  });
  if (tools.length !== (file.tools ?? []).length) return; // a broken entry: names may be missing
  // With MCP servers the names are checked on the merged catalog, once the servers listed their tools.
  if (isRecord(file.mcp) && Array.isArray(file.mcp.servers) && file.mcp.servers.length > 0) return;
  const known = (name: unknown) => typeof name !== 'string' || isGlob(name) || names.has(name);
  const checkList = (where: (string | number)[], values: unknown) => {
    if (!Array.isArray(values)) return;
    values.forEach((v, j) => {
      if (!known(v))
        c.addIssue({ code: 'custom', path: [...where, j], input: v, message: 'expected the name of a tool of the catalog, or a glob' });
    });
  };
  (file.tools ?? []).forEach((tool, i) => {
    if (!isRecord(tool)) return;
    checkList(['tools', i, 'after'], tool.after);
    checkList(['tools', i, 'requires'], tool.requires);
    const comp = tool.compensate;
    if (isRecord(comp) && typeof comp.tool === 'string' && !names.has(comp.tool)) {
      c.addIssue({
        code: 'custom',
        path: ['tools', i, 'compensate', 'tool'],
        input: comp.tool,
        message: 'expected the name of a tool of the catalog',
      });
    } else if (isRecord(comp) && typeof comp.tool === 'string') {
      // A compensation has no `call.started` to carry a dispatch token: no agent would hear of it.
      const target = tools[names.get(comp.tool) as number];
      if (isRecord(target?.executor) && target.executor.kind === 'client')
        c.addIssue({
          code: 'custom',
          path: ['tools', i, 'compensate', 'tool'],
          input: comp.tool,
          message: 'expected a tool that toolgraph runs itself, got a tool of kind client (a compensation is dispatched to no agent)',
        });
    }
  });
  (file.tools ?? []).forEach((tool, i) => {
    checkPerArgs(tool, i, c);
  });
  const rules = isRecord(file.policy) && Array.isArray(file.policy.rules) ? file.policy.rules : [];
  rules.forEach((rule, i) => {
    if (!isRecord(rule)) return;
    checkList(['policy', 'rules', i, 'after'], rule.after);
    checkList(['policy', 'rules', i, 'requires'], rule.requires);
  });
  const toolLimits = isRecord(file.limits) && isRecord(file.limits.tool) ? file.limits.tool : {};
  for (const name of Object.keys(toolLimits)) {
    if (!names.has(name)) {
      c.addIssue({
        code: 'custom',
        path: ['limits', 'tool', name],
        input: name,
        message: 'expected the name of a tool of the catalog as the key',
      });
    }
  }
}

/**
 * A keyed limit's `per` names args of the tool: one its input schema certainly rejects (a closed object,
 * `additionalProperties: false`, without that property) is an error, `tools[3].concurrency.per: unknown
 * arg {repo}`. An open schema, or none, may get any arg: nothing is certain there.
 */
function checkPerArgs(tool: unknown, i: number, c: z.RefinementCtx): void {
  if (!isRecord(tool) || !isRecord(tool.concurrency) || typeof tool.concurrency.per !== 'string') return;
  const input = tool.input;
  if (!isRecord(input) || input.additionalProperties !== false) return;
  const props = isRecord(input.properties) ? input.properties : {};
  for (const arg of templateArgs(tool.concurrency.per)) {
    if (Object.hasOwn(props, arg)) continue;
    const known = Object.keys(props);
    c.addIssue({
      code: 'custom',
      path: ['tools', i, 'concurrency', 'per'],
      input: undefined,
      message: `unknown arg {${arg}}: the tool's input takes ${known.length > 0 ? known.join(', ') : 'no args'}`,
    });
  }
}

/** Applies the defaults that depend on other sections and shapes the manifests. */
function toConfigFile(file: ParsedFile): ConfigFile {
  const tools = file.tools.map((t): ToolManifest => {
    const executor =
      t.executor.kind === 'builtin'
        ? { kind: 'builtin' as const, name: t.executor.name ?? (t.name as (typeof BUILTIN_EXECUTORS)[number]) }
        : t.executor;
    return dropUndefined({
      name: t.name,
      description: t.description,
      input: t.input,
      reads: t.reads,
      writes: t.writes,
      scope: t.scope,
      risk: t.risk,
      idempotent: t.idempotent,
      timeoutMs: t.timeoutMs ?? file.defaults.timeoutMs,
      retry: t.retry,
      concurrency: typeof t.concurrency === 'number' ? t.concurrency : undefined,
      keyedConcurrency: typeof t.concurrency === 'object' ? t.concurrency : undefined,
      queueTimeoutMs: t.queueTimeoutMs,
      rate: t.rate,
      failure: t.failure,
      maxOutputBytes: t.maxOutputBytes,
      after: t.after,
      requires: t.requires,
      compensate: t.compensate,
      executor,
    });
  });
  const toolLimits: Record<string, number> = { ...file.limits.tool };
  for (const t of tools) {
    if (t.concurrency !== undefined && !Object.hasOwn(toolLimits, t.name)) toolLimits[t.name] = t.concurrency;
  }
  const rules = file.policy.rules.map((r) => dropUndefined({ ...r, match: dropUndefined(r.match) }));
  return {
    tools,
    policy: { rules },
    limits: dropUndefined({ ...file.limits, tool: toolLimits }),
    defaults: file.defaults,
    auth: { keys: file.auth.keys },
    server: file.server,
    mcp: file.mcp,
    store: dropUndefined(file.store),
    hooks: file.hooks,
  };
}

/** Omits keys whose value is `undefined`, so an absent field stays absent (`'reads' in tool` is false). */
function dropUndefined<T extends object>(obj: T): T {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined)) as T;
}
