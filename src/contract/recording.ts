/**
 * The recording format (DESIGN §8): one self-contained JSON document per run — the batch, the config
 * that mattered, every attempt with its time and outcome, reviews, replans, a cancel, and the result.
 * Times are ms from the run's `run.created`. `recordingOf` (replay/recording.ts) derives one from a
 * run's events; `parseRecording` (replay/schema.ts) reads one back.
 *
 * The `config` section holds *normalized* manifests, policy and limits (rates as `{ tokens, perMs }`,
 * defaults applied), so it has its own schema rather than the config file's.
 */
import { z } from 'zod';
import type { CallInput, CallStatus, RunStatus } from '../core/calls.js';
import type { CallError } from '../core/errors.js';
import type { Defaults, FailureMode, Limits, Policy, ToolManifest } from '../core/tool.js';
import type { CompensationView } from '../core/view.js';
import { HOOK_DECISIONS, HOOK_EVENTS, type HookDecisionKind, type HookMatcher, type HookOn } from '../core/hooks.js';
import { CallErrorSchema, CallSchema, CallStatusSchema, FailureSchema, RunStatusSchema } from './batch.js';

export const RECORDING_FORMAT = 'toolgraph.recording/v1';

/** The kinds of outside wait a recorded start may carry (`RecordedWait`). */
export const OUTSIDE_WAITS = ['turn', 'permit'] as const;

/**
 * A wait of one start for something outside its run (DESIGN §8: a recording holds every outside
 * delay), which replay, running the run alone, reproduces rather than recomputes:
 *
 * - `turn`: from `fromMs` (it joined the ready set) to `toMs` (its local limits let it go) it may have
 *   waited for what the run alone does not see: calls of other runs holding a limit or lock, the
 *   cluster refusing its permit, a timer firing late. Replay under the recording's own config does
 *   not let it go before `toMs`; under another config (what-if) it recomputes the wait.
 * - `permit` (PostgreSQL, DESIGN §12): its cluster permit, asked at `fromMs`, granted at `toMs` (the
 *   start). Replay grants it that long after it asks, under any config: the cluster's latency.
 *
 * More kinds may come (a paused tool, say); a reader that does not know one ignores it.
 */
export interface RecordedWait {
  kind: (typeof OUTSIDE_WAITS)[number];
  fromMs: number;
  toMs: number;
}

export interface RecordedAttempt {
  callId: string;
  attempt: number;
  /** When the call last became ready before this attempt (it may then wait for a limit). */
  readyMs?: number;
  startMs: number;
  endMs: number;
  ok: boolean;
  output?: unknown;
  error?: CallError;
  /** Whether the failure was retryable (decides whether replay retries it). */
  retryable?: boolean;
  retryAfterMs?: number;
  /** Backpressure (DESIGN §4): the tool asked to be left alone this long (a 429, a 503 with Retry-After). */
  pauseMs?: number;
  /** The HTTP status that asked for the pause. */
  pauseStatus?: number;
  /** When the retry after this failed attempt was due (its backoff ended); the retry may start later. */
  retryAtMs?: number;
  /** A compensation's attempt rather than the call's own. */
  compensation?: boolean;
  /** What this start waited for outside its run, in order (absent: nothing; older recordings). */
  waits?: RecordedWait[];
  /**
   * The attempt was lost with the replica that ran it (killed, or its lease lapsed): `endMs` is when
   * another replica (or a restart) took the run back (DESIGN §8, §12). It has no outcome.
   */
  lost?: boolean;
}

/** One hook's decision (DESIGN §14): replay applies it instead of calling the hook. */
export interface RecordedHook {
  callId: string;
  on: HookOn;
  /** The hook's name. */
  hook: string;
  /** When the hook was called, and how long it took. */
  atMs: number;
  durationMs: number;
  /**
   * When the scheduler asked for the call's hooks, and when it applied their decisions (the run's
   * clock; the same for every hook of one request). Replay applies them that long after it asks.
   * Absent in older recordings.
   */
  askedMs?: number;
  appliedMs?: number;
  decision: HookDecisionKind;
  reason?: string;
  args?: Record<string, unknown>;
  output?: unknown;
  fail?: { message: string };
  /** The hook failed (timeout…), and `decision` is what its `onError` made of it. */
  error?: string;
}

export interface RecordedCallResult {
  id: string;
  status: CallStatus;
  output?: unknown;
  error?: CallError;
  compensation?: CompensationView;
}

/** A pause told to the run from outside (`Recording.pauses`). */
export interface RecordedPause {
  atMs: number;
  tool: string;
  key?: string;
  untilMs: number;
  /** The HTTP status that asked for it (429, 503). */
  status?: number;
}

