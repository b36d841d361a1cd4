/**
 * Issue #20 at the HTTP edge, against `toolgraph serve` as a child process and raw sockets:
 * - every answer of Node's HTTP parser (431 for a 20 kB header; 400 for conflicting or negative
 *   Content-Length, a CR inside a header, a garbage request line, an invalid path) and a request with
 *   no Host carry `{ "error": { "code", "message" } }`;
 * - a 100 MB upload announced with `Expect: 100-continue` gets a 413, not `100 Continue`;
 * - `HEAD /v1/stream` ends; `POST /v1/plan` of too many calls is a 413, too many tags a 400;
 * - open mode answers 403 `forbidden_host` unless Host is a loopback name or address;
 * - with keys, /metrics needs an operator key and /healthz gives details only to one.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type ServerChild } from '../helpers/child.js';

const TOOLS = `tools:
  - name: echo
    risk: read
    idempotent: true
    reads: []
    executor: { kind: builtin, name: echo }
`;
const KEYS = `auth:
  keys:
    - { key: op-key-123, tenant: ops, role: operator }
    - { key: agent-key-123, tenant: acme, role: agent }
`;

let dir: string;
let open: ServerChild;
let keyed: ServerChild;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'tg-harden-http-'));
  writeFileSync(path.join(dir, 'open.yaml'), TOOLS);
  writeFileSync(path.join(dir, 'keyed.yaml'), TOOLS + KEYS);
  [open, keyed] = await Promise.all([
    startServer({ config: path.join(dir, 'open.yaml'), db: path.join(dir, 'open.db') }),
    startServer({ config: path.join(dir, 'keyed.yaml'), db: path.join(dir, 'keyed.db') }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([open?.kill9(), keyed?.kill9()]);
  rmSync(dir, { recursive: true, force: true });
});

interface RawAnswer {
  status: number;
  head: string;
  body: string;
  /** Whether the server closed the connection within the wait. */
  closed: boolean;
}

/** Writes bytes on a fresh connection; reads until the server closes it or `waitMs` passes. */
function raw(port: number, bytes: string | Buffer, waitMs = 5000): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    let closed = false;
    s.setEncoding('utf8');
    s.on('data', (d: string) => (out += d));
    s.on('error', () => {});
    const done = () => {
      clearTimeout(timer);
      s.destroy();
      const m = /^HTTP\/1\.1 (\d{3})[^\r]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/.exec(out);
      if (!m) return reject(new Error(`no HTTP answer: ${JSON.stringify(out.slice(0, 300))}`));
      resolve({ status: Number(m[1]), head: (m[2] as string).toLowerCase(), body: m[3] as string, closed });
    };
    const timer = setTimeout(done, waitMs);
    s.on('close', () => {
      closed = true;
      done();
    });
    s.write(bytes);
  });
}

function errorOf(a: RawAnswer): { code: string; message: string } {
  expect(a.head).toContain('content-type: application/json');
  const body = JSON.parse(a.body) as { error: { code: string; message: string } };
  expect(Object.keys(body)).toEqual(['error']);
  expect(typeof body.error.code).toBe('string');
  expect(body.error.message.length).toBeGreaterThan(0);
  return body.error;
}

