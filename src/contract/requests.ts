/**
 * What the HTTP API takes (DESIGN §7): the bodies, queries, path parameters and headers of every
 * route, in zod. The routes parse with these, and the OpenAPI document is generated from them.
 */
import { z } from 'zod';
import { RUN_STATUSES } from '../core/calls.js';
import { ArgsSchema, BatchSchema, CallIdSchema, CallsSchema, depthOf, MAX_WAIT_MS, TenantSchema } from './batch.js';
import { MAX_CONCURRENCY_KEY_CHARS, ON_CONCURRENT } from './submission.js';
import { AnthropicMessageSchema, OpenAiMessageSchema } from './model-messages.js';

/** `{id}` in a run's path. */
export const RunIdParams = z.object({ id: z.string().min(1).max(200) });
/** `{id}` in a review's path. */
export const ReviewIdParams = z.object({ id: z.string().min(1).max(500) });
/** `{name}` in a tool's path. */
export const ToolNameParams = z.object({ name: z.string().min(1).max(200) });
/** The `Idempotency-Key` header of `POST /v1/runs`. */
export const IdempotencyKeyHeader = z.string().min(1).max(255).optional();

/** A query parameter that may be given once or repeated: always a list once parsed. */
const repeatable = <T extends z.ZodType>(s: T) => z.union([s, z.array(s)]).transform((v) => (Array.isArray(v) ? v : [v]) as z.infer<T>[]);

/**
 * The body of `POST /v1/runs`: a batch (`calls`), or the model's own message (`openai` or
 * `anthropic`, DESIGN §11), and `open: true` for a streamed run (DESIGN §10).
 */
export const SubmitBodySchema = BatchSchema.extend({
  calls: CallsSchema.optional(),
  open: z.boolean().optional(),
  openai: OpenAiMessageSchema.optional(),
  anthropic: AnthropicMessageSchema.optional(),
  concurrencyKey: z
    .string()
    .min(1)
    .max(MAX_CONCURRENCY_KEY_CHARS)
    .optional()
    .describe("One run per key (per tenant): e.g. the conversation's id. See onConcurrent."),
  priority: z
    .int()
    .min(1)
    .max(5)
    .optional()
    .describe(
      '1 (most urgent) to 5; default 3. Among ready calls the more urgent run goes first; a waiting call gains a level every limits.priorityAgingMs.',
    ),
  onConcurrent: z
    .enum(ON_CONCURRENT)
    .optional()
    .describe('When an earlier unfinished run of the tenant has the same concurrencyKey: queue (default), cancel_running or reject.'),
}).superRefine((b, ctx) => {
  const sources = [b.calls, b.openai, b.anthropic].filter((x) => x !== undefined).length;
  if (sources > 1) ctx.addIssue({ code: 'custom', path: [], message: 'give one of calls, openai or anthropic, not several' });
  if (b.onConcurrent !== undefined && b.concurrencyKey === undefined)
    ctx.addIssue({ code: 'custom', path: ['onConcurrent'], message: 'onConcurrent needs a concurrencyKey' });
  // A streamed run cannot be held: its calls are planned as they arrive.
  if (b.open && b.concurrencyKey !== undefined && (b.onConcurrent ?? 'queue') === 'queue')
    ctx.addIssue({
      code: 'custom',
      path: ['onConcurrent'],
      message: 'an open (streamed) run takes onConcurrent cancel_running or reject, not queue',
    });
  if (sources === 0 && !b.open)
    ctx.addIssue({ code: 'custom', path: ['calls'], message: 'calls are required (or openai, or anthropic, or open: true)' });
});
export type SubmitBody = z.infer<typeof SubmitBodySchema>;

/** The body of `POST /v1/plan`: a batch. */
export const PlanBodySchema = BatchSchema;

/** At most this many `tag=k:v` filters on `GET /v1/runs` (each is a join in the store's query). */
export const MAX_TAG_FILTERS = 16;

export const ListRunsQuery = z.strictObject({
  status: repeatable(z.enum(RUN_STATUSES)).optional(),
  tag: repeatable(z.string().regex(/^[^:]+:.*$/, 'a tag filter is key:value'))
    .refine((t) => t.length <= MAX_TAG_FILTERS, `at most ${MAX_TAG_FILTERS} tag filters`)
    .optional(),
  tenant: TenantSchema.optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().min(1).max(500).optional(),
});
export const GraphQuery = z.strictObject({ format: z.enum(['json', 'mermaid', 'dot']).default('json') });
export const EventsQuery = z.strictObject({ from: z.coerce.number().int().min(0).optional() });
export const MessagesQuery = z.strictObject({ format: z.enum(['openai', 'anthropic']) });
/** `GET /v1/stream`. */
export const StreamQuery = z.strictObject({ tenant: TenantSchema.optional() });

export const ReplanBodySchema = z.strictObject({ calls: CallsSchema.min(1) });
export const AppendBodySchema = z.strictObject({ calls: CallsSchema.min(1) });

export const ReviewsQuery = z.strictObject({
  status: z.enum(['pending', 'decided']).default('pending'),
  runId: z.string().min(1).max(200).optional(),
});
export const ReviewBodySchema = z.strictObject({
  decision: z.enum(['approve', 'reject', 'edit']),
  args: ArgsSchema.optional(),
  comment: z.string().max(2000).optional(),
});

export const InvokeBodySchema = z.strictObject({ args: ArgsSchema.default({}), tenant: TenantSchema.optional() });

/** `{id}` and `{callId}` in a call's path. */
export const CallParams = z.object({ id: z.string().min(1).max(200), callId: CallIdSchema });

/** `GET /v1/runs/{id}/work` (DESIGN §17): `waitMs` long-polls until a call waits for its agent. */
export const WorkQuery = z.strictObject({ waitMs: z.coerce.number().int().min(0).max(MAX_WAIT_MS).default(0) });

/**
 * The deepest nesting of a client tool's output: every walk over an output (its size check, the store's
 * JSON, references into it) stays safe. Deeper is a `400` naming `output`.
 */
export const MAX_CLIENT_OUTPUT_DEPTH = 256;

/** The most characters of a client tool's error message. */
export const MAX_CLIENT_ERROR_MESSAGE = 10_000;

/**
 * The body of `POST /v1/runs/{id}/calls/{callId}/result` (DESIGN §17): the token of the attempt it
 * answers (from its `call.started` or the work list), and either the output or an error.
 */
export const ClientResultBodySchema = z
  .strictObject({
    token: z.string().min(1).max(200),
    output: z
      .unknown()
      .refine((v) => depthOf(v, MAX_CLIENT_OUTPUT_DEPTH + 1) <= MAX_CLIENT_OUTPUT_DEPTH, {
        message: `an output may nest at most ${MAX_CLIENT_OUTPUT_DEPTH} levels deep`,
      })
      .optional(),
    error: z
      .strictObject({
        message: z.string().min(1).max(MAX_CLIENT_ERROR_MESSAGE),
        retryable: z.boolean().optional(),
      })
      .optional(),
  })
  .superRefine((b, ctx) => {
    const hasOutput = Object.hasOwn(b, 'output');
    if (hasOutput && b.error !== undefined) ctx.addIssue({ code: 'custom', path: ['error'], message: 'give output or error, not both' });
    if (!hasOutput && b.error === undefined) ctx.addIssue({ code: 'custom', path: ['output'], message: 'give output (any JSON) or error' });
  });
export type ClientResultBody = z.infer<typeof ClientResultBodySchema>;
