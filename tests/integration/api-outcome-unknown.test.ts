/**
 * `outcome_unknown` over HTTP (DESIGN §4 Timeouts, §11): an attempt of a non-idempotent http tool that
 * was sent and got no answer — it timed out, or the tool's server dropped the connection mid-call —
 * fails `outcome_unknown` (not `timeout`, not a plain `tool_error`) and is sent once; an idempotent tool
 * that times out is retried as before; a connection refused (nothing sent) stays a `tool_error`. The
 * model-format results say that the outcome is unknown. A real tool server on 127.0.0.1.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type Api } from '../helpers/server.js';

let server: Server;
let api: Api;
const seen: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { callId: string; attempt: number };
      seen.push(`${req.url} ${body.callId} ${body.attempt}`);
      if (req.url === '/drop') res.socket?.destroy();
      else if (req.url === '/flaky' && body.attempt === 1)
        return; // never answers: times out
      else if (req.url !== '/slow') res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // A port nobody listens on: a connection refused, so nothing was sent.
  const gone = createServer();
  await new Promise<void>((r) => gone.listen(0, '127.0.0.1', () => r()));
  const closedPort = (gone.address() as AddressInfo).port;
  await new Promise<void>((r) => gone.close(() => r()));
  const tool = (name: string, path: string, extra = '') => `
  - name: ${name}
    reads: []
    writes: []
    timeoutMs: 300
    executor: { kind: http, url: "${url}${path}" }${extra}`;
  api = await startApi({
    yaml: `tools:${tool('send_mail', '/slow')}${tool('charge_card', '/drop')}${tool('refused', '', '')}${tool(
      'read_page',
      '/flaky',
      `
    idempotent: true
    retry: { attempts: 3, backoffMs: 10, maxBackoffMs: 10 }`,
    )}
defaults: { failure: partial }
`.replace(`url: "${url}"`, `url: "http://127.0.0.1:${closedPort}/closed"`),
  });
});

afterAll(async () => {
  await api?.close();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

describe('outcome_unknown', () => {
  it('a timed-out or dropped non-idempotent call fails outcome_unknown, sent once; an idempotent one is retried; a refused one is a tool_error', async () => {
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'mail', tool: 'send_mail', args: {} },
        { id: 'card', tool: 'charge_card', args: {} },
        { id: 'page', tool: 'read_page', args: {} },
        { id: 'nope', tool: 'refused', args: {} },
      ],
      waitMs: 20_000,
    });
    expect(res.status).toBe(201);
    const byId = Object.fromEntries(res.body.calls.map((c: { id: string }) => [c.id, c]));
    expect(byId.mail).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'outcome_unknown', details: { cause: 'timeout' } } });
    expect(byId.card).toMatchObject({
      status: 'failed',
      attempts: 1,
      error: { code: 'outcome_unknown', details: { cause: 'tool_error' } },
    });
    expect(byId.page).toMatchObject({ status: 'succeeded', attempts: 2 });
    expect(byId.nope).toMatchObject({ status: 'failed', error: { code: 'tool_error' } });
    expect(seen.filter((s) => s.includes(' mail '))).toEqual(['/slow mail 1']);
    expect(seen.filter((s) => s.includes(' card '))).toEqual(['/drop card 1']);
    expect(seen.filter((s) => s.includes(' page '))).toEqual(['/flaky page 1', '/flaky page 2']);

    const openai = await api.get(`/v1/runs/${res.body.id}/messages?format=openai`);
    const mail = openai.body.find((m: { tool_call_id: string }) => m.tool_call_id === 'mail');
    expect(mail.content).toMatch(/^Error: the outcome of send_mail is unknown: .*may or may not have taken effect/);
    const anthropic = await api.get(`/v1/runs/${res.body.id}/messages?format=anthropic`);
    const card = anthropic.body[0].content.find((b: { tool_use_id: string }) => b.tool_use_id === 'card');
    expect(card).toMatchObject({ is_error: true, content: expect.stringContaining('outcome of charge_card is unknown') });
  });
});
