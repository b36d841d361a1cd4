/** Runs: submit, plan, list, read, graph, cancel, replan, recording (DESIGN §7). */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { buildPlan } from '../../core/plan.js';
import { toDot, toMermaid } from '../../core/render.js';
import { RUN_STATUSES } from '../../core/calls.js';
import type { FailureMode } from '../../core/tool.js';
import { planView } from '../../engine/plan-view.js';
import { recordingOf } from '../../replay/recording.js';
import { tenantFor } from '../auth.js';
import { ApiError } from '../errors.js';
import type { CallInput } from '../../core/calls.js';
import { AnthropicMessage, anthropicMessages, callsFromAnthropic, callsFromOpenAi, OpenAiMessage, openAiMessages } from '../formats.js';
import { fastSubmitBody } from '../fast-body.js';
import { BatchSchema, CallsSchema, TenantSchema } from '../schemas.js';
import type { AppContext } from '../server.js';
import { parse } from '../validate.js';
import { eventStream } from './events.js';

const IdParams = z.object({ id: z.string().min(1).max(200) });
const IdempotencyKey = z.string().min(1).max(255).optional();
const many = <T extends z.ZodType>(s: T) => z.union([s, z.array(s)]).transform((v) => (Array.isArray(v) ? v : [v]) as z.infer<T>[]);

export const ListRunsQuery = z.strictObject({
  status: many(z.enum(RUN_STATUSES)).optional(),
  tag: many(z.string().regex(/^[^:]+:.*$/, 'a tag filter is key:value')).optional(),
  tenant: TenantSchema.optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().min(1).max(500).optional(),
});
export const GraphQuery = z.strictObject({ format: z.enum(['json', 'mermaid', 'dot']).default('json') });
export const ReplanBody = z.strictObject({ calls: CallsSchema.min(1) });
export const AppendBody = z.strictObject({ calls: CallsSchema.min(1) });
export const MessagesQuery = z.strictObject({ format: z.enum(['openai', 'anthropic']) });

/**
 * The body of `POST /v1/runs`: a batch (`calls`), or the model's own message (`openai` or
 * `anthropic`, DESIGN §11), and `open: true` for a streamed run (DESIGN §10).
 */
export const SubmitSchema = BatchSchema.extend({
  calls: CallsSchema.optional(),
  open: z.boolean().optional(),
  openai: OpenAiMessage.optional(),
  anthropic: AnthropicMessage.optional(),
}).superRefine((b, ctx) => {
  const sources = [b.calls, b.openai, b.anthropic].filter((x) => x !== undefined).length;
  if (sources > 1) ctx.addIssue({ code: 'custom', path: [], message: 'give one of calls, openai or anthropic, not several' });
  if (sources === 0 && !b.open) ctx.addIssue({ code: 'custom', path: ['calls'], message: 'calls are required (or openai, or anthropic, or open: true)' });
});

/** The calls of a submit body, whatever form they came in; ids unique (a 400 otherwise). */
function callsOf(body: z.infer<typeof SubmitSchema>): CallInput[] {
  const calls: CallInput[] = body.openai ? callsFromOpenAi(body.openai) : body.anthropic ? callsFromAnthropic(body.anthropic) : (body.calls ?? []);
  if (body.openai || body.anthropic) parse(CallsSchema, calls.map(({ invalid: _i, ...c }) => c), body.openai ? 'openai tool_calls' : 'anthropic tool_use blocks');
  return calls;
}

