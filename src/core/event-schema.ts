/**
 * The schema of the events (events.ts), for what is read back from outside the process: a store's
 * log before restore rebuilds a run from it, a file, a peer. Each payload's schema is held to its
 * TypeScript type (`satisfies` below): a required field of a payload type that its schema lacks, or
 * types otherwise, fails to compile (an optional field added to a type must be added here by hand).
 *
 * Not on any hot path: the scheduler emits typed events and nothing checks them again in process.
 */
import { z } from 'zod';
import { CALL_ERROR_CODES } from './errors.js';
import { HOOK_DECISIONS, HOOK_EVENTS } from './hooks.js';
import { EVENT_TYPES, type CoreEvent, type EventPayloads, type EventType, type RunEvent } from './events.js';
import { RUN_STATUSES } from './state.js';
import { WAIT_KINDS } from './waiting.js';

const args = z.record(z.string(), z.unknown());
const callError = z.object({
  code: z.enum(CALL_ERROR_CODES),
  message: z.string(),
  callId: z.string().optional(),
  details: z.unknown().optional(),
});
const callInput = z.object({ id: z.string(), tool: z.string(), args: args.optional(), invalid: z.string().optional() });
const edge = z.object({ from: z.string(), to: z.string(), kind: z.enum(['data', 'policy', 'conflict']), reason: z.string() });
const diagnostic = z.object({
  code: z.string(),
  message: z.string(),
  callId: z.string().optional(),
  callIds: z.array(z.string()).optional(),
});
const step = { edges: z.array(edge), diagnostics: z.array(diagnostic) };
const generations = z.array(z.array(z.string()));
const int1 = z.int().min(1);
const ms = z.number();
const holder = z.object({ runId: z.string(), callId: z.string(), tenant: z.string(), since: ms });
const waitReason = z.object({
  kind: z.enum(WAIT_KINDS),
  key: z.string().optional(),
  limit: z.number().optional(),
  inUse: z.number().optional(),
  perMs: z.number().optional(),
  retryAt: ms.optional(),
  domain: z.string().optional(),
  pattern: z.string().optional(),
  tool: z.string().optional(),
  until: ms.optional(),
  status: z.int().optional(),
  holders: z.array(holder),
  queuedBehind: z.array(holder).optional(),
  otherHolders: z.int().min(0).optional(),
});

/** One schema per event type, for its payload. */
export const EVENT_PAYLOAD_SCHEMAS = {
  // Loose: `SubmitOptions.meta` may add fields (an idempotency key) that the core does not read.
  'run.created': z.looseObject({
    tenant: z.string().min(1),
    failure: z.enum(['fail_fast', 'partial', 'replan']),
    tags: z.record(z.string(), z.string()),
    calls: z.array(callInput),
    estimates: z.record(z.string(), z.number()),
    open: z.literal(true).optional(),
    idempotencyKey: z.string().optional(),
    concurrencyKey: z.string().optional(),
    held: z.literal(true).optional(),
    priority: z.int().min(1).max(5).optional(),
    traceparent: z.string().optional(),
  }),
  'run.started': z.object({ ...step, generations, released: z.literal(true).optional() }),
  'call.ready': z.record(z.string(), z.never()),
  'run.resumed': z.record(z.string(), z.never()),
  'run.tool_paused': z.object({
    tool: z.string().min(1),
    key: z.string().optional(),
    until: ms,
    status: z.int().optional(),
  }),
  'call.started': z.object({
    attempt: int1,
    args,
    dispatch: z.object({ token: z.string().min(1) }).optional(),
    waited: z.object({ since: ms, asked: ms.optional(), outside: z.literal(true).optional() }).optional(),
  }),
  'call.retry_scheduled': z.object({
    attempt: int1,
    at: ms,
    delayMs: ms,
    error: callError,
    durationMs: ms,
    retryAfterMs: ms.optional(),
    pauseMs: ms.optional(),
    pauseStatus: z.int().optional(),
  }),
  'call.succeeded': z.object({ attempt: int1, output: z.unknown(), durationMs: ms }),
  'call.failed': z.object({
    error: callError,
    attempt: int1.optional(),
    retryable: z.boolean().optional(),
    durationMs: ms.optional(),
    pauseMs: ms.optional(),
    pauseStatus: z.int().optional(),
  }),
  'call.blocked': z.object({ blockedBy: callError }),
  'call.cancelled': z.object({ reason: callError }),
  'call.awaiting_review': z.object({ reason: z.string(), args }),
  'call.compensated': z.discriminatedUnion('status', [
    z.object({ status: z.literal('succeeded'), output: z.unknown(), startedAt: ms }),
    z.object({ status: z.literal('failed'), error: callError, startedAt: ms.optional() }),
  ]),
  'call.hook': z.object({
    on: z.enum(HOOK_EVENTS),
    hook: z.string(),
    decision: z.enum(HOOK_DECISIONS),
    startedAt: ms,
    durationMs: ms,
    reason: z.string().optional(),
    args: args.optional(),
    output: z.unknown().optional(),
    fail: z.object({ message: z.string() }).optional(),
    error: z.string().optional(),
  }),
  'call.waiting': z.object({ waitingFor: z.array(waitReason) }),
  'review.decided': z.object({ decision: z.enum(['approve', 'reject', 'edit']), args: args.optional(), comment: z.string().optional() }),
  'run.needs_replan': z.object({
    replanContext: z.object({
      failed: z.array(z.object({ callId: z.string(), error: callError })),
      waiting: z.array(z.string()),
      sideEffects: z.array(z.string()),
    }),
  }),
  'run.replanned': z.object({ ...step, calls: z.array(callInput), generations }),
  'run.completed': z.object({ status: z.enum(RUN_STATUSES), cancelledAt: ms.optional(), diagnostics: z.array(diagnostic).optional() }),
  'run.calls_added': z.object({ ...step, calls: z.array(callInput) }),
  'run.sealed': z.object({ ...step, generations, reason: z.literal('openRunTimeoutMs').optional() }),
} satisfies { [T in EventType]: z.ZodType<EventPayloads[T]> };

const envelope = z.object({
  seq: int1.optional(),
  type: z.enum(EVENT_TYPES),
  runId: z.string().min(1),
  callId: z.string().optional(),
  at: z.number(),
  data: z.unknown(),
});

/** An event that does not match the schema: `problems` holds one `path: problem` line each. */
export class InvalidEvent extends Error {
  constructor(readonly problems: readonly string[]) {
    super(problems.join('; '));
  }
}

/**
 * Checks an event read back from outside the process and returns it, typed; throws `InvalidEvent`
 * naming what is wrong. The event itself is returned (not a copy), so it is what was read.
 */
export function checkEvent<E extends CoreEvent | RunEvent>(value: unknown): E {
  const head = envelope.safeParse(value);
  if (!head.success) throw new InvalidEvent(head.error.issues.map((i) => `${i.path.join('.') || '(event)'}: ${i.message}`));
  const body = EVENT_PAYLOAD_SCHEMAS[head.data.type].safeParse(head.data.data);
  if (!body.success) throw new InvalidEvent(body.error.issues.map((i) => `${head.data.type} data.${i.path.join('.')}: ${i.message}`));
  // Both parts are checked against the types `E` is made of.
  return value as E;
}
