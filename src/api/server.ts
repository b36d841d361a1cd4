/**
 * The HTTP server (DESIGN §7): Fastify, one error handler that turns every error into
 * `{ error: { code, message, details? } }` with a 4xx for bad input, bearer auth on `/v1`, and the
 * routes in ./routes. `buildServer` returns the app without listening, so tests can `listen` on port 0.
 */
import Fastify, { type FastifyError, type FastifyInstance, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { authenticate, type Principal } from './auth.js';
import { ApiError, errorBody } from './errors.js';
import { createMetrics, type Metrics } from './metrics.js';
import { metaRoutes } from './routes/meta.js';
import { reviewRoutes } from './routes/reviews.js';
import { runRoutes } from './routes/runs.js';
import { toolRoutes } from './routes/tools.js';
import type { Service } from './service.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
}

export interface ServerOptions {
  service: Service;
  logger?: Logger | false;
  /** SSE heartbeat period; default 15 s. */
  heartbeatMs?: number;
  /** Extra routes (the dashboard). */
  plugins?: ((app: FastifyInstance, service: Service) => void)[];
}

export interface AppContext {
  service: Service;
  metrics: Metrics;
  heartbeatMs: number;
  shuttingDown: () => boolean;
}

const FASTIFY_CODES: Record<string, [number, string]> = {
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'invalid_json'],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'invalid_json'],
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'payload_too_large'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'unsupported_media_type'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'invalid_request'],
  FST_ERR_BAD_URL: [400, 'invalid_request'],
  FST_ERR_ASYNC_CONSTRAINT: [400, 'invalid_request'],
};

export function buildServer(opts: ServerOptions): FastifyInstance {
  const app = Fastify({
    ...(opts.logger ? { loggerInstance: opts.logger } : { logger: false }),
    bodyLimit: 32 * 1024 * 1024,
    requestIdHeader: 'x-request-id',
    requestIdLogLabel: 'requestId',
    return503OnClosing: true,
    forceCloseConnections: true,
    routerOptions: { maxParamLength: 500 },
  } as Parameters<typeof Fastify>[0]) as unknown as FastifyInstance;
  let closing = false;
  const ctx: AppContext = {
    service: opts.service,
    metrics: createMetrics(opts.service),
    heartbeatMs: opts.heartbeatMs ?? 15_000,
    shuttingDown: () => closing,
  };
  app.addHook('onClose', async () => {
    closing = true;
  });

  // JSON bodies: an empty body is no body (a POST that carries nothing works with or without one).
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(/^application\/([\w.+-]+\+)?json(;.*)?$/i, { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (e) {
      done(new ApiError('invalid_json', `the body is not valid JSON: ${(e as Error).message}`), undefined);
    }
  });

  app.decorateRequest('principal', undefined as unknown as Principal);
  app.addHook('onRequest', async (req: FastifyRequest, reply) => {
    reply.header('x-request-id', req.id);
    if (req.url.startsWith('/v1/') || req.url === '/v1') {
      req.principal = authenticate(opts.service.config.auth.keys, req.headers.authorization);
    }
  });

  app.setErrorHandler((err: FastifyError | ApiError, req, reply) => {
    if (err instanceof ApiError) {
      for (const [k, v] of Object.entries(err.headers)) reply.header(k, v);
      return reply.status(err.status).send(errorBody(err.code, err.message, err.details));
    }
    const known = err.code ? FASTIFY_CODES[err.code] : undefined;
    if (known) return reply.status(known[0]).send(errorBody(known[1], err.message));
    if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.status(err.statusCode).send(errorBody('invalid_request', err.message));
    }
    req.log.error({ err }, 'unexpected error');
    return reply.status(500).send(errorBody('internal', 'an unexpected error occurred; it has been logged'));
  });
  app.setNotFoundHandler((req, reply) => {
    reply.status(404).send(errorBody('not_found', `no route ${req.method} ${req.url.split('?')[0]}`));
  });

  metaRoutes(app, ctx);
  runRoutes(app, ctx);
  reviewRoutes(app, ctx);
  toolRoutes(app, ctx);
  for (const plugin of opts.plugins ?? []) plugin(app, opts.service);
  return app;
}
