/**
 * The HTTP server (DESIGN §7): Fastify, one error handler that turns every error into
 * `{ error: { code, message, details? } }` with a 4xx for bad input, bearer auth on `/v1`, and the
 * routes in ./routes. `buildServer` returns the app without listening, so tests can `listen` on port 0.
 */
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { authenticate, type Principal } from './auth.js';
import { checkBodyCaps } from './caps.js';
import { clientErrorHandler, handleExpectContinue } from './client-errors.js';
import type { AppContext } from './context.js';
import { ApiError, httpErrorOf, type HttpError } from './errors.js';
import { checkHost } from './host-check.js';
import { createMetrics } from './metrics.js';
import { metaRoutes } from './routes/meta.js';
import { replicaRoutes } from './routes/replicas.js';
import { reviewRoutes } from './routes/reviews.js';
import { runRoutes } from './routes/runs.js';
import { limitRoutes } from './routes/limits.js';
import { clientWorkRoutes } from './routes/client-work.js';
import { runFeedRoutes } from './routes/run-feed.js';
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

/**
 * JSON.parse that refuses a `__proto__` key anywhere (as Fastify's own parser does by default): zod
 * and every later copy of the value would silently drop it (or turn it into a prototype), so a call
 * would run with other args than the ones submitted. The reviver only runs when the key can occur.
 */
function parseJson(text: string): unknown {
  if (!text.includes('proto') && !text.includes('\\u')) return JSON.parse(text);
  return JSON.parse(text, (key, v) => {
    if (key === '__proto__')
      throw new ApiError('invalid_request', 'the body uses the key "__proto__", which is not allowed anywhere in a request');
    return v;
  });
}

/**
 * Whether a request is for the API (`/v1`), which needs a key. Decided by the route the router
 * matched, not by the raw request target: `/%761/runs` and an absolute-form target
 * (`GET http://host/v1/runs`) reach the same routes as `/v1/runs`, so a check on `req.url` would let
 * them through without a key. Unmatched requests (404/405) are checked on their decoded path.
 */
function needsAuth(req: FastifyRequest): boolean {
  const route = req.routeOptions.url;
  if (route !== undefined) return route === '/v1' || route.startsWith('/v1/');
  let path = (req.url.split('?')[0] as string).replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, '');
  try {
    path = decodeURIComponent(path);
  } catch {
    // a malformed escape: judge the raw path
  }
  return /^\/+v1(\/|$)/i.test(path);
}

const BODY_LIMIT = 32 * 1024 * 1024;

function sendError(reply: FastifyReply, answer: HttpError): FastifyReply {
  for (const [k, v] of Object.entries(answer.headers)) reply.header(k, v);
  return reply.status(answer.status).send(answer.body);
}

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

export function buildServer(opts: ServerOptions): FastifyInstance {
  const app = Fastify({
    ...(opts.logger ? { loggerInstance: opts.logger } : { logger: false }),
    bodyLimit: BODY_LIMIT,
    // The parser's own 4xx answers get the error body (client-errors.ts); a missing Host is a 400 of
    // ours, with the body, not Node's empty one (host-check.ts).
    clientErrorHandler,
    http: { requireHostHeader: false },
    requestIdHeader: 'x-request-id',
    return503OnClosing: true,
    forceCloseConnections: true,
    routerOptions: { maxParamLength: 500 },
    // Errors the router raises before any route or hook (a malformed %-escape, a path parameter
    // longer than maxParamLength) get the same error body as every other error, not Fastify's own.
    frameworkErrors: (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
      reply.header('x-request-id', req.id);
      const message = err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path segment is too long' : err.message;
      return sendError(reply, httpErrorOf(new ApiError('invalid_request', message)));
    },
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
  handleExpectContinue(app.server, BODY_LIMIT);
  const open = opts.service.config.auth.keys.length === 0;

  // JSON bodies only: an empty body is no body (a POST that carries nothing works with or without one,
  // whatever content-type a client puts on nothing); any other non-empty body is a 415. Fastify's
  // default text/plain parser is removed too, or `text/plain` bodies would reach the routes as strings.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(/^application\/([\w.+-]+\+)?json(;.*)?$/i, { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    let value: unknown;
    try {
      value = parseJson(text);
    } catch (e) {
      if (e instanceof ApiError) return done(e, undefined);
      return done(new ApiError('invalid_json', `the body is not valid JSON: ${(e as Error).message}`), undefined);
    }
    try {
      checkBodyCaps(value, opts.service.config.limits.maxCallsPerRun);
    } catch (e) {
      return done(e as ApiError, undefined);
    }
    done(null, value);
  });
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (req, body, done) => {
    if ((body as Buffer).length === 0) return done(null, undefined);
    const type = req.headers['content-type'];
    done(
      new ApiError(
        'unsupported_media_type',
        type ? `the body must be application/json, got ${type}` : 'a body must come with content-type: application/json',
      ),
      undefined,
    );
  });

  app.decorateRequest('principal', undefined as unknown as Principal);
  // A callback hook, not an async one: a promise and a microtask less on every request.
  app.addHook('onRequest', (req: FastifyRequest, reply, done) => {
    reply.header('x-request-id', req.id);
    try {
      checkHost(req.raw, open);
      if (needsAuth(req)) req.principal = authenticate(opts.service.config.auth.keys, req.headers.authorization);
    } catch (err) {
      return done(err as Error);
    }
    done();
  });

  // The one error handler: every error a route, hook or parser raises is answered from the table of
  // errors.ts (the scheduler's and the store's too).
  app.setErrorHandler((err, req, reply) => {
    const answer = httpErrorOf(err);
    if (answer.unexpected) req.log.error({ err }, 'unexpected error');
    return sendError(reply, answer);
  });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0] as string;
    // A path that exists under other methods is a 405 with the methods it takes, not a 404.
    const allow = METHODS.filter((m) => m !== req.method && app.findRoute({ method: m, url: path }) !== null);
    // GET and HEAD are one route: a GET (or HEAD) that its route answered "not found" (a missing file
    // under /docs/static/) is a 404, not a 405 that says "use HEAD".
    const read = req.method === 'GET' || req.method === 'HEAD';
    if (allow.length > 0 && !(read && allow.some((m) => m === 'GET' || m === 'HEAD'))) {
      const message = `${req.method} is not allowed on ${path}; use ${allow.join(' or ')}`;
      return sendError(reply, httpErrorOf(new ApiError('method_not_allowed', message, undefined, { allow: allow.join(', ') })));
    }
    return sendError(reply, httpErrorOf(new ApiError('not_found', `no route ${req.method} ${path}`)));
  });

  metaRoutes(app, ctx);
  runRoutes(app, ctx);
  reviewRoutes(app, ctx);
  toolRoutes(app, ctx);
  runFeedRoutes(app, ctx);
  replicaRoutes(app, ctx);
  limitRoutes(app, ctx);
  clientWorkRoutes(app, ctx);
  for (const plugin of opts.plugins ?? []) plugin(app, opts.service);
  return app;
}
