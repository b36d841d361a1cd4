// The dashboard's API client: JSON over fetch with the operator key of this browser session, and
// Server-Sent Events over fetch streaming (EventSource cannot send an Authorization header).

const KEY = 'toolgraph.key';

export class ApiError extends Error {
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
  set(key) {
    sessionStorage.setItem(KEY, key);
  },
  clear() {
    sessionStorage.removeItem(KEY);
  },
};

let askKey = null;
let asking = null;

/**
 * Sets what to do on a 401: `ask(message)` shows the key form and resolves once a new key is stored.
 * Requests that meet a 401 wait for it, then retry.
 */
export function onUnauthorized(ask) {
  askKey = ask;
}

function needKey(message) {
  if (!askKey) return Promise.reject(new ApiError(401, 'unauthorized', message));
  asking ??= askKey(message).finally(() => (asking = null));
  return asking;
}

function headers(extra = {}) {
  const h = { accept: 'application/json', ...extra };
  const key = session.key;
  if (key) h.authorization = `Bearer ${key}`;
  return h;
}

async function errorOf(res) {
  let body;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  const e = body?.error;
  return new ApiError(res.status, e?.code ?? 'http_error', e?.message ?? `${res.status} ${res.statusText}`, e?.details);
}

/** `api('/v1/runs', { method, body, signal })` → the parsed JSON; throws ApiError. */
export async function api(path, { method = 'GET', body, signal, as = 'json' } = {}) {
  for (let tries = 0; ; tries++) {
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
 */
export function stream(path, { onEvent, onState = () => {}, reconnect = () => true, lastEventId } = {}) {
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
    let msg = { event: 'message', data: [], id: undefined };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop();
      for (const line of lines) {
        if (line === '') {
          if (msg.data.length > 0) {
            const text = msg.data.join('\n');
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
        if (closed || e?.name === 'AbortError') break;
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
