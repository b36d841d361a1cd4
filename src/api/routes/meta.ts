/** Health, metrics, and the API's own description: `/openapi.json` and a readable `/docs`. */
import type { FastifyInstance } from 'fastify';
import { openApiDocument } from '../openapi.js';
import { docsPage } from '../docs.js';
import type { AppContext } from '../context.js';

export function metaRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get('/healthz', async () => ({ status: 'ok', activeRuns: ctx.service.engine.activeRuns(), runningAttempts: ctx.service.engine.runningAttempts() }));

  app.get('/metrics', async (_req, reply) => {
    reply.type(ctx.metrics.registry.contentType);
    return ctx.metrics.registry.metrics();
  });

  const doc = openApiDocument();
  app.get('/openapi.json', async () => doc);
  const page = docsPage(doc);
  app.get('/docs', async (_req, reply) => reply.type('text/html; charset=utf-8').send(page));
}
