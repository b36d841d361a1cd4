/** `GET /v1/limits` (DESIGN §7): every limit and lock in use, for operators; `403` for an agent key. */
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';

export function limitRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get('/v1/limits', async (req) => ctx.service.limits(req.principal));
}
