/** Opening a Server-Sent Events response: the one place that sets the stream's headers. */
import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * No `connection` header of our own: Node then keeps the connection alive (with its `Keep-Alive:
 * timeout=` hint, so pools drop an idle socket before the server does) unless the client asked to close
 * it. A hand-set `connection: keep-alive` overrode a client's `Connection: close` and dropped that hint.
 */
const HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
} as const;

/**
 * `HEAD` of an event stream: its headers, and the end (a HEAD has no body, so it must not wait for a
 * stream that only ends with its run, or never). Routes answer it after their checks, before
 * `openEventStream`.
 */
export function headOfEventStream(reply: FastifyReply): FastifyReply {
  return reply
    .headers({ ...HEADERS, connection: 'close' })
    .status(200)
    .send();
}

/** Takes the response over from Fastify and starts an event stream; `preamble` is written first. */
export function openEventStream(req: FastifyRequest, reply: FastifyReply, preamble = ': stream open\n\n'): ServerResponse {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { ...HEADERS, 'x-request-id': String(req.id) });
  res.write(preamble);
  return res;
}
