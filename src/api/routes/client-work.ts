/**
 * Client-run tools (DESIGN §17): the calls that wait for their agent (`GET /v1/runs/{id}/work`) and
 * the agent's answers (`POST /v1/runs/{id}/calls/{callId}/result`).
 */
import type { FastifyInstance } from 'fastify';
import { CallParams, ClientResultBodySchema, RunIdParams, WorkQuery } from '../../contract/requests.js';
import type { AppContext } from '../context.js';
import { parseRequestPart } from '../request-part.js';

export function clientWorkRoutes(app: FastifyInstance, ctx: AppContext): void {
  const { service } = ctx;

  app.get('/v1/runs/:id/work', async (req) => {
    const { id } = parseRequestPart(RunIdParams, req.params, 'path');
    const { waitMs } = parseRequestPart(WorkQuery, req.query ?? {}, 'query');
    return service.work(req.principal, id, waitMs);
  });

  app.post('/v1/runs/:id/calls/:callId/result', async (req, reply) => {
    const { id, callId } = parseRequestPart(CallParams, req.params, 'path');
    const body = parseRequestPart(ClientResultBodySchema, req.body ?? {}, 'body');
    const answer = body.error !== undefined ? { error: body.error } : { output: body.output };
    return reply.status(202).send(await service.result(req.principal, id, callId, body.token, answer));
  });
}
