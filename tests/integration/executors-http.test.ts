// HTTP executor against a real node:http server on 127.0.0.1: request shape, status mapping,
// Retry-After, network errors, and that cancel and timeout really close the server's connection.
import { describe, it, expect, beforeAll, afterAll, beforeEach } from 'vitest';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHttpExecutor, parseRetryAfter } from '../../src/executors/http.js';
import type { ExecuteRequest } from '../../src/executors/types.js';
import type { ToolManifest } from '../../src/core/tool.js';

interface Seen {
  method?: string;
  url?: string;
  headers: IncomingMessage['headers'];
  body: unknown;
}
type Handler = (req: IncomingMessage, res: ServerResponse, seen: Seen) => void;

let server: Server;
let base = '';
let handler: Handler = (_req, res) => res.end();
let seen: Seen[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const s: Seen = { method: req.method, url: req.url, headers: req.headers, body: text ? JSON.parse(text) : undefined };
      seen.push(s);
      handler(req, res, s);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  seen = [];
});

const executor = createHttpExecutor();

function request(
  url: string,
  opts: { attempt?: number; signal?: AbortSignal; timeoutMs?: number; headers?: Record<string, string> } = {},
): ExecuteRequest {
  const timeoutMs = opts.timeoutMs ?? 5000;
  const tool: ToolManifest = {
    name: 'deploy',
    scope: 'tenant',
    risk: 'write',
    idempotent: true,
    timeoutMs,
    after: [],
    requires: [],
    executor: { kind: 'http', url, headers: opts.headers },
  };
  return {
    runId: 'run_1',
    callId: 'c1',
    tool,
    args: { image: 'x' },
    attempt: opts.attempt ?? 1,
    signal: opts.signal ?? new AbortController().signal,
    timeoutMs,
  };
}

function reply(status: number, body = '', headers: Record<string, string> = {}): Handler {
  return (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(body);
  };
}

/** A handler that never answers; resolves `received` on the request and `closed` when its connection closes. */
function hang() {
  let onReceived!: () => void;
  let onClosed!: (how: string) => void;
  const received = new Promise<void>((r) => (onReceived = r));
  const closed = new Promise<string>((r) => (onClosed = r));
  const h: Handler = (req, res) => {
    req.on('aborted', () => onClosed('aborted'));
    res.on('close', () => onClosed(res.writableFinished ? 'finished' : 'closed'));
    onReceived();
  };
  return { handler: h, received, closed };
}

