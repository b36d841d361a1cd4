/**
 * Issue #20 with real processes: `toolgraph serve` as a child on a real SQLite file.
 * - The doubling batch (each call interpolates the output of the one before twice) ends quickly with
 *   `args_too_large` instead of taking the server down, and the server stays healthy.
 * - A restart over a database holding a run the engine cannot take back comes up: that run ends
 *   `failed` with `unrecoverable`, its events kept, the log says why, and other runs resume.
 * - A tool server answering JSON nested 20,000 levels deep (it once overflowed the stack and ended
 *   the process) fails that call with `output_too_large`; the server stays up.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, until, type ServerChild } from '../helpers/child.js';

const CONFIG = `tools:
  - name: echo
    risk: read
    idempotent: true
    reads: []
    executor: { kind: builtin, name: echo }
  - name: sleep
    risk: read
    idempotent: true
    reads: []
    executor: { kind: builtin, name: sleep }
  - name: nap
    risk: read
    idempotent: true
    reads: []
    executor: { kind: builtin, name: sleep }
`;

let dir: string;
let config: string;
const children: ServerChild[] = [];

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'tg-harden-'));
  config = path.join(dir, 'config.yaml');
  writeFileSync(config, CONFIG);
});

afterAll(async () => {
  for (const c of children) await c.kill9();
  rmSync(dir, { recursive: true, force: true });
});

async function start(db: string): Promise<ServerChild> {
  const c = await startServer({ config, db: path.join(dir, db) });
  children.push(c);
  return c;
}

async function json(url: string, init?: RequestInit): Promise<{ status: number; body: any }> {
  const res = await fetch(url, init);
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

const post = (url: string, body: unknown) =>
  json(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('the doubling batch (issue #20, 1)', () => {
  it('ends in seconds with args_too_large; later calls are blocked; the server stays healthy and small', async () => {
    const s = await start('doubling.db');
    const calls = [{ id: 'c0', tool: 'echo', args: { v: 'x'.repeat(64) } }];
    for (let i = 1; i < 30; i++) calls.push({ id: `c${i}`, tool: 'echo', args: { v: `\${c${i - 1}.output}\${c${i - 1}.output}` } });
    expect(JSON.stringify({ calls }).length).toBeLessThan(2200);
    const t = Date.now();
    const res = await post(`${s.url}/v1/runs`, { calls, waitMs: 30_000 });
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('partial');
    expect(Date.now() - t).toBeLessThan(10_000);
    const failed = res.body.calls.filter((c: any) => c.status === 'failed');
    expect(failed).toHaveLength(1);
    expect(failed[0].error.code).toBe('args_too_large');
    const k = Number(failed[0].id.slice(1));
    // Every call before it ran, every call after it is blocked by it.
    for (const c of res.body.calls) {
      const i = Number(c.id.slice(1));
      if (i < k) expect(c.status).toBe('succeeded');
      if (i > k) expect([c.status, c.blockedBy?.code]).toEqual(['blocked', 'dependency_failed']);
    }
    // Every output that succeeded is within 1 MiB of JSON.
    for (const c of res.body.calls)
      if (c.status === 'succeeded') expect(Buffer.byteLength(JSON.stringify(c.output))).toBeLessThanOrEqual(1024 * 1024);

    expect((await json(`${s.url}/healthz`)).status).toBe(200);
    const again = await post(`${s.url}/v1/runs`, { calls: [{ id: 'a', tool: 'echo', args: { ok: 1 } }], waitMs: 10_000 });
    expect(again.body.status).toBe('succeeded');
    expect(statSync(path.join(dir, 'doubling.db')).size).toBeLessThan(64 * 1024 * 1024);
    await s.stop();
  }, 60_000);
});

describe('a tool answering deeply nested JSON', () => {
  it('fails the call with output_too_large naming the depth; the server stays healthy', async () => {
    const deep = `{"x":${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
    const tools = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(deep));
    });
    await new Promise<void>((resolve) => tools.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(tools.address() as AddressInfo).port}/`;
      const deepConfig = path.join(dir, 'deep.yaml');
      writeFileSync(deepConfig, `tools:\n  - name: deep\n    idempotent: true\n    executor: { kind: http, url: "${url}" }\n`);
      const s = await startServer({ config: deepConfig, db: path.join(dir, 'deep.db') });
      children.push(s);
      const res = await post(`${s.url}/v1/runs`, { calls: [{ id: 'a', tool: 'deep', args: {} }], waitMs: 20_000 });
      expect(res.status).toBe(201);
      expect(res.body.status).toBe('failed');
      expect(res.body.calls[0].error).toMatchObject({ code: 'output_too_large', details: { maxDepth: 256 } });
      expect((await json(`${s.url}/healthz`)).status).toBe(200);
      await s.stop();
    } finally {
      tools.closeAllConnections();
      await new Promise((resolve) => tools.close(resolve));
    }
  }, 60_000);
});

describe('a run that cannot be recovered (issue #20, 1)', () => {
  it('the server still starts; the run ends failed with unrecoverable, its events kept; other runs resume', async () => {
    const db = path.join(dir, 'unrecoverable.db');
    let s = await start('unrecoverable.db');
    const broken = await post(`${s.url}/v1/runs`, {
      calls: [
        { id: 'a', tool: 'sleep', args: { ms: 600_000 } },
        { id: 'b', tool: 'echo', args: { v: '${a.output}' } },
      ],
    });
    const healthy = await post(`${s.url}/v1/runs`, { calls: [{ id: 'h', tool: 'nap', args: { ms: 600_000 } }] });
    const brokenId = broken.body.id as string;
    await until('both sleeps running', async () => {
      const runs = await Promise.all([brokenId, healthy.body.id].map((id) => json(`${s.url}/v1/runs/${id}`)));
      if (!runs.every((r) => r.body.calls[0].status === 'running')) throw new Error(JSON.stringify(runs.map((r) => r.body)));
      return true;
    });
    await s.kill9();

    // A log the scheduler cannot take back: an event for a call the run does not have.
    const sql = new Database(db);
    const before = sql.prepare('SELECT seq, type FROM events WHERE run_id = ? ORDER BY seq').all(brokenId) as {
      seq: number;
      type: string;
    }[];
    const last = before[before.length - 1]!.seq;
    sql
      .prepare('INSERT INTO events (run_id, seq, type, call_id, at, data) VALUES (?, ?, ?, ?, ?, ?)')
      .run(brokenId, last + 1, 'call.failed', 'ghost', Date.now(), '{"error":{"code":"tool_error","message":"x"}}');
    sql.close();

    s = await start('unrecoverable.db');
    const run = await json(`${s.url}/v1/runs/${brokenId}`);
    expect(run.body.status).toBe('failed');
    expect(run.body.calls.map((c: any) => [c.id, c.status, c.error?.code])).toEqual([
      ['a', 'failed', 'unrecoverable'],
      ['b', 'failed', 'unrecoverable'],
    ]);
    expect(run.body.diagnostics).toEqual([expect.objectContaining({ code: 'unrecoverable' })]);
    // Its events are kept, and the end follows them, gapless.
    const sql2 = new Database(db, { readonly: true });
    const after = sql2.prepare('SELECT seq, type FROM events WHERE run_id = ? ORDER BY seq').all(brokenId) as {
      seq: number;
      type: string;
    }[];
    sql2.close();
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.map((e) => e.seq)).toEqual(after.map((_, i) => i + 1));
    expect(after.slice(-3).map((e) => e.type)).toEqual(['call.failed', 'call.failed', 'run.completed']);
    await until('the log line', () => (/could not be recovered/.test(s.output()) ? true : undefined));
    expect(s.output()).toContain(brokenId);

    // The other run was taken back: its idempotent sleep runs again.
    const h = await json(`${s.url}/v1/runs/${healthy.body.id}`);
    expect(h.body.status).toBe('running');
    expect(h.body.calls[0]).toMatchObject({ status: 'running', attempts: 2 });
    expect((await json(`${s.url}/healthz`)).status).toBe(200);

    // A third start finds nothing left to recover in the broken run.
    await s.stop();
    s = await start('unrecoverable.db');
    expect((await json(`${s.url}/v1/runs/${brokenId}`)).body.status).toBe('failed');
    expect(s.output()).not.toMatch(/could not be recovered/);
    await s.kill9();
  }, 90_000);
});
