/**
 * Errors the HTTP parser finds before any route (DESIGN §7, Faults): a header block over the limit
 * (431), a bad request line, bad framing (conflicting or negative Content-Length), a CR inside a
 * header, a request that took too long (408). Node answers them with an empty body; here they get the
 * error body every other 4xx has, then the connection closes (the parser cannot go on after them).
 *
 * Also `Expect: 100-continue`: a client announcing a body over the limit gets its `413` before sending
 * it, not `100 Continue` and then a connection cut while it uploads.
 */
import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { errorBody, type ApiErrorCode } from './errors.js';

/** The status and code for a parser error (`err.code` is Node's, `HPE_*` from llhttp). */
function classify(err: NodeJS.ErrnoException): [number, ApiErrorCode, string] {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return [431, 'headers_too_large', 'the request headers are too large'];
    case 'ERR_HTTP_REQUEST_TIMEOUT':
    case 'ERR_HTTP_HEADERS_TIMEOUT':
      return [408, 'request_timeout', 'the request took too long to arrive'];
    default: {
      // llhttp's reason ("Invalid header value char", "Content-Length can't be present with
      // Transfer-Encoding"…), never the raw bytes.
      const reason = (err as { reason?: unknown }).reason;
      const why = typeof reason === 'string' && reason.length < 200 ? `: ${reason}` : err.code ? ` (${err.code})` : '';
      return [400, 'invalid_request', `the request could not be parsed as HTTP${why}`];
    }
  }
}

function rawResponse(status: number, code: ApiErrorCode, message: string): string {
  const body = JSON.stringify(errorBody(code, message));
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
    `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
  );
}

/** Fastify's `clientErrorHandler`: writes the error as a whole HTTP response, then closes. */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  // A response already under way on this socket (or a socket gone) cannot take another.
  const busy = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
  if (err.code === 'ECONNRESET' || err.code === 'EPIPE' || !socket.writable || busy) {
    socket.destroy();
    return;
  }
  const [status, code, message] = classify(err);
  socket.end(rawResponse(status, code, message));
  socket.once('finish', () => socket.destroy());
  socket.setTimeout(5_000, () => socket.destroy());
}

/**
 * Answers `Expect: 100-continue` itself: a declared body over `bodyLimit` is a `413` (and the
 * connection closes, the body unsent); any other request gets `100 Continue` and goes on as usual.
 */
export function handleExpectContinue(server: Server, bodyLimit: number): void {
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    const length = Number(req.headers['content-length']);
    if (Number.isFinite(length) && length > bodyLimit) {
      const body = JSON.stringify(errorBody('payload_too_large', `the body is ${length} bytes; the limit is ${bodyLimit}`));
      res.shouldKeepAlive = false;
      res.writeHead(413, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
        connection: 'close',
      });
      res.end(body);
      return;
    }
    res.writeContinue();
    server.emit('request', req, res);
  });
}
