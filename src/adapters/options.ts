/**
 * The options every framework adapter takes (DESIGN §17), and the config they make for an in-process
 * engine: the agent's tools become a catalog of `kind: client` tools (the agent's process runs them),
 * checked by the same schema as a config file, so a wrong field says what was expected and what was got.
 */
import { parseConfig } from '../config/load.js';
import type { Config } from '../config/types.js';
import type { CallInput } from '../core/calls.js';
import type { FailureMode, RetryPolicy, Risk, Scope } from '../core/tool.js';
import type { EventSink } from '../engine/options.js';

/**
 * A tool's toolgraph fields: the manifest of DESIGN §2 without `executor`. A tool the adapter gets
 * without an entry here declares nothing: its effects are unknown, so it conflicts with every call.
 */
export interface AdapterToolFields {
  /** Resource templates it reads, `{argName}` taken from the call's args (`file:{path}`). */
  reads?: string[];
  /** Resource templates it writes. */
  writes?: string[];
  /** Who else shares these resources. @default 'tenant' */
  scope?: Scope;
  /** @default 'write' */
  risk?: Risk;
  /** Only idempotent tools may be retried. @default false */
  idempotent?: boolean;
  /** Attempts in all (needs `idempotent: true`). */
  retry?: { attempts: number; backoffMs?: number; maxBackoffMs?: number } | RetryPolicy;
  /** At most this many calls of the tool at once. */
  concurrency?: number;
  /** `n/s` or `n/min`. */
  rate?: string;
  /** One attempt's budget. @default 60000 */
  timeoutMs?: number;
  /** Calls of these tools in the same step run first. */
  after?: string[];
  requires?: string[];
  failure?: 'fail_fast';
  maxOutputBytes?: number;
}

/** What the adapters take besides the framework's tools. */
export interface AdapterOptions {
  /** Each tool's toolgraph fields, by the tool's name. */
  tools?: Record<string, AdapterToolFields>;
  /** As `limits:` in the config file (`global`, `perRun`, `tool`, `resource`, …). */
  limits?: Record<string, unknown>;
  /** As `policy:` in the config file (`{ rules: [...] }`). */
  policy?: Record<string, unknown>;
  /** As `hooks:` in the config file (DESIGN §14): `url` or `module` hooks. */
  hooks?: unknown[];
  /** What a failed call does to the rest of the step. @default 'partial' (the others still run) */
  failure?: FailureMode;
  /** The tenant the runs belong to. @default 'default' */
  tenant?: string;
  /** Tags on every run (`{ agent: 'support' }`). */
  tags?: Record<string, string>;
  /**
   * The runs' priority (DESIGN §4): 1 (most urgent) to 5. Under busy limits the more urgent run's calls
   * go first. With `client`, the server caps it by the key's `maxPriority` (a step refused
   * `priority_not_allowed`). @default 3
   */
  priority?: number;
  /**
   * A durable record of the runs: a SQLite file path, a `postgres://` URL, or a store object (anything
   * with `append(events)`). Default: none (the runs live in memory).
   */
  store?: string | EventSink;
  /**
   * A `ToolgraphClient` (`toolgraph/client`): each step is then a run of that server, whose catalog
   * declares these tools `executor: { kind: client }` (DESIGN §17); `tools`, `limits`, `policy`,
   * `hooks` and `store` are the server's config then, not these options.
   */
  client?: RemoteClient;
}

/** What a handler of the typed client gets besides the args. */
export interface RemoteHandlerContext {
  signal: AbortSignal;
  runId: string;
  callId: string;
  tool: string;
  attempt: number;
}

/** An event of the run's stream, as the typed client yields it. */
export interface RemoteEvent {
  type: string;
  callId?: string | null;
  data?: unknown;
}

/**
 * The part of the typed `ToolgraphClient` (`toolgraph/client`) the adapters use: a streamed run whose
 * client tools this process answers, and the run's events.
 */
export interface RemoteClient {
  open(
    batch: { tenant?: string; tags?: Record<string, string>; failure?: FailureMode; priority?: number; calls?: CallInput[] },
    opts: { handlers: Record<string, (args: Record<string, unknown>, ctx: RemoteHandlerContext) => unknown> },
  ): Promise<{ id: string; add(...calls: CallInput[]): Promise<unknown>; seal(): Promise<unknown>; done(): Promise<unknown> }>;
  events(runId: string, opts?: { from?: number; signal?: AbortSignal }): AsyncIterable<RemoteEvent>;
  cancel(runId: string): Promise<unknown>;
}

/** The config of an in-process engine for these tool names and options. */
export function adapterConfig(toolNames: readonly string[], options: AdapterOptions): Config {
  const fields = options.tools ?? {};
  const names = [...new Set([...toolNames, ...Object.keys(fields)])];
  const tools = names.map((name) => {
    const f = fields[name] ?? {};
    return { name, ...f, executor: { kind: 'client' } };
  });
  const file: Record<string, unknown> = {
    tools,
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.policy ? { policy: options.policy } : {}),
    ...(options.hooks ? { hooks: options.hooks } : {}),
    defaults: { failure: options.failure ?? 'partial' },
  };
  return parseConfig(JSON.stringify(file), 'toolgraph adapter options');
}
