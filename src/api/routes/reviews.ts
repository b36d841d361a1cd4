/** Reviews: the calls waiting for a human, and the decisions (DESIGN §5, §7). */
import type { FastifyInstance } from 'fastify';
import { ReviewBodySchema, ReviewIdParams, ReviewsQuery } from '../../contract/requests.js';
import { requireOperator } from '../auth.js';
import type { AppContext } from '../context.js';
import { ApiError } from '../errors.js';
import { parseRequestPart } from '../request-part.js';

export function reviewRoutes(app: FastifyInstance, ctx: AppContext): void {
  const { service } = ctx;

  app.get('/v1/reviews', async (req) => {
    const q = parseRequestPart(ReviewsQuery, req.query, 'query');
    const p = req.principal;
    const items = await service.store.reviews({
      status: q.status,
      ...(q.runId ? { runId: q.runId } : {}),
      ...(p.role === 'agent' ? { tenant: p.tenant as string } : {}),
    });
    return {
      items: items.map((r) => ({
        id: r.id,
        runId: r.runId,
        callId: r.callId,
        tenant: r.tenant,
        tool: r.tool,
        args: r.args,
        reason: r.reason,
        status: r.status,
        decision: r.decision,
        createdAt: r.createdAt,
      })),
    };
  });

  app.post('/v1/reviews/:id', async (req) => {
    requireOperator(req.principal);
    const { id } = parseRequestPart(ReviewIdParams, req.params, 'path');
    const body = parseRequestPart(ReviewBodySchema, req.body ?? {}, 'body');
    if (body.decision === 'edit' && !body.args) throw new ApiError('invalid_request', 'an edit needs args: the new args of the call');
    if (body.decision !== 'edit' && body.args)
      throw new ApiError('invalid_request', `args go with decision "edit", not "${body.decision}"`);
    return service.review(req.principal, id, {
      decision: body.decision,
      ...(body.args ? { args: body.args } : {}),
      ...(body.comment !== undefined ? { comment: body.comment } : {}),
    });
  });
}