export interface Recording {
  format: typeof RECORDING_FORMAT;
  run: { id: string; tenant: string; failure: FailureMode; tags: Record<string, string> };
  /** `hooks`: which calls waited for hooks (where the hooks lived is not kept: replay calls none). */
  config: { tools: ToolManifest[]; policy: Policy; limits: Limits; defaults?: Defaults; hooks?: HookMatcher[] };
  calls: (CallInput & { atMs?: number })[];
  sealedAtMs?: number;
  /** A run held behind an earlier run of its concurrency key (DESIGN §4): when it was let go. */
  releasedAtMs?: number;
  /**
   * When the run was taken back from its events (a takeover by another replica, or a restart), and the
   * time of the last thing its previous owner recorded (nothing happened in between: the lease gap).
   */
  resumes?: { atMs: number; lastMs: number }[];
  /**
   * Backpressure from outside the run (DESIGN §4, §8): a tool, or one keyed group of it (`key`), paused
   * at `atMs` until `untilMs` by another run, another replica or the cluster. Replay pauses it then,
   * under any config (an outside wait, like a permit's). A pause the run's own attempt got is replayed
   * from that attempt (`pauseMs`) instead. Absent: none (and in older recordings).
   */
  pauses?: RecordedPause[];
  /** Mean duration per tool that ranked the ready calls when the run started. */
  estimates?: Record<string, number>;
  replans: { atMs: number; calls: CallInput[] }[];
  reviews: { callId: string; atMs: number; decision: 'approve' | 'reject' | 'edit'; args?: Record<string, unknown>; comment?: string }[];
  /** When the run was cancelled, if it was. */
  cancelledAtMs?: number;
  /**
   * The cancel was by a newer run of its concurrency key (`onConcurrent: cancel_running`, DESIGN §4),
   * maybe on another replica: that run's id, which its calls' `superseded` errors name. Replay cancels
   * the same way. Absent: a plain cancel (and in older recordings).
   */
  supersededBy?: string;
  /** Attempts that ended, in the order they started (a compensation's when it ended). */
  attempts: RecordedAttempt[];
  /** Hook decisions, in the order they were made (absent when no hook ran). */
  hooks?: RecordedHook[];
  /** The run's outcome; `endMs` is when it (last) completed: the makespan. */
  result: { status: RunStatus; endMs?: number; calls: RecordedCallResult[] };
}

const int0 = z.int().min(0);
const int1 = z.int().min(1);
const ms = z.number().min(0);
const names = z.array(z.string().min(1));
const obj = z.record(z.string(), z.unknown());
const rate = z.strictObject({ tokens: int1, perMs: int1 });

const executor = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('builtin'), name: z.enum(['sleep', 'echo', 'fail']) }),
  z.strictObject({ kind: z.literal('http'), url: z.string().min(1), headers: z.record(z.string(), z.string()).optional() }),
  z.strictObject({ kind: z.literal('worker'), module: z.string().min(1) }),
  z.strictObject({ kind: z.literal('mcp'), server: z.string().min(1), tool: z.string().min(1), maxOutputBytes: int1.optional() }),
  z.strictObject({ kind: z.literal('client') }),
]);

const manifest = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'expected a tool name of 1–64 characters [A-Za-z0-9_.-]'),
  description: z.string().optional(),
  input: obj.optional(),
  reads: z.array(z.string()).optional(),
  writes: z.array(z.string()).optional(),
  scope: z.enum(['run', 'tenant', 'global']),
  risk: z.enum(['read', 'write', 'dangerous']),
  idempotent: z.boolean(),
  timeoutMs: int1,
  retry: z.strictObject({ attempts: int1, backoffMs: int0, maxBackoffMs: int0 }).optional(),
  concurrency: int1.optional(),
  keyedConcurrency: z.strictObject({ limit: int1, per: z.string().min(1) }).optional(),
  queueTimeoutMs: int1.optional(),
  rate: rate.optional(),
  failure: z.literal('fail_fast').optional(),
  maxOutputBytes: int1.optional(),
  after: names.default([]),
  requires: names.default([]),
  compensate: z.strictObject({ tool: z.string().min(1), args: obj }).optional(),
  executor,
});

const policy = z.strictObject({
  rules: z
    .array(
      z.strictObject({
        match: z.strictObject({
          tool: z.string().optional(),
          risk: z.enum(['read', 'write', 'dangerous']).optional(),
          tenant: z.string().optional(),
        }),
        after: names.optional(),
        requires: names.optional(),
        review: z.boolean().optional(),
        deny: z.string().optional(),
        allow: z.boolean().optional(),
      }),
    )
    .default([]),
});

