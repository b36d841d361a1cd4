/**
 * Health, metrics, and the API's own description: `/openapi.json` and, at `/docs`, the interactive
 * reference (Swagger UI, served from the package's own files: no CDN), where a request can be tried.
 */
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { authenticate, requireOperator } from '../auth.js';
import { openApiDocument } from '../openapi.js';
import type { AppContext } from '../context.js';

/** How long `/healthz` waits for the store's ping (ms) before it says `degraded` (DESIGN §7 Faults). */
export const HEALTH_PING_MS = 2000;

/** Whether `p` resolves within `ms`; a rejection or no answer in time is false (a late one is ignored). */
function answersWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    p.then(
      () => resolve(true),
      () => resolve(false),
    ).finally(() => clearTimeout(timer));
  });
}

export function metaRoutes(app: FastifyInstance, ctx: AppContext): void {
  // With auth keys (DESIGN §7): only an operator key sees the details of /healthz (anyone else learns
  // only whether the service is up) and /metrics (every tenant's run counts, the tool names).
  const keys = ctx.service.config.auth.keys;
  const isOperator = (header: string | undefined): boolean => {
    try {
      return authenticate(keys, header).role === 'operator';
    } catch {
      return false;
    }
  };
  app.get('/healthz', async (req, reply) => {
    const { service } = ctx;
    // Degraded while the engine holds events the store could not take, or the store does not answer.
    let degraded = service.engine.storeUnavailable() !== undefined || (service.cluster !== undefined && !service.cluster.lease.holds);
    // The store must answer within HEALTH_PING_MS: a frozen server makes /healthz degraded, never slow.
    if (!degraded) degraded = !(await answersWithin(service.store.ping(), HEALTH_PING_MS));
    if (degraded) reply.status(503);
    const status = degraded ? 'degraded' : 'ok';
    if (keys.length > 0 && !isOperator(req.headers.authorization)) return { status };
    const cluster = service.cluster;
    return {
      status,
      store: service.store.kind,
      replica: service.replica,
      activeRuns: service.engine.activeRuns(),
      runningAttempts: service.engine.runningAttempts(),
      // Several replicas (DESIGN §12): this replica's lease, and whether it hears the others.
      ...(cluster
        ? {
            cluster: {
              instance: cluster.instance ?? null,
              lease: cluster.lease.holds ? 'held' : 'lost',
              listening: cluster.notifications.listening,
              ownedRuns: cluster.ownedRuns(),
              leaseMs: cluster.leaseMs,
            },
          }
        : {}),
    };
  });

  app.get('/metrics', async (req, reply) => {
    if (keys.length > 0) requireOperator(authenticate(keys, req.headers.authorization));
    reply.type(ctx.metrics.registry.contentType);
    return ctx.metrics.registry.metrics();
  });

  const doc = openApiDocument();
  app.get('/openapi.json', async () => doc);
  // Static mode: the document is ours (generated from the zod schemas), not rebuilt from the routes.
  void app.register(swagger, { mode: 'static', specification: { document: doc as never } });
  void app.register(swaggerUi, {
    routePrefix: '/docs',
    theme: { title: 'toolgraph API' },
    uiConfig: { deepLinking: true, tryItOutEnabled: true, persistAuthorization: true },
    // "Try it out" sends requests to the server that serves the page first, wherever it listens.
    transformSpecification: (spec) => ({
      ...spec,
      servers: [{ url: '/', description: 'this server' }, ...((spec as { servers?: unknown[] }).servers ?? [])],
    }),
    transformSpecificationClone: true,
  });
}
