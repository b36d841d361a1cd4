/** Health, metrics, and the API's own description: `/openapi.json` and a readable `/docs`. */
import type { FastifyInstance } from 'fastify';
import { openApiDocument } from '../openapi.js';
import { docsPage } from '../docs.js';
import type { AppContext } from '../context.js';

export function metaRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get('/healthz', async (_req, reply) => {
    const { service } = ctx;
    // Degraded while the engine holds events the store could not take, or the store does not answer.
    let degraded = service.engine.storeUnavailable() !== undefined;
    if (!degraded) degraded = await service.store.ping().then(() => false, () => true);
    if (degraded) reply.status(503);
    return {
      status: degraded ? 'degraded' : 'ok',
      store: service.store.kind,
      replica: service.replica,
      activeRuns: service.engine.activeRuns(),
      runningAttempts: service.engine.runningAttempts(),
    };
  });

  app.get('/metrics', async (_req, reply) => {
    reply.type(ctx.metrics.registry.contentType);
    return ctx.metrics.registry.metrics();
  });

  const doc = openApiDocument();
  app.get('/openapi.json', async () => doc);
  const page = docsPage(doc);
  app.get('/docs', async (_req, reply) => reply.type('text/html; charset=utf-8').send(page));
}