const limits = z.strictObject({
  global: int1.optional(),
  perRun: int1.optional(),
  maxActiveRunsPerTenant: int1.optional(),
  maxCallsPerRun: int1.default(1000),
  maxArgsBytes: int1.optional(),
  maxOutputBytes: int1.optional(),
  tenant: z.record(z.string(), int1).default({}),
  tool: z.record(z.string(), int1).default({}),
  resource: z.record(z.string(), int1).default({}),
  rate: z.strictObject({ tenant: z.record(z.string(), rate).default({}) }).prefault({}),
  each: z.record(z.string(), int1).optional(),
  priorityAgingMs: int1.optional(),
  weights: z.record(z.string(), int1).optional(),
});

const defaults = z.strictObject({
  timeoutMs: int1.default(60_000),
  queueTimeoutMs: int1.optional(),
  failure: FailureSchema.default('partial'),
  openRunTimeoutMs: int1.default(30_000),
});

const attempt = z.strictObject({
  callId: z.string().min(1),
  attempt: int1,
  readyMs: ms.optional(),
  startMs: ms,
  endMs: ms,
  ok: z.boolean(),
  output: z.unknown().optional(),
  error: CallErrorSchema.optional(),
  retryable: z.boolean().optional(),
  retryAfterMs: ms.optional(),
  pauseMs: ms.optional(),
  pauseStatus: int1.optional(),
  retryAtMs: ms.optional(),
  compensation: z.boolean().optional(),
  waits: z.array(z.strictObject({ kind: z.string().min(1), fromMs: ms, toMs: ms })).optional(),
  lost: z.boolean().optional(),
});

const match = z.strictObject({
  tool: z.string().optional(),
  risk: z.enum(['read', 'write', 'dangerous']).optional(),
  tenant: z.string().optional(),
});
const hookMatcher = z.strictObject({ on: z.enum(HOOK_EVENTS), name: z.string().min(1), match: match.default({}) });
const hook = z.strictObject({
  callId: z.string().min(1),
  on: z.enum(HOOK_EVENTS),
  hook: z.string().min(1),
  atMs: ms,
  durationMs: ms,
  askedMs: ms.optional(),
  appliedMs: ms.optional(),
  decision: z.enum(HOOK_DECISIONS),
  reason: z.string().optional(),
  args: obj.optional(),
  output: z.unknown().optional(),
  fail: z.strictObject({ message: z.string() }).optional(),
  error: z.string().optional(),
});

const compensationView = z.strictObject({
  status: z.enum(['succeeded', 'failed']),
  output: z.unknown().optional(),
  error: CallErrorSchema.optional(),
});

/** The zod schema of a recording document: what `parseRecording` (replay/schema.ts) accepts. */
export const RecordingSchema = z.strictObject({
  format: z.literal(RECORDING_FORMAT),
  run: z.strictObject({
    id: z.string().min(1),
    tenant: z.string().min(1),
    failure: FailureSchema,
    tags: z.record(z.string(), z.string()).default({}),
  }),
  config: z.strictObject({
    tools: z.array(manifest),
    policy: policy.prefault({}),
    limits: limits.prefault({}),
    defaults: defaults.prefault({}),
    hooks: z.array(hookMatcher).optional(),
  }),
  calls: z.array(CallSchema.extend({ atMs: ms.optional(), invalid: z.string().optional() })),
  sealedAtMs: ms.optional(),
  releasedAtMs: ms.optional(),
  resumes: z.array(z.strictObject({ atMs: ms, lastMs: ms })).optional(),
  pauses: z
    .array(z.strictObject({ atMs: ms, tool: z.string().min(1), key: z.string().optional(), untilMs: ms, status: z.int().optional() }))
    .optional(),
  estimates: z.record(z.string(), z.number().min(0)).optional(),
  replans: z.array(z.strictObject({ atMs: ms, calls: z.array(CallSchema.extend({ invalid: z.string().optional() })) })).default([]),
  reviews: z
    .array(
      z.strictObject({
        callId: z.string().min(1),
        atMs: ms,
        decision: z.enum(['approve', 'reject', 'edit']),
        args: obj.optional(),
        comment: z.string().optional(),
      }),
    )
    .default([]),
  cancelledAtMs: ms.optional(),
  supersededBy: z.string().min(1).optional(),
  attempts: z.array(attempt),
  hooks: z.array(hook).optional(),
  result: z.strictObject({
    status: RunStatusSchema,
    endMs: ms.optional(),
    calls: z.array(
      z.strictObject({
        id: z.string().min(1),
        status: CallStatusSchema,
        output: z.unknown().optional(),
        error: CallErrorSchema.optional(),
        compensation: compensationView.optional(),
      }),
    ),
  }),
});
