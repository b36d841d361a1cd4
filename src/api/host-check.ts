/**
 * The `Host` check (DESIGN §7). In open development mode (no `auth.keys`) every request acts as an
 * operator, so a web page must not reach the service through DNS rebinding (a name of the attacker's
 * that resolves to 127.0.0.1): a request whose `Host` is not a loopback name or address is a `403`
 * (`forbidden_host`). Loopback: `localhost`, `127.x.x.x`, `[::1]` (and `[::ffff:127.x.x.x]`), with
 * or without a port. With keys, any `Host` is fine. An HTTP/1.1 request with no `Host` at all is a
 * `400` in either mode (Node's parser would answer that with an empty body: see server.ts).
 */
import type { IncomingMessage } from 'node:http';
import { ApiError } from './errors.js';

const LOOPBACK_HOST = /^(?:localhost\.?|127(?:\.\d{1,3}){3}|\[(?:::1|::ffff:127(?:\.\d{1,3}){3})\])(?::\d{1,5})?$/i;

/** Whether a `Host` header value names this machine's loopback interface. */
export function isLoopbackHost(host: string): boolean {
  return host.length <= 64 && LOOPBACK_HOST.test(host);
}

/** The last `Host` found good: nearly every request of a client repeats it. */
let lastGood = '';

/** Throws the error a request's `Host` earns, if any. `open`: no auth keys are configured. */
export function checkHost(req: IncomingMessage, open: boolean): void {
  const host = req.headers.host;
  if (host === undefined || host === '') {
    if (req.httpVersionMajor === 1 && req.httpVersionMinor === 0) {
      if (open)
        throw new ApiError('forbidden_host', 'open development mode (no auth.keys) answers only requests with a loopback Host header');
      return;
    }
    throw new ApiError('invalid_request', 'a Host header is required');
  }
  if (!open || host === lastGood) return;
  if (!isLoopbackHost(host)) {
    throw new ApiError(
      'forbidden_host',
      `open development mode (no auth.keys) answers only requests for a loopback host (localhost, 127.0.0.1, [::1]), not ${JSON.stringify(host.slice(0, 100))}`,
    );
  }
  lastGood = host;
}
