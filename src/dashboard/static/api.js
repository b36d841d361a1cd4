// The dashboard's API client: JSON over fetch with the operator key of this browser session, and
// Server-Sent Events over fetch streaming (EventSource cannot send an Authorization header).

const KEY = 'toolgraph.key';

/**
 * What the API answers, typed from the server's own schemas (src/contract/responses.ts, through the
 * typed client's names); for the type check only, nothing of the server is loaded in the browser.
 * @typedef {import('../../client/index.js').Run} Run  `GET /v1/runs/{id}`
 * @typedef {import('../../client/index.js').RunSummary} RunSummary  an item of `GET /v1/runs`
 * @typedef {import('../../client/index.js').Review} Review  an item of `GET /v1/reviews`
 * @typedef {import('../../client/index.js').RunEvent} RunEvent  an event of `GET /v1/runs/{id}/events`
 * @typedef {import('zod').infer<typeof import('../../contract/responses.js').LimitsSchema>} Limits  `GET /v1/limits`
 * @typedef {import('zod').infer<typeof import('../../contract/responses.js').ReplicasSchema>} Replicas  `GET /v1/replicas`
 */

/**
 * A page of a list (`GET /v1/runs`, `GET /v1/reviews`).
 * @template T
 * @typedef {{ items: T[], nextCursor: string | null }} Page
 */

/**
 * A message of an event stream: its `event` name, its data (parsed when it is JSON, else the text)
 * and its `id`.
 * @typedef {{ event: string, data: unknown, id: string | undefined }} StreamMessage
 */

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   * @param {unknown} [details]
   */
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export const session = {
  get key() {
    try {
      return sessionStorage.getItem(KEY);
    } catch {
      return null;
    }
  },
  /** @param {string} key */
  set(key) {
    sessionStorage.setItem(KEY, key);
  },
  clear() {
    sessionStorage.removeItem(KEY);
  },
};

/** @type {((message: string) => Promise<void>) | null} */
let askKey = null;
/** @type {Promise<void> | null} */
let asking = null;

/**
 * Sets what to do on a 401: `ask(message)` shows the key form and resolves once a new key is stored.
 * Requests that meet a 401 wait for it, then retry.
 * @param {(message: string) => Promise<void>} ask
 */
export function onUnauthorized(ask) {
  askKey = ask;
}

/** @param {string} message */
function needKey(message) {
  if (!askKey) return Promise.reject(new ApiError(401, 'unauthorized', message));
  asking ??= askKey(message).finally(() => (asking = null));
  return asking;
}

/** @param {Record<string, string>} [extra] */
function headers(extra = {}) {
  /** @type {Record<string, string>} */
  const h = { accept: 'application/json', ...extra };
  const key = session.key;
  if (key) h.authorization = `Bearer ${key}`;
  return h;
}

/** @param {Response} res */
async function errorOf(res) {
  /** @type {{ error?: { code?: string, message?: string, details?: unknown } } | undefined} */
  let body;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  const e = body?.error;
  return new ApiError(res.status, e?.code ?? 'http_error', e?.message ?? `${res.status} ${res.statusText}`, e?.details);
}

/**
 * `api('/v1/runs', { method, body, signal })` → the parsed JSON; throws ApiError. The caller says
 * what the answer holds (a `@type` cast to one of the types above): the server's schemas decide it.
 * @param {string} path
 * @param {{ method?: string, body?: unknown, signal?: AbortSignal, as?: 'json' | 'blob' }} [options]
 * @returns {Promise<unknown>}
 */
export async function api(path, { method = 'GET', body, signal, as = 'json' } = {}) {
  for (let tries = 0; ; tries++) {
    /** @type {RequestInit} */
    const init = { method, signal, headers: headers(body !== undefined ? { 'content-type': 'application/json' } : {}) };
    if (body !== undefined) init.body = JSON.stringify(body);
    const res = await fetch(path, init);
    if (res.status === 401 && tries < 5) {
      const err = await errorOf(res);
      await needKey(session.key ? `${err.message}: enter a valid operator key` : 'This server needs an operator key.');
      continue;
    }
    if (!res.ok) throw await errorOf(res);
    if (as === 'blob') return res.blob();
    if (res.status === 204) return undefined;
    return res.json();
  }
}

/**
 * Follows an SSE endpoint. `onEvent({ event, data, id })` gets each message (data parsed as JSON when
 * it is JSON). When the stream ends or breaks, it reconnects after `retryMs` with `Last-Event-ID`
 * while `reconnect()` says so. Returns `{ close() }`.
 * @param {string} path
 * @param {{
 *   onEvent: (message: StreamMessage) => void,
 *   onState?: (state: 'open' | 'reconnecting' | 'error' | 'closed', error?: ApiError) => void,
 *   reconnect?: () => boolean,
 *   lastEventId?: string,
 * }} options
 */
export function stream(path, { onEvent, onState = () => {}, reconnect = () => true, lastEventId }) {
  const controller = new AbortController();
  let lastId = lastEventId;
  let retryMs = 1500;
  let closed = false;

  async function once() {
    const h = headers({ accept: 'text/event-stream' });
    if (lastId !== undefined) h['last-event-id'] = String(lastId);
    const res = await fetch(path, { headers: h, signal: controller.signal, cache: 'no-store' });
    if (res.status === 401) {
      const err = await errorOf(res);
      await needKey(session.key ? `${err.message}: enter a valid operator key` : 'This server needs an operator key.');
      return 'again';
    }
    if (!res.ok || !res.body) throw await errorOf(res);
    onState('open');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    /** @type {{ event: string, data: string[], id: string | undefined }} */
    let msg = { event: 'message', data: [], id: undefined };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop() ?? '';
      for (const line of lines) {
        if (line === '') {
          if (msg.data.length > 0) {
            const text = msg.data.join('\n');
            /** @type {unknown} */
            let data = text;
            try {
              data = JSON.parse(text);
            } catch {
              /* not JSON: pass the text */
            }
            if (msg.id !== undefined) lastId = msg.id;
            if (!closed) onEvent({ event: msg.event, data, id: msg.id });
          }
          msg = { event: 'message', data: [], id: undefined };
          continue;
        }
        if (line.startsWith(':')) continue;
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'event') msg.event = val;
        else if (field === 'data') msg.data.push(val);
        else if (field === 'id') msg.id = val;
        else if (field === 'retry' && /^\d+$/.test(val)) retryMs = Number(val);
      }
    }
  }

  (async () => {
    while (!closed) {
      try {
        if ((await once()) === 'again') continue;
      } catch (e) {
        if (closed || /** @type {{ name?: string } | undefined} */ (e)?.name === 'AbortError') break;
        if (e instanceof ApiError && e.status >= 400 && e.status < 500 && e.status !== 429) {
          onState('error', e);
          break;
        }
      }
      if (closed || !reconnect()) break;
      onState('reconnecting');
      await new Promise((r) => setTimeout(r, retryMs));
    }
    if (!closed) onState('closed');
  })();

  return {
    close() {
      closed = true;
      controller.abort();
    },
  };
}
