/**
 * What the core knows about tools and configuration. These are plain, already-validated shapes: the
 * config loader (src/config) parses and checks the YAML with zod and hands the core these objects.
 */

export type FailureMode = 'fail_fast' | 'partial' | 'replan';
export const FAILURE_MODES: readonly FailureMode[] = ['fail_fast', 'partial', 'replan'];

export type Risk = 'read' | 'write' | 'dangerous';
/** Who else shares a tool's resources across runs (DESIGN §4). */
export type Scope = 'run' | 'tenant' | 'global';

export interface RetryPolicy {
  /** Attempts in all, the first included. */
  attempts: number;
  backoffMs: number;
  maxBackoffMs: number;
}

/** A token bucket: `tokens` per `perMs` milliseconds, starting full. */
export interface Rate {
  tokens: number;
  perMs: number;
}

export type ExecutorSpec =
  | { kind: 'builtin'; name: 'sleep' | 'echo' | 'fail' }
  | { kind: 'http'; url: string; headers?: Record<string, string> }
  | { kind: 'worker'; module: string }
  /**
   * A tool of an MCP server (DESIGN §13): `tool` is the server's own name for it, without the prefix.
   * `maxOutputBytes` is only read from recordings made before the cap moved to the manifest's own
   * field; nothing uses it.
   */
  | { kind: 'mcp'; server: string; tool: string; maxOutputBytes?: number }
  /** The agent that submitted the run runs the call and posts its result (DESIGN §17). */
  | { kind: 'client' };

export interface CompensateSpec {
  tool: string;
  /** May reference `${self.args.X}` and `${self.output.X}` of the call being compensated. */
  args: Record<string, unknown>;
}

/**
 * A keyed limit of a tool (DESIGN §4): at most `limit` calls of the tool at once for each distinct value
 * of `per`, a template expanded against the call's resolved args (a missing arg expands to `''`).
 */
export interface KeyedConcurrency {
  limit: number;
  per: string;
}

/** A tool of the catalog (DESIGN §2). */
export interface ToolManifest {
  name: string;
  description?: string;
  /** JSON Schema for args. */
  input?: Record<string, unknown>;
  /** Resource templates; `undefined` means "not declared" (unknown effects when both are undefined). */
  reads?: string[];
  writes?: string[];
  scope: Scope;
  risk: Risk;
  idempotent: boolean;
  timeoutMs: number;
  retry?: RetryPolicy;
  concurrency?: number;
  /** `concurrency: { limit, per }`: at most `limit` running calls per expanded key (DESIGN §4). */
  keyedConcurrency?: KeyedConcurrency;
  /** A ready call not started within this many ms fails `queue_timeout` (overrides `defaults.queueTimeoutMs`). */
  queueTimeoutMs?: number;
  rate?: Rate;
  failure?: 'fail_fast';
  /** The most bytes of compact JSON one output may take (overrides `limits.maxOutputBytes`). */
  maxOutputBytes?: number;
  after: string[];
  requires: string[];
  compensate?: CompensateSpec;
  executor: ExecutorSpec;
}

/** The result of checking args against a tool's input schema: `null` when valid. */
export type ArgsCheck = (args: unknown) => string | null;

/** The catalog as the core uses it: manifests plus a compiled args check per tool. */
export interface Catalog {
  get(name: string): ToolManifest | undefined;
  checkArgs(name: string, args: unknown): string | null;
  list(): readonly ToolManifest[];
}

export interface PolicyMatch {
  /** Glob on the tool name (`*` and `?`). */
  tool?: string;
  risk?: Risk;
  /** Glob on the tenant. */
  tenant?: string;
}

export interface PolicyRule {
  match: PolicyMatch;
  after?: string[];
  requires?: string[];
  /** true: the call waits for a human; false: no review, even for a dangerous tool. */
  review?: boolean;
  /** A reason: the call fails with `policy_denied`. */
  deny?: string;
  /** Skips the default review of dangerous tools; never bypasses a deny. */
  allow?: boolean;
}

export interface Policy {
  rules: PolicyRule[];
}

export interface Limits {
  global?: number;
  /** Per tenant; the key `default` applies to every tenant not named. */
  tenant: Record<string, number>;
  tool: Record<string, number>;
  perRun?: number;
  /** Resource key → how many running calls whose resources overlap it. */
  resource: Record<string, number>;
  rate: { tenant: Record<string, Rate> };
  maxActiveRunsPerTenant?: number;
  maxCallsPerRun: number;
  /** A call's args once references are resolved, in bytes of compact JSON (DESIGN §4); default 1 MiB. */
  maxArgsBytes?: number;
  /** One output, in bytes of compact JSON; a tool's own `maxOutputBytes` overrides it; default 4 MiB. */
  maxOutputBytes?: number;
  /** Hook requests (DESIGN §14) running at once in a process; more wait their turn. Default 64. */
  hooksInFlight?: number;
  /**
   * Keyed limits (DESIGN §4): pattern (`repo:*`) → at most this many running calls whose reads or writes
   * overlap each key K under it (K: a call's key cut to the pattern's length).
   */
  each?: Record<string, number>;
  /** A waiting call's run gains one priority level per this many ms of waiting (DESIGN §4); default 10000. */
  priorityAgingMs?: number;
  /** Tenant → its weight in the round robin between tenants of one priority (default 1). */
  weights?: Record<string, number>;
}

export interface Defaults {
  timeoutMs: number;
  /** A ready call not started within this many ms fails `queue_timeout` (DESIGN §4); none when unset. */
  queueTimeoutMs?: number;
  failure: FailureMode;
  openRunTimeoutMs: number;
}