describe("the HTTP parser's answers carry the error body", () => {
  const cases: [string, string, number, string][] = [
    ['a 20 kB header', `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'headers_too_large'],
    [
      'two different Content-Lengths',
      'POST /v1/plan HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello',
      400,
      'invalid_request',
    ],
    ['a negative Content-Length', 'POST /v1/plan HTTP/1.1\r\nHost: localhost\r\nContent-Length: -1\r\n\r\n', 400, 'invalid_request'],
    ['a CR inside a header', 'GET /healthz HTTP/1.1\r\nHost: local\rhost\r\n\r\n', 400, 'invalid_request'],
    ['a garbage request line', 'garbage\r\n\r\n', 400, 'invalid_request'],
    ['an invalid path', 'GET /hea lthz HTTP/1.1\r\nHost: localhost\r\n\r\n', 400, 'invalid_request'],
    [
      'Content-Length with Transfer-Encoding',
      'POST /v1/plan HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      400,
      'invalid_request',
    ],
  ];
  for (const [what, bytes, status, code] of cases) {
    it(`${what}: ${status} ${code}, then the connection closes`, async () => {
      const a = await raw(open.port, bytes);
      expect(a.status).toBe(status);
      expect(errorOf(a).code).toBe(code);
      expect(a.closed).toBe(true);
    });
  }

  it('no Host header: 400 with the body, in either mode', async () => {
    for (const port of [open.port, keyed.port]) {
      const a = await raw(port, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n');
      expect(a.status).toBe(400);
      expect(errorOf(a)).toMatchObject({ code: 'invalid_request', message: 'a Host header is required' });
    }
  });

  it('a 100 MB upload with Expect: 100-continue gets a 413 before any body is sent, not 100 Continue', async () => {
    const a = await raw(
      open.port,
      'POST /v1/runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\nExpect: 100-continue\r\n\r\n',
    );
    expect(a.status).toBe(413);
    expect(errorOf(a).code).toBe('payload_too_large');
    expect(a.closed).toBe(true);
  });

  it('a small body with Expect: 100-continue gets 100 Continue and is served', async () => {
    const body = JSON.stringify({ calls: [{ id: 'a', tool: 'echo' }] });
    const a = await raw(
      open.port,
      `POST /v1/plan HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(a.status).toBe(100);
    expect(a.head).toMatch(/^http\/1\.1 200 ok/m);
    expect(a.body).toContain('"graph"');
  });

  it('HEAD /v1/stream answers at once with the stream headers and no body', async () => {
    const t = Date.now();
    const a = await raw(open.port, 'HEAD /v1/stream HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect(a.status).toBe(200);
    expect(a.head).toContain('content-type: text/event-stream');
    expect(a.body).toBe('');
    expect(Date.now() - t).toBeLessThan(4000);
  });

  it('the server is healthy after all of it', async () => {
    expect((await fetch(`${open.url}/healthz`)).status).toBe(200);
  });
});

describe('caps on a request body', () => {
  it('POST /v1/plan with more calls than limits.maxCallsPerRun is a 413, like /v1/runs', async () => {
    const calls = Array.from({ length: 1001 }, (_, i) => ({ id: `c${i}`, tool: 'echo' }));
    for (const p of ['/v1/plan', '/v1/runs']) {
      const res = await fetch(`${open.url}${p}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ calls }),
      });
      expect(res.status).toBe(413);
      expect(((await res.json()) as any).error).toMatchObject({ code: 'payload_too_large', details: { calls: 1001, max: 1000 } });
    }
    const ok = await fetch(`${open.url}/v1/plan`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ calls: calls.slice(0, 1000) }),
    });
    expect(ok.status).toBe(200);
  });

  it('200,000 calls (6 MB): a short 413, not a plan of them (800,000 made a 95 MB answer in 12.8 s)', async () => {
    const body = JSON.stringify({ calls: Array.from({ length: 200_000 }, (_, i) => ({ id: `c${i}`, tool: 'echo', args: {} })) });
    const res = await fetch(`${open.url}/v1/plan`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(res.status).toBe(413);
    expect((await res.text()).length).toBeLessThan(500);
    expect((await fetch(`${open.url}/healthz`)).status).toBe(200);
  }, 60_000);

  it('more than 64 tags is a 400; more than 16 tag filters too', async () => {
    const tags = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v']));
    const res = await fetch(`${open.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ calls: [{ id: 'a', tool: 'echo' }], tags }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error.code).toBe('invalid_request');
    const q = Array.from({ length: 17 }, (_, i) => `tag=k${i}:v`).join('&');
    expect((await fetch(`${open.url}/v1/runs?${q}`)).status).toBe(400);
    expect((await fetch(`${open.url}/v1/runs?${q.split('&').slice(0, 16).join('&')}`)).status).toBe(200);
  });
});

describe('the Host check (open mode, against DNS rebinding)', () => {
  const loopback = ['localhost', `localhost:${0}`, '127.0.0.1', '127.1.2.3:8080', '[::1]', '[::1]:3000', 'LOCALHOST'];
  const foreign = [
    'evil.example',
    'evil.example:8080',
    'localhost.evil.example',
    '127.0.0.1.evil.example',
    '10.0.0.1',
    '[::2]',
    '0.0.0.0',
    'localhost:80@evil',
  ];
  it('loopback names and addresses pass, with or without a port', async () => {
    for (const host of loopback) {
      const a = await raw(open.port, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      expect([host, a.status]).toEqual([host, 200]);
    }
  });
  it('any other Host is a 403 forbidden_host, on every path', async () => {
    for (const host of foreign) {
      for (const p of ['/healthz', '/v1/runs', '/']) {
        const a = await raw(open.port, `GET ${p} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
        expect([host, p, a.status]).toEqual([host, p, 403]);
        expect(errorOf(a).code).toBe('forbidden_host');
      }
    }
  });
  it('with auth keys any Host is served', async () => {
    const a = await raw(keyed.port, 'GET /healthz HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n');
    expect(a.status).toBe(200);
  });
});

describe('/metrics and /healthz with auth keys', () => {
  const get = (p: string, key?: string) => fetch(`${keyed.url}${p}`, key ? { headers: { authorization: `Bearer ${key}` } } : {});
  it('/metrics: 401 without a key, 403 for an agent, the metrics for an operator', async () => {
    expect((await get('/metrics')).status).toBe(401);
    expect((await get('/metrics', 'wrong')).status).toBe(401);
    const agent = await get('/metrics', 'agent-key-123');
    expect(agent.status).toBe(403);
    expect(((await agent.json()) as any).error.code).toBe('forbidden');
    const op = await get('/metrics', 'op-key-123');
    expect(op.status).toBe(200);
    expect(await op.text()).toContain('toolgraph_');
  });
  it('/healthz: only whether it is up without an operator key; the details with one', async () => {
    for (const key of [undefined, 'wrong', 'agent-key-123']) {
      const res = await get('/healthz', key);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: 'ok' });
    }
    const op = (await (await get('/healthz', 'op-key-123')).json()) as Record<string, unknown>;
    expect(op).toMatchObject({ status: 'ok', activeRuns: 0, runningAttempts: 0 });
  });
  it('in open mode both answer in full', async () => {
    expect(await (await fetch(`${open.url}/healthz`)).json()).toHaveProperty('activeRuns');
    expect((await fetch(`${open.url}/metrics`)).status).toBe(200);
  });
});
