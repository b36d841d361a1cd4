/**
 * What the HTTP API answers (DESIGN §7), in zod: a run, a page of runs, a graph or plan, an event, a
 * review, an error. The OpenAPI document is generated from these, and the client takes its types
 * from them.
 */
import { z } from 'zod';
import { EVENT_TYPES } from '../core/events.js';
import { WAIT_KINDS } from '../core/waiting.js';
import { CallErrorSchema, CallStatusSchema, FailureSchema, RunStatusSchema } from './batch.js';
import { API_ERRORS } from './errors.js';

export const ErrorBodySchema = z.object({
  error: z.object({ code: z.enum(Object.keys(API_ERRORS) as [string, ...string[]]), message: z.string(), details: z.unknown().optional() }),
});
const EdgeSchema = z.object({ from: z.string(), to: z.string(), kind: z.enum(['data', 'policy', 'conflict']), reason: z.string() });
const DiagnosticSchema = z.object({
  code: z.string(),
  message: z.string(),
  callId: z.string().optional(),
  callIds: z.array(z.string()).optional(),
});
const WaitHolderSchema = z.object({
  runId: z.string(),
  callId: z.string(),
  tenant: z.string(),
  since: z.string().describe('when its attempt started'),
});
const WaitingSchema = z
  .object({
    kind: z.enum(WAIT_KINDS),
    key: z
      .string()
      .optional()
      .describe('the tenant, run id, tool, resource key, rate bucket (tool:<name> or tenant:<t>) or locked resource key'),
    limit: z.number().optional().describe('running calls, or tokens per perMs for a rate'),
    inUse: z.number().optional(),
    perMs: z.number().optional(),
    retryAt: z.string().optional().describe('a rate: when its bucket has a token again'),
    domain: z.string().optional().describe('a lock: global or tenant:<t>'),
    pattern: z.string().optional().describe("a keyed limit: the limits.each pattern (repo:*) or the tool's concurrency.per template"),
    tool: z.string().optional().describe("a tool's keyed limit, or the paused tool (backoff)"),
    until: z.string().optional().describe('backoff: when the pause ends'),
    status: z.number().int().optional().describe('backoff: the HTTP status that asked for the pause (429, 503)'),
    holders: z.array(WaitHolderSchema).describe("up to 5, oldest first; none for perRun (the run's own running calls)"),
    queuedBehind: z.array(WaitHolderSchema).optional().describe('a lock with no holder in conflict: the waiters of other runs ahead'),
    otherHolders: z.number().int().optional().describe('holders of other tenants, not named to an agent'),
  })
  .describe('What refused a ready call that has not started');
