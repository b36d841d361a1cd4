/**
 * Hooks end to end (DESIGN §14): a real toolgraph API (SQLite file, Fastify on 127.0.0.1:0) whose
 * config points its hooks at a hook server the test starts (a real node:http server, answering under
 * the test's control), and a worker-module hook on disk. Covers deny, review, rewrite, the escape of
 * resource keys, redaction seen by a dependent, failing a succeeded call, a timeout under each
 * `onError`, a module hook, the metrics and the dashboard's timeline, and the replay of a recorded run
 * with hooks, which calls no hook (the hook server is gone by then); and the README's guardrail example,
 * run as written.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/core/events.js';
import { iso } from '../../src/core/view.js';
import type { Recording } from '../../src/contract/recording.js';
import { replayRecording } from '../../src/replay/replay.js';
import { runCli } from '../helpers/cli.js';
import { startApi, type Api } from '../helpers/server.js';
import { ToolServer, type ToolRequest } from '../helpers/toolserver.js';

const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-hooks-'));
const MODULE = path.join(dir, 'guard.mjs');

let hs: ToolServer;
let api: Api;

const body = (r: ToolRequest) =>
  r.body as unknown as {
    on: string;
    runId: string;
    callId: string;
    tool: string;
    tenant: string;
    args: Record<string, unknown>;
    status?: string;
    output?: unknown;
  };
const hookCalls = (runId: string, p?: string) => hs.requests.filter((r) => body(r).runId === runId && (p === undefined || r.path === p));

function config(base: string): string {
  return `
tools:
  - name: write_file
    input: { type: object, properties: { path: { type: string } }, required: [path] }
    reads: []
    writes: ["file:{path}"]
    executor: { kind: builtin, name: echo }
  - name: read_secret
    reads: ["vault:{name}"]
    writes: []
    executor: { kind: http, url: ${base}/vault }
  - name: use
    reads: []
    writes: []
    executor: { kind: builtin, name: echo }
  - name: slow_deny
    reads: []
    writes: []
    executor: { kind: builtin, name: echo }
  - name: slow_allow
    reads: []
    writes: []
    executor: { kind: builtin, name: echo }
  - name: slow_after
    reads: []
    writes: []
    executor: { kind: builtin, name: echo }
  - name: mod_write
    reads: []
    writes: ["file:{path}"]
    executor: { kind: builtin, name: echo }
hooks:
  - { on: before_call, name: guard, match: { tool: write_file }, url: ${base}/before }
  - { on: after_call, name: redact, match: { tool: "read_*" }, url: ${base}/after }
  - { on: after_call, name: audit, match: { tool: use }, url: ${base}/after }
  - { on: before_call, name: slow-deny, match: { tool: slow_deny }, url: ${base}/hold, timeoutMs: 300, onError: deny }
  - { on: before_call, name: slow-allow, match: { tool: slow_allow }, url: ${base}/hold, timeoutMs: 300, onError: allow }
  - { on: after_call, name: slow-after, match: { tool: slow_after }, url: ${base}/hold, timeoutMs: 300, onError: deny }
  - { on: before_call, name: module-guard, match: { tool: mod_write }, module: ./guard.mjs, timeoutMs: 10000 }
`;
}

beforeAll(async () => {
  writeFileSync(
    MODULE,
    `export default async function guard(req) {
  const p = String(req.args.path);
  return p.startsWith('/srv/') ? { decision: 'allow' } : { decision: 'deny', reason: 'module: outside /srv: ' + p };
}
`,
  );
  hs = await ToolServer.start();
  const ok = (b: unknown) => ({ status: 200, body: b });
  // The guardrail: writes outside /srv are denied; some calls ask for review or new args.
  hs.on('/before', (r) => {
    const a = body(r).args;
    if (a.ask === 'review') return ok({ decision: 'review', reason: 'a human should look' });
    if (a.ask === 'rewrite') return ok({ decision: 'allow', args: { path: a.to } });
    const p = String(a.path);
    return ok(p.startsWith('/srv/') ? { decision: 'allow' } : { decision: 'deny', reason: `writes outside /srv: ${p}` });
  });
  // Redaction (or rejection) of what read_secret returned; `use` calls are only audited.
  hs.on('/after', (r) => {
    const b = body(r);
    if (b.tool === 'use') return ok({});
    if (b.args.name === 'forbidden') return ok({ fail: { message: 'this secret may not leave the vault' } });
    const out = b.output as { token: string; user: string };
    return ok({ output: { ...out, token: '[redacted]' } });
  });
  hs.on('/hold', () => 'hold');
  hs.on('/vault', () => ({ status: 200, body: { token: 's3cret-7f3a', user: 'deploy' } }));
  api = await startApi({ yaml: config(hs.base), dir });
});

afterAll(async () => {
  await api?.close();
  await hs?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function run(calls: unknown[]): Promise<any> {
  const res = await api.post('/v1/runs', { calls, waitMs: 20_000 });
  expect(res.status).toBe(201);
  return res.body.status === 'running' ? api.settled(res.body.id) : res.body;
}

const callOf = (run: any, id: string) => run.calls.find((c: any) => c.id === id);
const events = (runId: string): Promise<RunEvent[]> => api.store.events(runId);

describe('before_call over HTTP', () => {
  it('deny: a write outside /srv fails hook_denied with the reason, before it runs', async () => {
    const r = await run([
      { id: 'in', tool: 'write_file', args: { path: '/srv/app/a.txt' } },
      { id: 'out', tool: 'write_file', args: { path: '/etc/passwd' } },
    ]);
    expect(r.status).toBe('partial');
    expect(callOf(r, 'in').status).toBe('succeeded');
    expect(callOf(r, 'out')).toMatchObject({
      status: 'failed',
      attempts: 0,
      error: { code: 'hook_denied', message: 'out: writes outside /srv: /etc/passwd', details: { hook: 'guard' } },
    });
    // What the hook got: the call, its tool and tenant, and its resolved args.
    const sent = body(hookCalls(r.id, '/before').find((q) => body(q).callId === 'out') as ToolRequest);
    expect(sent).toEqual({
      on: 'before_call',
      runId: r.id,
      callId: 'out',
      tool: 'write_file',
      tenant: 'default',
      args: { path: '/etc/passwd' },
    });
    const hooks = (await events(r.id)).filter((e) => e.type === 'call.hook');
    expect(hooks.map((e) => [e.callId, e.data.decision])).toEqual([
      ['in', 'allow'],
      ['out', 'deny'],
    ]);
  });

  it('review: the call waits for a human; approved, it runs, and the hook is not asked again', async () => {
    const res = await api.post('/v1/runs', { calls: [{ id: 'w', tool: 'write_file', args: { path: '/srv/app/r.txt', ask: 'review' } }] });
    const runId = res.body.id as string;
    let items: any[] = [];
    for (let i = 0; i < 200 && items.length === 0; i++) {
      await api.service.engine.wait(runId, 10);
      items = (await api.get(`/v1/reviews?status=pending&runId=${runId}`)).body.items;
    }
    expect(items).toMatchObject([{ runId, callId: 'w', tool: 'write_file', reason: 'hook guard: a human should look' }]);
    expect((await api.post(`/v1/reviews/${items[0].id}`, { decision: 'approve' })).status).toBeLessThan(300);
    const r = await api.settled(runId);
    expect(callOf(r, 'w')).toMatchObject({ status: 'succeeded', output: { path: '/srv/app/r.txt', ask: 'review' } });
    expect(hookCalls(runId, '/before')).toHaveLength(1);
  });

  it('rewrite: the call runs with the args the hook gave, within the planned resources', async () => {
    const r = await run([{ id: 'w', tool: 'write_file', args: { path: '/srv/app', ask: 'rewrite', to: '/srv/app/notes.txt' } }]);
    expect(callOf(r, 'w')).toMatchObject({
      status: 'succeeded',
      output: { path: '/srv/app/notes.txt' },
      resolvedArgs: { path: '/srv/app/notes.txt' },
    });
    const started = (await events(r.id)).find((e) => e.type === 'call.started');
    // On PostgreSQL it also says how long it waited for its cluster permit (`waited`, DESIGN §8).
    const { waited: _, ...data } = started?.data ?? {};
    expect(data).toEqual({ attempt: 1, args: { path: '/srv/app/notes.txt' } });
  });

  it('rewrite that leaves the planned resource keys: hook_changed_resources, and the call never runs', async () => {
    const r = await run([{ id: 'w', tool: 'write_file', args: { path: '/srv/app/x.txt', ask: 'rewrite', to: '/etc/cron.d/x' } }]);
    expect(callOf(r, 'w')).toMatchObject({
      status: 'failed',
      attempts: 0,
      error: { code: 'hook_changed_resources', details: { hook: 'guard', writes: ['file:/etc/cron.d/x'], reads: [] } },
    });
  });
});

describe('after_call over HTTP', () => {
  it('redaction: the dependent and the results see the replaced output; no stored event holds the secret', async () => {
    const r = await run([
      { id: 'key', tool: 'read_secret', args: { name: 'deploy' } },
      { id: 'show', tool: 'use', args: { token: '${key.output.token}', user: '${key.output.user}' } },
    ]);
    expect(r.status).toBe('succeeded');
    expect(callOf(r, 'key').output).toEqual({ token: '[redacted]', user: 'deploy' });
    expect(callOf(r, 'show').output).toEqual({ token: '[redacted]', user: 'deploy' });
    // The hook saw the real output; nothing that was stored did.
    expect(body(hookCalls(r.id, '/after').find((q) => body(q).callId === 'key') as ToolRequest)).toMatchObject({
      status: 'succeeded',
      output: { token: 's3cret-7f3a' },
    });
    expect(JSON.stringify(await events(r.id))).not.toContain('s3cret');
    expect((await api.get(`/v1/runs/${r.id}/recording`)).text).not.toContain('s3cret');
  });

  it('fail: a succeeded call fails hook_rejected, and its dependent is blocked', async () => {
    const r = await run([
      { id: 'key', tool: 'read_secret', args: { name: 'forbidden' } },
      { id: 'show', tool: 'use', args: { token: '${key.output.token}' } },
    ]);
    expect(callOf(r, 'key')).toMatchObject({
      status: 'failed',
      attempts: 1,
      error: { code: 'hook_rejected', message: 'key: this secret may not leave the vault' },
    });
    expect(callOf(r, 'show')).toMatchObject({ status: 'blocked', blockedBy: { code: 'dependency_failed', callId: 'key' } });
  });
});

describe('a hook that times out', () => {
  it('onError deny (before_call): the call fails hook_denied, and the hook request is aborted', async () => {
    const r = await run([{ id: 's', tool: 'slow_deny', args: {} }]);
    expect(callOf(r, 's')).toMatchObject({
      status: 'failed',
      attempts: 0,
      error: { code: 'hook_denied', message: 's: hook slow-deny failed: timed out after 300 ms' },
    });
    const held = hookCalls(r.id, '/hold')[0] as ToolRequest;
    await held.aborted;
    const hook = (await events(r.id)).find((e) => e.type === 'call.hook');
    expect(hook?.data).toMatchObject({
      on: 'before_call',
      hook: 'slow-deny',
      decision: 'deny',
      error: 'hook slow-deny failed: timed out after 300 ms',
    });
    // The timeout's timer counts on the event loop's millisecond clock, taken when the loop turn began,
    // so it may fire up to a millisecond before 300 ms have passed on performance.now() (299.972, seen).
    expect((hook?.data as { durationMs: number } | undefined)?.durationMs).toBeGreaterThanOrEqual(299);
  });

  it('onError allow (before_call): the call goes on and succeeds; the event says the hook failed', async () => {
    const r = await run([{ id: 's', tool: 'slow_allow', args: { v: 1 } }]);
    expect(callOf(r, 's')).toMatchObject({ status: 'succeeded', output: { v: 1 } });
    const hook = (await events(r.id)).find((e) => e.type === 'call.hook');
    expect(hook?.data).toMatchObject({ hook: 'slow-allow', decision: 'allow', error: 'hook slow-allow failed: timed out after 300 ms' });
  });

  it('onError deny (after_call): the succeeded call fails hook_rejected', async () => {
    const r = await run([{ id: 's', tool: 'slow_after', args: {} }]);
    expect(callOf(r, 's')).toMatchObject({
      status: 'failed',
      attempts: 1,
      error: { code: 'hook_rejected', message: 's: hook slow-after failed: timed out after 300 ms' },
    });
  });
});

describe('a worker-module hook', () => {
  it('decides in a worker thread: allow inside /srv, deny outside', async () => {
    const r = await run([
      { id: 'ok', tool: 'mod_write', args: { path: '/srv/data/1' } },
      { id: 'no', tool: 'mod_write', args: { path: '/home/x' } },
    ]);
    expect(callOf(r, 'ok').status).toBe('succeeded');
    expect(callOf(r, 'no')).toMatchObject({
      status: 'failed',
      error: { code: 'hook_denied', message: 'no: module: outside /srv: /home/x', details: { hook: 'module-guard' } },
    });
    expect(hookCalls(r.id)).toHaveLength(0);
  });
});

describe('hook time in the metrics and the dashboard', () => {
  it('counts decisions and durations by hook, event and decision', async () => {
    const text = (await api.get('/metrics')).text;
    expect(text).toMatch(/^toolgraph_hook_decisions_total\{hook="guard",on="before_call",decision="deny",failed="false"\} [1-9]/m);
    expect(text).toMatch(/^toolgraph_hook_decisions_total\{hook="slow-deny",on="before_call",decision="deny",failed="true"\} 1$/m);
    expect(text).toMatch(/^toolgraph_hook_duration_seconds_count\{hook="redact",on="after_call",decision="replace"\} [1-9]/m);
  });

  it("shows each hook's time as a bar of the call's row in the timeline, apart from the wait for limits", async () => {
    const r = await run([{ id: 'w', tool: 'write_file', args: { path: '/tmp/nope' } }]);
    const { RunModel } = (await import('../../src/dashboard/static/model.js' as string)) as { RunModel: new () => any };
    const { TimelineView } = (await import('../../src/dashboard/static/timeline.js' as string)) as {
      TimelineView: new (root: unknown, o: unknown) => any;
    };
    const model = new RunModel();
    for (const e of await events(r.id)) model.apply({ ...e, at: iso(e.at) });
    const timing = model.call('w').timing;
    expect(timing.hooks).toMatchObject([{ on: 'before_call', hook: 'guard', decision: 'deny' }]);
    const g = globalThis as { ResizeObserver?: unknown };
    const had = g.ResizeObserver;
    g.ResizeObserver = class {
      observe() {}
    };
    try {
      const root = { innerHTML: '', addEventListener() {} };
      new TimelineView(root, { onOpen() {} }).render(model, Date.now());
      expect(root.innerHTML).toMatch(
        /<rect class="bar hook d-deny"[^>]*><title>w: hook guard \(before_call\) decided deny in [^<]*writes outside \/srv: \/tmp\/nope<\/title>/,
      );
    } finally {
      g.ResizeObserver = had;
    }
  });
});

describe('replay of a run with hooks', () => {
  it('applies the recorded decisions and calls no hook: same statuses and outputs, even with the hook service gone', async () => {
    const r = await run([
      { id: 'w1', tool: 'write_file', args: { path: '/srv/app', ask: 'rewrite', to: '/srv/app/n.txt' } },
      { id: 'w2', tool: 'write_file', args: { path: '/var/x' } },
      { id: 'key', tool: 'read_secret', args: { name: 'deploy' } },
      { id: 'show', tool: 'use', args: { token: '${key.output.token}' } },
      { id: 'm', tool: 'mod_write', args: { path: '/srv/m' } },
    ]);
    expect(r.status).toBe('partial');
    const rec = (await api.get(`/v1/runs/${r.id}/recording`)).body as Recording;
    expect(rec.config.hooks?.map((h) => h.name)).toEqual([
      'guard',
      'redact',
      'audit',
      'slow-deny',
      'slow-allow',
      'slow-after',
      'module-guard',
    ]);
    // Which calls hooks were for, not where they live.
    expect(rec.config.hooks?.[0]).toEqual({ on: 'before_call', name: 'guard', match: { tool: 'write_file' } });
    expect(JSON.stringify(rec.config.hooks)).not.toMatch(/http|guard\.mjs/);
    expect(rec.hooks?.map((h) => `${h.callId} ${h.on} ${h.hook} ${h.decision}`)).toEqual(
      expect.arrayContaining([
        'w1 before_call guard allow',
        'w2 before_call guard deny',
        'key after_call redact replace',
        'show after_call audit allow',
        'm before_call module-guard allow',
      ]),
    );
    const file = path.join(dir, 'hooks-run.json');
    writeFileSync(file, JSON.stringify(rec));
    // The hook service is gone: a hook called now could only fail (and deny).
    const seen = hs.requests.length;
    await hs.close();
    const replayed = replayRecording(rec);
    expect(replayed.notes).toEqual([]);
    expect(replayed.replayed.result).toEqual({ ...rec.result, endMs: replayed.replayed.result.endMs });
    // The same decisions; decisions that land in one instant may be listed in another order.
    const decisions = (hooks: Recording['hooks']) => (hooks ?? []).map((h) => `${h.callId} ${h.on} ${h.hook} ${h.decision}`).sort();
    expect(decisions(replayed.replayed.hooks)).toEqual(decisions(rec.hooks));
    const cli = await runCli(['replay', file]);
    expect(cli.err).toBe('');
    expect(cli.code).toBe(0);
    expect(hs.requests.length).toBe(seen);
  });
});

describe('the README guardrail example', () => {
  const readme = readFileSync('README.md', 'utf8');
  const block = (lang: string, marker: string) =>
    [...readme.matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, 'g'))].map((m) => m[1] as string).find((b) => b.includes(marker));

  it('runs: the hook server as written, the config as written, and a write outside /srv/repo is denied', async () => {
    const js = block('js', 'guard.mjs');
    const yaml = block('yaml', 'repo-guard');
    expect(js).toBeDefined();
    expect(yaml).toBeDefined();
    const file = path.join(dir, 'readme-guard.mjs');
    writeFileSync(file, js as string);
    const child = spawn(process.execPath, [file], { env: { ...process.env, PORT: '0' }, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /guard on (\d+)/.exec(out);
          if (m) resolve(Number(m[1]));
        });
        child.once('exit', (code) => reject(new Error(`the guard exited with ${code}`)));
      });
      const tools = `tools:\n  - { name: fs__write_file, reads: [], writes: ["file:{path}"], executor: { kind: builtin, name: echo } }\n`;
      const guarded = await startApi({ yaml: tools + (yaml as string).replace('127.0.0.1:9100', `127.0.0.1:${port}`) });
      try {
        const res = await guarded.post('/v1/runs', {
          waitMs: 20_000,
          calls: [
            { id: 'ok', tool: 'fs__write_file', args: { path: '/srv/repo/a.txt', content: 'hi' } },
            { id: 'etc', tool: 'fs__write_file', args: { path: '/etc/passwd', content: 'x' } },
            { id: 'up', tool: 'fs__write_file', args: { path: '/srv/repo/../etc/x', content: 'x' } },
          ],
        });
        const r = res.body;
        expect(r.status).toBe('partial');
        expect(callOf(r, 'ok')).toMatchObject({ status: 'succeeded', output: { path: '/srv/repo/a.txt' } });
        expect(callOf(r, 'etc').error).toEqual({
          code: 'hook_denied',
          message: 'etc: writes outside /srv/repo: /etc/passwd',
          details: { hook: 'repo-guard' },
        });
        expect(callOf(r, 'up').error).toMatchObject({ code: 'hook_denied', message: 'up: writes outside /srv/repo: /srv/etc/x' });
      } finally {
        await guarded.close();
      }
    } finally {
      child.kill();
    }
  });
});
