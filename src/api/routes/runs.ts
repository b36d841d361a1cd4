/** Runs: submit, plan, list, read, graph, cancel, replan, recording (DESIGN §7). */
import type { FastifyInstance } from 'fastify';
import { buildPlan } from '../../core/plan.js';
import { toDot, toMermaid } from '../../core/render.js';
import {
  AppendBodySchema,
  GraphQuery,
  IdempotencyKeyHeader,
  ListRunsQuery,
  MessagesQuery,
  PlanBodySchema,
  ReplanBodySchema,
  RunIdParams,
  SubmitBodySchema,
  type SubmitBody,
} from '../../contract/requests.js';
import { planView } from '../../engine/plan-view.js';
import { recordingOf } from '../../replay/recording.js';
import { tenantFor } from '../auth.js';
import type { AppContext } from '../context.js';
import { ApiError } from '../errors.js';
import { fastSubmitBody } from '../fast-body.js';
import { anthropicMessages, openAiMessages } from '../formats.js';
import { withOwner, withOwners } from '../owners.js';
import { submissionOf } from '../submission.js';
import { parseRequestPart } from '../request-part.js';
import { serveRunEvents } from './events.js';
import { runFor } from '../waiting.js';
import { catalogModelNames } from '../tool-list.js';

export function runRoutes(app: FastifyInstance, ctx: AppContext): void {
  const { service } = ctx;

  app.post('/v1/runs', async (req, reply) => {
    if (ctx.shuttingDown()) throw new ApiError('shutting_down', 'the server is shutting down');
    // The plain batch passes a hand-written check (fast-body.ts); anything else goes to zod.
    const body: SubmitBody = fastSubmitBody(req.body) ?? parseRequestPart(SubmitBodySchema, req.body ?? {}, 'body');
    const rawKey = req.headers['idempotency-key'];
    const key = rawKey === undefined ? undefined : parseRequestPart(IdempotencyKeyHeader, rawKey, 'Idempotency-Key header');
    const traceparent = req.headers.traceparent;
    const { run, created } = await service.submitGrouped(
      req.principal,
      submissionOf(req.principal, body, key, catalogModelNames(service.config.catalog)),
      typeof traceparent === 'string' ? traceparent : undefined,
    );
    const view = body.waitMs ? await service.wait(req.principal, run.id, body.waitMs) : run;
    return reply.status(created ? 201 : 200).send(runFor(req.principal, view));
  });

  app.post('/v1/plan', async (req) => {
    const body = parseRequestPart(PlanBodySchema, req.body ?? {}, 'body');
    const tenant = tenantFor(req.principal, body.tenant);
    const plan = buildPlan({ calls: body.calls, tenant, catalog: service.config.catalog, policy: service.config.policy });
    return planView(plan);
  });

  app.get('/v1/runs', async (req) => {
    const q = parseRequestPart(ListRunsQuery, req.query, 'query');
    let tenant = q.tenant;
    if (req.principal.role === 'agent') {
      if (tenant !== undefined && tenant !== req.principal.tenant)
        throw new ApiError('forbidden', `this key cannot list runs of tenant ${tenant}`);
      tenant = req.principal.tenant;
    }
    const tags = (q.tag ?? []).map((t) => {
      const i = t.indexOf(':');
      return [t.slice(0, i), t.slice(i + 1)] as [string, string];
    });
    const page = await service.store.list({
      limit: q.limit,
      ...(tenant !== undefined ? { tenant } : {}),
      ...(q.status ? { status: q.status } : {}),
      ...(tags.length ? { tags } : {}),
      ...(q.cursor ? { cursor: q.cursor } : {}),
    });
    // Each item names the replica that owns it (null once ended, and with SQLite).
    return withOwners(service, page);
  });

  app.get('/v1/runs/:id', async (req) => {
    const { id } = parseRequestPart(RunIdParams, req.params, 'path');
    return runFor(req.principal, await withOwner(service, await service.view(req.principal, id)));
  });

  app.get('/v1/runs/:id/graph', async (req, reply) => {
    const { id } = parseRequestPart(RunIdParams, req.params, 'path');
    const { format } = parseRequestPart(GraphQuery, req.query, 'query');
    const graph = (await service.projection(req.principal, id)).graph();
    if (format === 'json') return graph;
    reply.type('text/plain; charset=utf-8');
    return format === 'mermaid' ? toMermaid(graph) : toDot(graph);
  });

  app.get('/v1/runs/:id/events', async (req, reply) => {
    const { id } = parseRequestPart(RunIdParams, req.params, 'path');
    return serveRunEvents(ctx, req, reply, id);
  });

  app.post('/v1/runs/:id/cancel', async (req, reply) => {
    const { id } = parseRequestPart(RunIdParams, req.params, 'path');
    return reply.status(202).send(runFor(req.principal, await service.cancel(req.principal, id)));
  });

  app.post('/v1/runs/:id/replan', async (req, reply) => {
    const { id } = parseRequestPart(RunIdParams, req.params, 'path');
    const body = parseRequestPart(ReplanBodySchema, req.body ?? {}, 'body');
    return reply.status(202).send(runFor(req.principal, await service.replan(req.principal, id, body.calls)));
  });

  app.post('/v1/runs/:id/calls', async (req) => {
    const { id } = parseRequestPart(RunIdParams, req.params, 'path');
    const body = parseRequestPart(AppendBodySchema, req.body ?? {}, 'body');
    return runFor(req.principal, await service.append(req.principal, id, body.calls));
  });

  app.post('/v1/runs/:id/seal', async (req) => {
    const { id } = parseRequestPart(RunIdParams, req.params, 'path');
    return runFor(req.principal, await service.seal(req.principal, id));
  });

  app.get('/v1/runs/:id/messages', async (req) => {
    const { id } = parseRequestPart(RunIdParams, req.params, 'path');
    const { format } = parseRequestPart(MessagesQuery, req.query, 'query');
    const view = await service.view(req.principal, id);
    const names = catalogModelNames(service.config.catalog);
    return format === 'openai' ? openAiMessages(view, names) : anthropicMessages(view, names);
  });

  app.get('/v1/runs/:id/recording', async (req) => {
    const { id } = parseRequestPart(RunIdParams, req.params, 'path');
    return recordingOf(await service.events(req.principal, id, 0), service.config);
  });
}