export const LimitsSchema = z.object({
  items: z.array(
    z.object({
      kind: z.enum(WAIT_KINDS),
      key: z.string().optional(),
      domain: z.string().optional(),
      limit: z.number().optional(),
      perMs: z.number().optional(),
      inUse: z.number(),
      waiting: z.number().int(),
      longestWaitMs: z.number(),
      retryAt: z.string().optional(),
      pattern: z.string().optional(),
      tool: z.string().optional(),
      until: z.string().optional(),
      status: z.number().int().optional(),
      holders: z.array(WaitHolderSchema),
    }),
  ),
  keys: z
    .array(
      z.object({
        pattern: z.string().describe("the limits.each pattern, or the tool's concurrency.per template"),
        tool: z.string().optional().describe("a tool's keyed concurrency"),
        key: z.string().describe('the expanded key K (repo:acme, acme/web)'),
        limit: z.number().int(),
        inUse: z.number().int(),
      }),
    )
    .describe('every busy key of a keyed limit (DESIGN §4)'),
  paused: z
    .array(
      z.object({
        tool: z.string(),
        key: z.string().optional().describe('a keyed group of the tool, when only that is paused'),
        until: z.string(),
        status: z.number().int().optional().describe('the HTTP status that asked for it (429, 503)'),
      }),
    )
    .describe('tools paused by backpressure (DESIGN §4), until when'),
});
const CallViewSchema = z.object({
  id: z.string(),
  tool: z.string(),
  args: z.record(z.string(), z.unknown()),
  status: CallStatusSchema,
  dependsOn: z.array(z.string()),
  attempts: z.number().int(),
  output: z.unknown(),
  error: CallErrorSchema.nullable(),
  blockedBy: CallErrorSchema.nullable(),
  startedAt: z.string().nullable(),
  endedAt: z.string().nullable(),
  resolvedArgs: z.record(z.string(), z.unknown()).optional(),
  review: z.object({ reason: z.string(), decision: z.string().optional(), comment: z.string().optional() }).optional(),
  compensation: z
    .object({ status: z.enum(['succeeded', 'failed']), output: z.unknown().optional(), error: CallErrorSchema.optional() })
    .optional(),
  waitingFor: z.array(WaitingSchema).optional(),
  waitingSince: z.string().optional().describe('with waitingFor: since when the call waits'),
});
export const RunSchema = z.object({
  id: z.string(),
  tenant: z.string(),
  status: RunStatusSchema,
  failure: FailureSchema,
  tags: z.record(z.string(), z.string()),
  createdAt: z.string(),
  endedAt: z.string().nullable(),
  calls: z.array(CallViewSchema),
  diagnostics: z.array(DiagnosticSchema),
  priority: z.int().min(1).max(5).optional().describe('1 (most urgent) to 5, when the submission gave one; none means 3'),
  replanContext: z
    .object({
      failed: z.array(z.object({ callId: z.string(), error: CallErrorSchema })),
      waiting: z.array(z.string()),
      sideEffects: z.array(z.string()),
    })
    .optional(),
  owner: z
    .string()
    .nullable()
    .optional()
    .describe(
      'GET /v1/runs/{id}: the replica (its --replica-id) that owns the run while it is not ended; null once it ended, and with SQLite',
    ),
});
export const RunSummarySchema = z.object({
  id: z.string(),
  tenant: z.string(),
  status: RunStatusSchema,
  failure: FailureSchema,
  tags: z.record(z.string(), z.string()),
  createdAt: z.string(),
  endedAt: z.string().nullable(),
  callCount: z.number().int(),
  idempotencyKey: z.string().nullable(),
  owner: z
    .string()
    .nullable()
    .describe('the replica (its --replica-id) that owns the run while it is not ended; null once it ended, and with SQLite'),
});
export const GraphSchema = z.object({
  nodes: z.array(z.object({ id: z.string(), tool: z.string(), status: CallStatusSchema })),
  edges: z.array(EdgeSchema),
  generations: z.array(z.array(z.string())),
});
export const PlanSchema = GraphSchema.extend({ graph: GraphSchema, diagnostics: z.array(DiagnosticSchema) });
export const EventSchema = z.object({
  seq: z.number().int(),
  type: z.enum(EVENT_TYPES),
  runId: z.string(),
  callId: z.string().optional(),
  at: z.string(),
  data: z.record(z.string(), z.unknown()),
});
export const ReviewSchema = z.object({
  id: z.string(),
  runId: z.string(),
  callId: z.string(),
  tenant: z.string(),
  tool: z.string(),
  args: z.record(z.string(), z.unknown()),
  reason: z.string(),
  status: z.enum(['pending', 'decided']),
  decision: z.string().nullable(),
  createdAt: z.string(),
});
export const InvokedSchema = z.object({
  runId: z.string(),
  status: CallStatusSchema,
  output: z.unknown(),
  error: CallErrorSchema.nullable(),
  durationMs: z.number(),
});

/** `GET /v1/replicas`: the replicas of the cluster (several replicas on PostgreSQL), or this process alone. */
export const ReplicaSchema = z.object({
  name: z.string().describe("the replica's --replica-id"),
  instance: z.string().describe('this process of that name (name/random on PostgreSQL: a restart is a new instance)'),
  self: z.boolean().describe('whether this is the replica that answered'),
  startedAt: z.string(),
  leaseUntil: z.string().nullable().describe("until when its lease holds, by the database's clock; null with SQLite (no lease)"),
  renewedAt: z.string().nullable().describe('its last lease renewal; null with SQLite'),
  leaseLeftMs: z.number().int().nullable().describe('how long its lease still holds (0 once ended); null with SQLite'),
  alive: z.boolean().describe('whether its lease holds (its runs are taken over once it does not)'),
  ownedRuns: z.number().int().describe('runs not ended that it owns'),
});
export const ReplicasSchema = z.object({
  store: z.enum(['memory', 'sqlite', 'postgres']),
  replica: z.string().describe('the name of the replica that answered'),
  leaseMs: z.number().int().nullable().describe('store.leaseMs; null with SQLite'),
  items: z.array(ReplicaSchema),
});

/** An item of `GET /v1/runs/{id}/work` (DESIGN §17): a call that waits for its agent's result. */
export const WorkItemSchema = z.object({
  runId: z.string(),
  callId: z.string(),
  tool: z.string(),
  args: z.record(z.string(), z.unknown()).describe('resolved: references substituted'),
  attempt: z.int().min(1),
  token: z.string().describe('answer with it: POST /v1/runs/{id}/calls/{callId}/result'),
});
export const WorkListSchema = z.object({ items: z.array(WorkItemSchema) });
/** The answer of an accepted client result: the attempt it ended. */
export const ResultTakenSchema = z.object({ runId: z.string(), callId: z.string(), attempt: z.int().min(1) });
