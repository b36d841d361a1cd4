/**
 * `GET /v1/runs/{id}/events`: Server-Sent Events. Stored events after `Last-Event-ID` (or `?from=N`)
 * are replayed, then the live tail follows until the run ends. Heartbeat comments keep proxies from
 * closing an idle stream. Each subscriber writes to its own socket; one that stops reading and lets
 * more than a few MB pile up is disconnected (it can resume with Last-Event-ID) so it slows nobody.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RunEvent } from '../../core/events.js';
import { iso } from '../../core/view.js';
import { isEnded } from '../../engine/engine.js';
import { EventsQuery } from '../../contract/requests.js';
import type { AppContext } from '../context.js';
import { ApiError } from '../errors.js';
import { headOfEventStream, openEventStream } from '../sse.js';
import { parseRequestPart } from '../request-part.js';
import { eventFor } from '../waiting.js';

const MAX_BUFFERED = 4 * 1024 * 1024;

/** The wire form of an event: `at` as an ISO time. */
export function eventJson(e: RunEvent) {
  return { seq: e.seq, type: e.type, runId: e.runId, ...(e.callId !== undefined ? { callId: e.callId } : {}), at: iso(e.at), data: e.data };
}

export async function serveRunEvents(ctx: AppContext, req: FastifyRequest, reply: FastifyReply, runId: string): Promise<void> {
  const { from } = parseRequestPart(EventsQuery, req.query, 'query');
  const header = req.headers['last-event-id'];
  let after = from ?? 0;
  if (header !== undefined) {
    const n = Number(header);
    if (!Number.isInteger(n) || n < 0)
      throw new ApiError('invalid_request', `Last-Event-ID must be an event's seq (an integer ≥ 0), got "${String(header)}"`);
    after = n;
  }
  const { service } = ctx;
  const projection = await service.projection(req.principal, runId);
  if (req.method === 'HEAD') {
    headOfEventStream(reply);
    return;
  }

  const res = openEventStream(req, reply);

  let last = after;
  let closed = false;
  let unsubscribe: () => void = () => {};
  const close = () => {
    if (closed) return;
    closed = true;
    clearInterval(heartbeat);
    unsubscribe();
    res.end();
  };
  const send = (e: RunEvent) => {
    if (closed || e.seq <= last) return;
    last = e.seq;
    res.write(`id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(eventJson(eventFor(req.principal, e)))}\n\n`);
    if (res.writableLength > MAX_BUFFERED) res.destroy();
    else if (e.type === 'run.completed') close();
  };
  const heartbeat = setInterval(() => res.write(': ping\n\n'), ctx.heartbeatMs);
  heartbeat.unref();
  req.raw.on('close', close);
  res.on('error', close);
  if (service.cluster && !isEnded(projection.view.status)) {
    // Several replicas (DESIGN §12): whichever replica appends, the feed reads it from the store, in order.
    unsubscribe = service.cluster.feed.subscribe(runId, after, (events) => {
      for (const e of events) send(e);
    });
    return;
  }
  // Subscribed before the stored events are read, and what comes meanwhile held back until they are
  // sent: an event published before the subscription was stored before it, so the read has it.
  let held: RunEvent[] | undefined = [];
  unsubscribe = service.engine.subscribe(runId, (e) => (held ? held.push(e) : send(e)));
  try {
    for (const e of await service.store.events(runId, after)) send(e);
  } catch {
    // The store is away: the stream ends, and the client resumes from the last id it got.
    close();
  }
  const live = held;
  held = undefined;
  for (const e of live) send(e);
  if (!closed && (!service.engine.has(runId) || isEnded(projection.view.status))) close();
}
