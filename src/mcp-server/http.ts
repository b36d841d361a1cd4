/**
 * `/mcp` on `toolgraph serve` (DESIGN §16): MCP over Streamable HTTP with the official SDK's transport,
 * mounted in the API's Fastify app (its Host check and error answers apply) as a plugin of
 * `buildServer`.
 *
 * Sessions keep no state on a replica, so a session's requests may land on any replica of a cluster
 * (DESIGN §12): `initialize` mints the session id (the `Mcp-Session-Id` response header), the client
 * sends it with every later request, and each request is served by a Server and a stateless SDK
 * transport of its own, for the key that request carries. A run is all a call leaves behind, tagged
 * with the session. So:
 * - a request other than `initialize` must carry a session id (400 without one), but any well-formed
 *   id is served: it may have been minted by another replica or before a restart;
 * - `GET /mcp` (a stream for messages the server starts on its own) is a 405: toolgraph sends none,
 *   and the SDK's clients go on without it; `DELETE /mcp` ends a session, which holds nothing (204);
 * - the calls of a session that reach this replica are submitted in the order their requests arrived
 *   here (a request waits for the earlier ones to be submitted, not to end), so the cross-run locks
 *   serve them in that order;
 * - a client's `notifications/cancelled` reaches the call's handler when it is on this replica, else
 *   the run is found by its tags (`mcp.session`, `mcp.request`) and cancelled through its owner.
 *
 * Auth is the API's: `Authorization: Bearer <key>` (a 401 without one when keys are configured); the
 * key's tenant owns the runs.
 */
import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authenticate, canSee } from '../api/auth.js';
import { ApiError } from '../api/errors.js';
import type { Service } from '../api/service.js';
import { cancelByTags } from './calls.js';
import { createMcpServer } from './server.js';

export interface McpHttpOptions {
  /** Tools per page of `tools/list`. @default 100 */
  pageSize?: number;
  /** How often a waiting call repeats its progress. @default 10000 */
  progressIntervalMs?: number;
}

/** A session id as a client may send it back: visible ASCII, bounded (it becomes a tag). */
const SESSION_ID = /^[\x21-\x7e]{1,128}$/;

/** The most JSON-RPC messages one POST may carry (older clients batch them in an array). */
const MAX_BATCH = 64;

/** The path of the MCP endpoint. */
export const MCP_PATH = '/mcp';

/**
 * The requests of each session in the order they arrived: a request's turn comes once every earlier
 * one of its session has released its own (by submitting its run, or by ending).
 */
class ArrivalOrder {
  private readonly tails = new Map<string, Promise<void>>();

  take(session: string): { ready: Promise<void>; release: () => void } {
    const before = this.tails.get(session) ?? Promise.resolve();
    let open!: () => void;
    const mine = new Promise<void>((resolve) => {
      open = resolve;
    });
    const tail = before.then(() => mine);
    this.tails.set(session, tail);
    let released = false;
    return {
      ready: before,
      release: () => {
        if (released) return;
        released = true;
        open();
        void tail.then(() => {
          if (this.tails.get(session) === tail) this.tails.delete(session);
        });
      },
    };
  }
}

function isInitialize(body: unknown): boolean {
  const one = (m: unknown) => typeof m === 'object' && m !== null && (m as { method?: unknown }).method === 'initialize';
  return Array.isArray(body) ? body.some(one) : one(body);
}

function sessionOf(req: FastifyRequest): string {
  const header = req.headers['mcp-session-id'];
  if (header === undefined) throw new ApiError('invalid_request', 'an Mcp-Session-Id header is required (initialize first)');
  if (typeof header !== 'string' || !SESSION_ID.test(header))
    throw new ApiError('invalid_request', 'the Mcp-Session-Id header must be 1–128 visible ASCII characters');
  return header;
}

/** The plugin for `buildServer({ plugins })` that serves `/mcp`. */
export function mcpRoutes(opts: McpHttpOptions = {}): (app: FastifyInstance, service: Service) => void {
  return (app, service) => {
    const order = new ArrivalOrder();
    /**
     * The tools/call handlers of this replica, by session and request id, with the principal that made
     * each: what a cancel aborts (when its own key may see that principal's runs).
     */
    const inFlight = new Map<string, { controller: AbortController; tenant: string | undefined }>();
    const keys = service.config.auth.keys;

    app.post(MCP_PATH, async (req: FastifyRequest, reply: FastifyReply) => {
      const principal = authenticate(keys, req.headers.authorization);
      if (Array.isArray(req.body) && req.body.length > MAX_BATCH)
        throw new ApiError('invalid_request', `a POST to /mcp carries at most ${MAX_BATCH} JSON-RPC messages, got ${req.body.length}`);
      const init = isInitialize(req.body);
      const session = init ? randomUUID() : sessionOf(req);
      const turn = order.take(session);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      const slot = (requestId: string | number) => `${session}\u0000${typeof requestId}:${requestId}`;
      const server = createMcpServer({
        service,
        principal,
        id: session,
        logger: req.log,
        ...(opts.pageSize !== undefined ? { pageSize: opts.pageSize } : {}),
        ...(opts.progressIntervalMs !== undefined ? { progressIntervalMs: opts.progressIntervalMs } : {}),
        perRequest: {
          turn: turn.ready,
          submitted: turn.release,
          track(requestId) {
            const key = slot(requestId);
            const controller = new AbortController();
            // The client gave up on this request: its answer is not sent (the run is cancelled by the handler).
            controller.signal.addEventListener('abort', () => void transport.close(), { once: true });
            const entry = { controller, tenant: principal.tenant };
            inFlight.set(key, entry);
            return { signal: controller.signal, end: () => inFlight.get(key) === entry && inFlight.delete(key) };
          },
          async cancelled(requestId) {
            const local = inFlight.get(slot(requestId));
            if (local && (local.tenant === undefined || canSee(principal, local.tenant))) return local.controller.abort();
            if (local) return;
            await cancelByTags({ service, principal, id: session }, requestId).catch((err: unknown) =>
              req.log.warn({ err, session, requestId }, 'mcp: a cancel found no run to cancel'),
            );
          },
        },
      });
      await server.connect(transport);
      reply.hijack();
      const res = reply.raw;
      res.on('close', () => {
        turn.release();
        void server.close();
      });
      if (init) res.setHeader('mcp-session-id', session);
      res.setHeader('x-request-id', req.id);
      try {
        await transport.handleRequest(req.raw, res, req.body);
      } catch (err) {
        req.log.error({ err }, 'mcp: the request could not be handled');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        if (!res.writableEnded)
          res.end(JSON.stringify({ error: { code: 'internal', message: 'an unexpected error occurred; it has been logged' } }));
      }
    });

    app.get(MCP_PATH, async () => {
      throw new ApiError('method_not_allowed', 'toolgraph sends no messages of its own: GET /mcp has no stream; use POST', undefined, {
        allow: 'POST, DELETE',
      });
    });

    app.delete(MCP_PATH, async (req, reply) => {
      authenticate(keys, req.headers.authorization);
      sessionOf(req);
      return reply.status(204).send();
    });
  };
}