describe('http executor', () => {
  it('posts the attempt as JSON with an Idempotency-Key stable across attempts', async () => {
    handler = reply(200, JSON.stringify({ deployed: true }));
    const first = await executor.execute(request(`${base}/deploy`, { headers: { authorization: 'Bearer t' } }));
    const second = await executor.execute(request(`${base}/deploy`, { attempt: 2 }));
    expect(first).toEqual({ ok: true, output: { deployed: true } });
    expect(second).toEqual({ ok: true, output: { deployed: true } });
    expect(seen).toHaveLength(2);
    expect(seen[0]).toMatchObject({
      method: 'POST',
      url: '/deploy',
      body: { runId: 'run_1', callId: 'c1', tool: 'deploy', args: { image: 'x' }, attempt: 1 },
    });
    const [one, two] = seen as [(typeof seen)[number], (typeof seen)[number]];
    expect(one.headers['content-type']).toBe('application/json');
    expect(one.headers['idempotency-key']).toBe('run_1/c1');
    expect(one.headers.authorization).toBe('Bearer t');
    expect(two.body).toMatchObject({ attempt: 2 });
    expect(two.headers['idempotency-key']).toBe('run_1/c1');
  });

  it('an empty 2xx body is null', async () => {
    handler = reply(204);
    expect(await executor.execute(request(base))).toEqual({ ok: true, output: null });
    handler = reply(200, '');
    expect(await executor.execute(request(base))).toEqual({ ok: true, output: null });
  });

  it('a non-JSON 2xx body is a permanent tool_error', async () => {
    handler = reply(200, '<html>oops</html>');
    const result = await executor.execute(request(base));
    expect(result).toMatchObject({
      ok: false,
      error: { code: 'tool_error', details: { status: 200, body: '<html>oops</html>' } },
      retryable: false,
    });
  });

  it.each([500, 503, 429, 408])('%i is retryable and honours Retry-After in seconds', async (status) => {
    handler = reply(status, '{"error":"busy"}', { 'retry-after': '3' });
    const result = await executor.execute(request(base));
    expect(result).toMatchObject({
      ok: false,
      error: { code: 'tool_error', details: { status, body: '{"error":"busy"}' } },
      retryable: true,
      retryAfterMs: 3000,
    });
  });

  it('backpressure (DESIGN §4): a 429, or a 503 with Retry-After, asks to pause the tool; a 500 or a bare 503 does not', async () => {
    handler = reply(429, '', { 'retry-after': '1' });
    expect(await executor.execute(request(base))).toMatchObject({ retryAfterMs: 1000, pauseMs: 1000, pauseStatus: 429 });
    handler = reply(429, '');
    expect(await executor.execute(request(base))).toMatchObject({ pauseMs: 1000, pauseStatus: 429 });
    handler = reply(503, '', { 'retry-after': '2' });
    expect(await executor.execute(request(base))).toMatchObject({ retryAfterMs: 2000, pauseMs: 2000, pauseStatus: 503 });
    for (const [status, headers] of [
      [503, {}],
      [500, { 'retry-after': '2' }],
    ] as const) {
      handler = reply(status, '', headers);
      const r = await executor.execute(request(base));
      expect(r.ok === false && r.pauseMs).toBe(undefined);
    }
  });

  it('Retry-After as an HTTP date', async () => {
    handler = reply(503, '', { 'retry-after': new Date(Date.now() + 10_000).toUTCString() });
    const result = await executor.execute(request(base));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.retryable).toBe(true);
    expect(result.retryAfterMs).toBeGreaterThan(7_000);
    expect(result.retryAfterMs).toBeLessThanOrEqual(10_000);
    expect(parseRetryAfter('garbage')).toBeUndefined();
    expect(parseRetryAfter(null)).toBeUndefined();
    expect(parseRetryAfter(new Date(0).toUTCString())).toBe(0);
  });

  it.each([400, 404])('%i is a permanent tool_error with status and body', async (status) => {
    handler = reply(status, '{"error":"bad"}', { 'retry-after': '3' });
    const result = await executor.execute(request(base));
    expect(result).toEqual({
      ok: false,
      error: { code: 'tool_error', message: expect.stringContaining(String(status)), details: { status, body: '{"error":"bad"}' } },
      retryable: false,
    });
  });

  it('truncates a long error body to 2 KB', async () => {
    handler = reply(400, 'x'.repeat(100_000));
    const result = await executor.execute(request(base));
    expect(result).toMatchObject({ ok: false, retryable: false });
    if (result.ok) return;
    expect((result.error.details as { body: string }).body).toBe('x'.repeat(2048));
  });

  it('connection refused is a retryable tool_error', async () => {
    const closedServer = createServer();
    await new Promise<void>((resolve) => closedServer.listen(0, '127.0.0.1', resolve));
    const port = (closedServer.address() as AddressInfo).port;
    await new Promise((resolve) => closedServer.close(resolve));
    const result = await executor.execute(request(`http://127.0.0.1:${port}/`));
    expect(result).toMatchObject({ ok: false, error: { code: 'tool_error', details: { cause: 'ECONNREFUSED' } }, retryable: true });
  });

  it('cancel aborts the request and the server sees the connection close', async () => {
    const h = hang();
    handler = h.handler;
    const controller = new AbortController();
    const pending = executor.execute(request(base, { signal: controller.signal }));
    await h.received;
    controller.abort();
    expect(await pending).toMatchObject({ ok: false, error: { code: 'cancelled' }, retryable: false });
    expect(await h.closed).not.toBe('finished');
  });

  it('timeout aborts the request and the server sees the connection close', async () => {
    const h = hang();
    handler = h.handler;
    const pending = executor.execute(request(base, { timeoutMs: 200 }));
    await h.received;
    expect(await pending).toMatchObject({ ok: false, error: { code: 'timeout' }, retryable: true });
    expect(await h.closed).not.toBe('finished');
  });

  it('an invalid url is a permanent tool_error', async () => {
    expect(await executor.execute(request('not a url'))).toMatchObject({ ok: false, error: { code: 'tool_error' }, retryable: false });
  });
});