export function runRoutes(app: FastifyInstance, ctx: AppContext): void {
  const { service } = ctx;

  app.post('/v1/runs', async (req, reply) => {
    if (ctx.shuttingDown()) throw new ApiError('shutting_down', 'the server is shutting down');
    // The plain batch passes a hand-written check (fast-body.ts); anything else goes to zod.
    const body: z.infer<typeof SubmitSchema> = fastSubmitBody(req.body) ?? parse(SubmitSchema, req.body ?? {}, 'body');
    const rawKey = req.headers['idempotency-key'];
    const key = rawKey === undefined ? undefined : parse(IdempotencyKey, rawKey, 'Idempotency-Key header');
    const { run, created } = await service.submitGrouped(
      req.principal,
      {
        calls: callsOf(body),
        ...(body.open ? { open: true } : {}),
        ...(body.failure ? { failure: body.failure as FailureMode } : {}),
        ...(body.tags ? { tags: body.tags } : {}),
        ...(body.tenant !== undefined ? { tenant: body.tenant } : {}),
      },
      key,
    );
    const view = body.waitMs ? await service.wait(req.principal, run.id, body.waitMs) : run;
    return reply.status(created ? 201 : 200).send(view);
  });

  app.post('/v1/plan', async (req) => {
    const body = parse(BatchSchema, req.body ?? {}, 'body');
    const tenant = tenantFor(req.principal, body.tenant);
    const plan = buildPlan({ calls: body.calls, tenant, catalog: service.config.catalog, policy: service.config.policy });
    return planView(plan);
  });

  app.get('/v1/runs', async (req) => {
    const q = parse(ListRunsQuery, req.query, 'query');
    let tenant = q.tenant;
    if (req.principal.role === 'agent') {
      if (tenant !== undefined && tenant !== req.principal.tenant) throw new ApiError('forbidden', `this key cannot list runs of tenant ${tenant}`);
      tenant = req.principal.tenant;
    }
    const tags = (q.tag ?? []).map((t) => {
      const i = t.indexOf(':');
      return [t.slice(0, i), t.slice(i + 1)] as [string, string];
    });
    try {
      return await service.store.list({
        limit: q.limit,
        ...(tenant !== undefined ? { tenant } : {}),
        ...(q.status ? { status: q.status } : {}),
        ...(tags.length ? { tags } : {}),
        ...(q.cursor ? { cursor: q.cursor } : {}),
      });
    } catch (e) {
      if ((e as { code?: string }).code === 'invalid_cursor') throw new ApiError('invalid_cursor', 'the cursor is not one this server gave out');
      throw e;
    }
  });

  app.get('/v1/runs/:id', async (req) => {
    const { id } = parse(IdParams, req.params, 'path');
    return service.view(req.principal, id);
  });

  app.get('/v1/runs/:id/graph', async (req, reply) => {
    const { id } = parse(IdParams, req.params, 'path');
    const { format } = parse(GraphQuery, req.query, 'query');
    const graph = (await service.projection(req.principal, id)).graph();
    if (format === 'json') return graph;
    reply.type('text/plain; charset=utf-8');
    return format === 'mermaid' ? toMermaid(graph) : toDot(graph);
  });

  app.get('/v1/runs/:id/events', async (req, reply) => {
    const { id } = parse(IdParams, req.params, 'path');
    return eventStream(ctx, req, reply, id);
  });

  app.post('/v1/runs/:id/cancel', async (req, reply) => {
    const { id } = parse(IdParams, req.params, 'path');
    return reply.status(202).send(await service.cancel(req.principal, id));
  });

  app.post('/v1/runs/:id/replan', async (req, reply) => {
    const { id } = parse(IdParams, req.params, 'path');
    const body = parse(ReplanBody, req.body ?? {}, 'body');
    return reply.status(202).send(await service.replan(req.principal, id, body.calls));
  });

  app.post('/v1/runs/:id/calls', async (req) => {
    const { id } = parse(IdParams, req.params, 'path');
    const body = parse(AppendBody, req.body ?? {}, 'body');
    return service.append(req.principal, id, body.calls);
  });

  app.post('/v1/runs/:id/seal', async (req) => {
    const { id } = parse(IdParams, req.params, 'path');
    return service.seal(req.principal, id);
  });

  app.get('/v1/runs/:id/messages', async (req) => {
    const { id } = parse(IdParams, req.params, 'path');
    const { format } = parse(MessagesQuery, req.query, 'query');
    const view = await service.view(req.principal, id);
    return format === 'openai' ? openAiMessages(view) : anthropicMessages(view);
  });

  app.get('/v1/runs/:id/recording', async (req) => {
    const { id } = parse(IdParams, req.params, 'path');
    return recordingOf(await service.events(req.principal, id, 0), service.config);
  });
}
