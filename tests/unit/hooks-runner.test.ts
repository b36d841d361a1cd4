/**
 * The hooks config section and the hook runner (DESIGN §14): config errors name the path; the runner
 * against a real node:http server on 127.0.0.1:0 chains hooks in order (a later one sees the args or
 * output an earlier one gave), stops at a deny, review or fail, sends the configured headers, and
 * turns every way a hook can fail (a status, a body that is no decision, a timeout) into its
 * `onError` decision, naming what happened.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/load.js';
import type { HookRequest } from '../../src/core/hooks.js';
import { createHookRunner, readAnswer } from '../../src/hooks/index.js';
import { tool } from '../helpers/catalog.js';

const configError = (yaml: string, env: Record<string, string> = {}): string[] => {
  try {
    parseConfig(yaml, 'test.yaml', { env, baseDir: '/cfg' });
  } catch (e) {
    if (e instanceof ConfigError) return [...e.problems];
    throw e;
  }
  return [];
};

describe('the hooks: section', () => {
  it('takes a hook with its defaults: every call, 5000 ms, onError deny, a name from its place', () => {
    const c = parseConfig(
      'hooks:\n  - { on: before_call, url: "http://127.0.0.1:9100/h", headers: { Authorization: "env:HOOK_KEY" } }\n  - { on: after_call, name: redact, match: { tool: "fs__*" }, module: ./hooks/r.js, onError: allow, timeoutMs: 200 }\n',
      't.yaml',
      {
        env: { HOOK_KEY: 'Bearer k' },
        baseDir: '/cfg',
      },
    );
    expect(c.hooks).toEqual([
      {
        on: 'before_call',
        name: 'hooks[0]',
        match: {},
        url: 'http://127.0.0.1:9100/h',
        headers: { Authorization: 'Bearer k' },
        timeoutMs: 5000,
        onError: 'deny',
      },
      { on: 'after_call', name: 'redact', match: { tool: 'fs__*' }, module: '/cfg/hooks/r.js', timeoutMs: 200, onError: 'allow' },
    ]);
  });

  it.each([
    [
      'neither url nor module',
      'hooks: [{ on: before_call }]',
      'hooks[0]: expected either url (an HTTP endpoint) or module (a worker module), got neither',
    ],
    [
      'both',
      'hooks: [{ on: before_call, url: "http://h/x", module: ./m.js }]',
      'hooks[0]: expected either url (an HTTP endpoint) or module (a worker module), got both',
    ],
    [
      'an unknown event',
      'hooks: [{ on: during_call, url: "http://h/x" }]',
      'hooks[0].on: expected one of before_call, after_call, got "during_call"',
    ],
    [
      'a bad onError',
      'hooks: [{ on: before_call, url: "http://h/x", onError: ignore }]',
      'hooks[0].onError: expected one of deny, allow, got "ignore"',
    ],
    [
      'a URL that is not http',
      'hooks: [{ on: before_call, url: "ftp://h/x" }]',
      'hooks[0].url: expected an http:// or https:// URL, got "ftp://h/x"',
    ],
    [
      'headers with a module',
      'hooks: [{ on: before_call, module: ./m.js, headers: { a: b } }]',
      'hooks[0].headers: expected headers only with url, got them with module',
    ],
    [
      'a timeout of 0',
      'hooks: [{ on: before_call, url: "http://h/x", timeoutMs: 0 }]',
      'hooks[0].timeoutMs: expected an integer from 1 to 600000, got 0',
    ],
    [
      'an unknown key',
      'hooks: [{ on: before_call, url: "http://h/x", retry: 3 }]',
      'hooks[0].retry: unknown key, expected one of on, name, match, url, headers, module, timeoutMs, onError',
    ],
    [
      'a name used twice',
      'hooks: [{ on: before_call, name: a, url: "http://h/x" }, { on: after_call, name: a, url: "http://h/y" }]',
      'hooks[1].name: expected a name not used by hooks[0], got "a"',
    ],
    [
      'an unset variable',
      'hooks: [{ on: before_call, url: "http://h/x", headers: { k: "env:NOPE" } }]',
      'hooks[0].headers.k: expected environment variable NOPE to be set (env:NOPE), got nothing',
    ],
  ])('refuses %s, naming the path', (_what, yaml, problem) => {
    expect(configError(yaml)).toEqual([problem]);
  });
});

describe('readAnswer', () => {
  it('reads before_call and after_call answers, and says why anything else is not one', () => {
    expect(readAnswer('before_call', {})).toEqual({ decision: 'allow' });
    expect(readAnswer('before_call', { decision: 'deny', reason: 'no', args: { a: 1 } })).toEqual({ decision: 'deny', reason: 'no' });
    expect(readAnswer('before_call', { args: { a: 1 } })).toEqual({ decision: 'allow', args: { a: 1 } });
    expect(readAnswer('before_call', { decision: 'maybe' })).toBe('`decision` is not one of allow, deny, review');
    expect(readAnswer('before_call', { args: [1] })).toBe('`args` is not a JSON object');
    expect(readAnswer('before_call', 'allow')).toBe('the answer is not a JSON object');
    expect(readAnswer('after_call', {})).toEqual({ decision: 'allow' });
    expect(readAnswer('after_call', { output: null })).toEqual({ decision: 'replace', output: null });
    expect(readAnswer('after_call', { fail: { message: 'x' } })).toEqual({ decision: 'fail', fail: { message: 'x' } });
    expect(readAnswer('after_call', { fail: 'x' })).toBe('`fail` is not { "message": string }');
    expect(readAnswer('after_call', { reason: 5 })).toBe('`reason` is not a string');
  });
});

describe('the runner over HTTP', () => {
  let server: Server;
  let base = '';
  const seen: { path: string; headers: IncomingMessage['headers']; body: any }[] = [];
  /** Requests to /gate, held until the test answers them. */
  const gated: { callId: string; answer: () => void }[] = [];
  const answers: Record<string, (body: any) => { status: number; text: string } | 'hold' | 'gate'> = {
    '/allow-rewrite': (b) => ({ status: 200, text: JSON.stringify({ decision: 'allow', args: { ...b.args, n: b.args.n + 1 } }) }),
    '/deny': () => ({ status: 200, text: JSON.stringify({ decision: 'deny', reason: 'no' }) }),
    '/status': () => ({ status: 503, text: 'down' }),
    '/notjson': () => ({ status: 200, text: '<html>' }),
    '/empty': () => ({ status: 204, text: '' }),
    '/hold': () => 'hold',
    '/gate': () => 'gate',
    '/redact': (b) => ({ status: 200, text: JSON.stringify({ output: { seen: b.output, by: 'redact' } }) }),
  };

  beforeAll(async () => {
    server = createServer(async (req, res) => {
      let text = '';
      for await (const c of req) text += c;
      const body = JSON.parse(text);
      seen.push({ path: req.url as string, headers: req.headers, body });
      const a = answers[req.url as string]?.(body) ?? { status: 404, text: '' };
      if (a === 'hold') return;
      if (a === 'gate') {
        gated.push({ callId: body.callId, answer: () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}') });
        return;
      }
      res.writeHead(a.status, { 'content-type': 'application/json' }).end(a.text);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const request = (on: HookRequest['on'], hooks: number[], extra: Partial<HookRequest> = {}): HookRequest => ({
    on,
    runId: 'run_1',
    callId: 'c1',
    index: 0,
    tenant: 'acme',
    tool: tool('t'),
    args: { n: 1 },
    hooks,
    ...extra,
  });
  const hook = (p: string, more: Record<string, unknown> = {}) => ({
    on: 'before_call' as const,
    name: p.slice(1),
    match: {},
    url: `${base}${p}`,
    timeoutMs: 2000,
    onError: 'deny' as const,
    ...more,
  });

  it('chains in order: the next hook sees the args the last gave; a deny ends the chain; headers are sent', async () => {
    const hooks = [
      hook('/allow-rewrite', { headers: { authorization: 'Bearer k' } }),
      hook('/allow-rewrite'),
      hook('/deny'),
      hook('/allow-rewrite'),
    ];
    let t = 1000;
    const runner = createHookRunner(hooks, { clock: () => (t += 5) });
    const from = seen.length;
    const out = await runner.run(request('before_call', [0, 1, 2, 3]));
    expect(out.map((d) => [d.hook, d.decision, d.args?.n])).toEqual([
      ['allow-rewrite', 'allow', 2],
      ['allow-rewrite', 'allow', 3],
      ['deny', 'deny', undefined],
    ]);
    expect(out.map((d) => d.startedAt)).toEqual([1005, 1010, 1015]);
    const sent = seen.slice(from);
    expect(sent.map((s) => s.body.args.n)).toEqual([1, 2, 3]);
    expect(sent[0]?.body).toEqual({ on: 'before_call', runId: 'run_1', callId: 'c1', tool: 't', tenant: 'acme', args: { n: 1 } });
    expect(sent[0]?.headers.authorization).toBe('Bearer k');
    expect(sent[0]?.headers['content-type']).toBe('application/json');
    await runner.close();
  });

  it('after_call: a later hook sees the output an earlier one replaced', async () => {
    const hooks = [hook('/redact', { on: 'after_call' }), hook('/redact', { on: 'after_call' })];
    const runner = createHookRunner(hooks);
    const out = await runner.run(request('after_call', [0, 1], { status: 'succeeded', output: 'raw' }));
    expect(out.map((d) => d.output)).toEqual([
      { seen: 'raw', by: 'redact' },
      { seen: { seen: 'raw', by: 'redact' }, by: 'redact' },
    ]);
    await runner.close();
  });

  it.each([
    ['/status', 'deny', 'hook status failed: HTTP 503 from ORIGIN/status: down'],
    ['/notjson', 'deny', 'hook notjson failed: HTTP 200 from ORIGIN/notjson: the answer is not JSON'],
    ['/hold', 'deny', 'hook hold failed: timed out after 150 ms'],
    ['/status', 'allow', 'hook status failed: HTTP 503 from ORIGIN/status: down'],
  ])('a hook at %s under onError %s decides so, naming what happened', async (p, onError, error) => {
    const runner = createHookRunner([hook(p, { timeoutMs: 150, onError })]);
    const [d] = await runner.run(request('before_call', [0]));
    const message = error.replace('ORIGIN', base);
    expect(d).toMatchObject(
      onError === 'deny' ? { decision: 'deny', reason: message, error: message } : { decision: 'allow', error: message },
    );
    expect(d?.reason === undefined || onError === 'deny').toBe(true);
    await runner.close();
  });

  it('an empty 2xx answer allows; an after_call hook that fails under deny fails the call', async () => {
    const runner = createHookRunner([hook('/empty'), hook('/status', { on: 'after_call' })]);
    expect((await runner.run(request('before_call', [0])))[0]).toMatchObject({ decision: 'allow' });
    expect((await runner.run(request('after_call', [1], { status: 'succeeded', output: 1 })))[0]).toMatchObject({
      decision: 'fail',
      fail: { message: `hook status failed: HTTP 503 from ${base}/status: down` },
    });
    await runner.close();
  });

  it('limits.hooksInFlight: at most that many requests run at once, reached; the rest wait their turn in order; all are answered', async () => {
    const runner = createHookRunner([hook('/gate')], { maxInFlight: 3 });
    const runs = Array.from({ length: 8 }, (_, i) => runner.run(request('before_call', [0], { callId: `c${i}` })));
    const served: string[] = [];
    let most = 0;
    while (served.length < 8) {
      const expected = Math.min(3, 8 - served.length);
      const deadline = Date.now() + 5000;
      while (gated.length < expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      // Nothing more arrives beyond the bound, even given time.
      await new Promise((r) => setTimeout(r, 20));
      most = Math.max(most, gated.length);
      expect(gated.length).toBe(expected);
      expect(runner.inFlight).toBe(expected);
      const first = gated.shift() as (typeof gated)[number];
      served.push(first.callId);
      first.answer();
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(most).toBe(3);
    expect(served).toEqual(['c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7']);
    for (const r of await Promise.all(runs)) expect(r).toMatchObject([{ decision: 'allow' }]);
    expect(runner.inFlight).toBe(0);
    await runner.close();
  });

  it('an abort ends a running hook at once, by its onError', async () => {
    const runner = createHookRunner([hook('/hold', { timeoutMs: 60_000 })]);
    const stop = new AbortController();
    const pending = runner.run(request('before_call', [0]), stop.signal);
    await new Promise((r) => setImmediate(r));
    stop.abort();
    expect((await pending)[0]).toMatchObject({ decision: 'deny', error: 'hook hold failed: aborted' });
    await runner.close();
  });
});
