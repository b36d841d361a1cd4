/**
 * HTTP executor (DESIGN §2): POST the attempt as JSON to the tool's url with an Idempotency-Key of
 * `<runId>/<callId>`. 2xx JSON → output; 408/429/5xx, network errors and timeouts are retryable (with
 * Retry-After as retryAfterMs); other statuses are permanent. Abort and timeout abort the request.
 */
import type { ExecuteRequest, ExecuteResult, Executor } from './types.js';
import { abortResult, deadline, lostAnswer, messageOf, toolError } from './deadline.js';

/** How much of an error response's body goes into `details.body`. */
export const ERROR_BODY_LIMIT = 2048;

/** `Retry-After` as ms: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** How long a 429 pauses its tool when it gives no Retry-After (ms). */
export const DEFAULT_PAUSE_MS = 1000;

/** The most a Retry-After may pause a tool (ms): a server that says "a day" is taken at an hour. */
export const MAX_PAUSE_MS = 3_600_000;

/**
 * Backpressure (DESIGN §4): how long an answer asks that the tool be left alone, if it does: a 429
 * (its Retry-After, else `DEFAULT_PAUSE_MS`), or a 503 with a Retry-After.
 */
export function backpressure(status: number, retryAfterMs: number | undefined): number | undefined {
  if (status === 429) return Math.min(MAX_PAUSE_MS, retryAfterMs ?? DEFAULT_PAUSE_MS);
  if (status === 503 && retryAfterMs !== undefined) return Math.min(MAX_PAUSE_MS, retryAfterMs);
  return undefined;
}

export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/** Reads at most `limit` bytes of the body as text, then drops the rest. */
async function readLimited(res: Response, limit: number): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size < limit) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
  }
  if (size >= limit) await reader.cancel().catch(() => {});
  return new TextDecoder().decode(Buffer.concat(chunks).subarray(0, limit));
}

/** Network errors that mean the request never reached the tool (no connection was made). */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function networkDetails(err: unknown): Record<string, unknown> {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  return { message: messageOf(err), ...(cause ? { cause: cause.code ?? cause.message } : {}) };
}

async function post(request: ExecuteRequest, url: string, headers: Record<string, string> = {}): Promise<ExecuteResult> {
  try {
    new URL(url);
  } catch {
    return toolError(`invalid url ${JSON.stringify(url)}`, false);
  }
  const { runId, callId, tool, args, attempt } = request;
  const body = JSON.stringify({ runId, callId, tool: tool.name, args, attempt });
  const h = new Headers(headers);
  h.set('content-type', 'application/json');
  h.set('idempotency-key', `${runId}/${callId}`);
  if (request.traceparent !== undefined) h.set('traceparent', request.traceparent);

  const d = deadline(request);
  try {
    if (d.signal.aborted) return abortResult(d);
    const res = await fetch(url, { method: 'POST', headers: h, body, signal: d.signal, redirect: 'manual' });
    if (res.status >= 200 && res.status < 300) {
      const text = await res.text();
      if (text.trim() === '') return { ok: true, output: null };
      try {
        return { ok: true, output: JSON.parse(text) as unknown };
      } catch {
        const details = { status: res.status, body: text.slice(0, ERROR_BODY_LIMIT) };
        return toolError(`HTTP ${res.status} from ${url}: the body is not JSON`, false, details);
      }
    }
    const text = await readLimited(res, ERROR_BODY_LIMIT);
    const retryable = isRetryableStatus(res.status);
    const retryAfterMs = retryable ? parseRetryAfter(res.headers.get('retry-after')) : undefined;
    const failed = toolError(`HTTP ${res.status} from ${url}`, retryable, { status: res.status, body: text }, retryAfterMs);
    const pauseMs = backpressure(res.status, retryAfterMs);
    return pauseMs === undefined || failed.ok ? failed : { ...failed, pauseMs, pauseStatus: res.status };
  } catch (err) {
    if (d.cause() !== null) return abortResult(d);
    const details = networkDetails(err);
    const message = `request to ${url} failed: ${messageOf(err)}`;
    return NOT_SENT.has(String(details.cause)) ? toolError(message, true, details) : lostAnswer(message, details);
  } finally {
    d.dispose();
  }
}

export function createHttpExecutor(): Executor {
  return {
    async execute(request) {
      const spec = request.tool.executor;
      if (spec.kind !== 'http') return toolError(`not an http tool: ${spec.kind}`, false);
      try {
        return await post(request, spec.url, spec.headers);
      } catch (err) {
        return toolError(messageOf(err), false);
      }
    },
    async close() {},
  };
}
