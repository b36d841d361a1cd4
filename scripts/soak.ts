/**
 * Soak: `toolgraph serve` under mixed load, bad cases included, for `--minutes` (default 30). Not a
 * test: it prints what an operator would watch, once a minute — requests served, runs created, 5xx
 * answers, the server's RSS and heap, the database and WAL sizes — so one can see whether memory
 * flattens or grows with the number of runs served.
 *
 *   npx tsx scripts/soak.ts [--minutes 30] [--workers 8]
 *
 * The load, drawn at random per request: batches of chained echo/sleep calls (most of it), plans,
 * the doubling batch of issue #20 (ends `args_too_large`), a plan of too many calls (413), too many
 * tags (400), a foreign Host (403), parser-level garbage and a 20 kB header over a raw socket (400,
 * 431), SSE replays of ended runs, HEAD of the live stream, and tag-filtered listings.
 * The server is the built one (dist/; `npm run build` first); its memory is read from a line it
 * prints every few seconds (a module loaded with --import), not guessed from outside.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { minutes: { type: 'string', default: '30' }, workers: { type: 'string', default: '8' } } });
const minutes = Number(values.minutes);
const workers = Number(values.workers);
if (!(minutes > 0) || !(workers >= 1)) throw new Error('--minutes and --workers must be positive numbers');

const BIN = fileURLToPath(new URL('../bin/toolgraph.mjs', import.meta.url));
const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-soak-'));
const db = path.join(dir, 'soak.db');
const config = path.join(dir, 'config.yaml');
const tool = (name: string, builtin: string) =>
  `  - name: ${name}\n    risk: read\n    idempotent: true\n    reads: []\n    executor: { kind: builtin, name: ${builtin} }\n`;
writeFileSync(config, `tools:\n${tool('echo', 'echo')}${tool('sleep', 'sleep')}`);

const MEM =
  'data:text/javascript,setInterval(()=>{const m=process.memoryUsage();process.stderr.write("SOAKMEM "+JSON.stringify({rss:m.rss,heap:m.heapUsed})+"\\n")},5000).unref()';
const child = spawn(
  process.execPath,
  ['--import', MEM, BIN, 'serve', '--config', config, '--db', db, '--port', '0', '--host', '127.0.0.1', '--drain-ms', '0'],
  {
    env: { ...process.env, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'pipe'],
  },
);
let mem = { rss: 0, heap: 0 };
let logTail = '';
const port = await new Promise<number>((resolve, reject) => {
  let text = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (s: string) => {
    text += s;
    for (const m of s.matchAll(/SOAKMEM (\{.*\})/g)) mem = JSON.parse(m[1] as string) as typeof mem;
    const found = /toolgraph serving http:\/\/[^:]+:(\d+)/.exec(text);
    if (found) resolve(Number(found[1]));
    logTail = (logTail + s.replace(/SOAKMEM .*\n/g, '')).slice(-4000);
  });
  child.once('exit', (code) => reject(new Error(`the server exited (${code}) before listening:\n${text}`)));
});
const base = `http://127.0.0.1:${port}`;

const counts = { requests: 0, runs: 0, status5xx: 0, failures: 0, byStatus: new Map<number, number>(), why: new Map<string, number>() };

/** An answer that was not the one expected: counted, by what it was, for the summary at the end. */
function unexpected(what: string): void {
  counts.failures++;
  counts.why.set(what, (counts.why.get(what) ?? 0) + 1);
}
const ended: string[] = [];

function count(status: number): void {
  counts.requests++;
  counts.byStatus.set(status, (counts.byStatus.get(status) ?? 0) + 1);
  if (status >= 500) counts.status5xx++;
}

async function request(
  method: string,
  p: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any }> {
  const res = await fetch(base + p, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  count(res.status);
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = text;
  }
  return { status: res.status, json };
}

/** Sends raw bytes and reads the answer to the end (the server closes after a parser error). */
function raw(bytes: string): Promise<void> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => (out += d));
    s.setTimeout(5000, () => s.destroy());
    s.on('close', () => {
      const m = /^HTTP\/1\.1 (\d{3})/.exec(out);
      count(m ? Number(m[1]) : 0);
      if (!m) unexpected('raw socket: no status line (closed or timed out)');
      else if (!out.includes('"error"')) unexpected(`raw socket: ${m[1]} without an error body`);
      resolve();
    });
    s.on('error', () => {});
    s.end(bytes);
  });
}

function chain(n: number): unknown[] {
  const calls: unknown[] = [{ id: 'c0', tool: 'echo', args: { v: 'x'.repeat(200) } }];
  for (let i = 1; i < n; i++) {
    calls.push(
      i % 3 === 0
        ? { id: `c${i}`, tool: 'sleep', args: { ms: 2 } }
        : { id: `c${i}`, tool: 'echo', args: { prev: `\${c${i - 1}.output}`, i } },
    );
  }
  return calls;
}

function doubling(): unknown[] {
  const calls: unknown[] = [{ id: 'c0', tool: 'echo', args: { v: 'x'.repeat(64) } }];
  for (let i = 1; i < 30; i++) calls.push({ id: `c${i}`, tool: 'echo', args: { v: `\${c${i - 1}.output}\${c${i - 1}.output}` } });
  return calls;
}

const CASES: [number, () => Promise<void>][] = [
  [
    55,
    async () => {
      const r = await request('POST', '/v1/runs', { calls: chain(10), tags: { soak: 'yes', k: String(counts.runs % 7) }, waitMs: 10_000 });
      if (r.status === 201) {
        counts.runs++;
        if (ended.length < 500) ended.push(r.json.id);
        else ended[counts.runs % 500] = r.json.id;
        if (r.json.status !== 'succeeded') unexpected(`chain run: ${r.json.status} when waitMs passed`);
      } else unexpected(`chain run: ${r.status}`);
    },
  ],
  [10, async () => void (await request('POST', '/v1/plan', { calls: chain(20) }))],
  [
    4,
    async () => {
      const r = await request('POST', '/v1/runs', { calls: doubling(), waitMs: 20_000 });
      counts.runs++;
      if (!r.json?.calls?.some((c: any) => c.error?.code === 'args_too_large'))
        unexpected(`doubling run: ${r.status} ${r.json?.status ?? ''} without args_too_large`);
    },
  ],
  [
    3,
    async () => {
      const calls = Array.from({ length: 1500 }, (_, i) => ({ id: `p${i}`, tool: 'echo' }));
      const r = await request('POST', '/v1/plan', { calls });
      if (r.status !== 413) unexpected(`1500-call plan: ${r.status}`);
    },
  ],
  [
    3,
    async () => {
      const tags = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`t${i}`, 'v']));
      const r = await request('POST', '/v1/runs', { calls: chain(2), tags });
      if (r.status !== 400) unexpected(`200 tags: ${r.status}`);
    },
  ],
  [3, () => raw('GET /v1/runs HTTP/1.1\r\nHost: rebind.example:8080\r\nConnection: close\r\n\r\n')],
  [3, () => raw(`GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)],
  [
    3,
    () =>
      raw(
        [
          'garbage\r\n\r\n',
          'POST /v1/plan HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello',
          'GET /x HTTP/1.1\r\nHost: a\rb\r\n\r\n',
        ][counts.requests % 3] as string,
      ),
  ],
  [
    6,
    async () => {
      const id = ended[Math.floor(Math.random() * ended.length)];
      if (!id) return;
      const res = await fetch(`${base}/v1/runs/${id}/events`);
      await res.text();
      count(res.status);
    },
  ],
  [
    2,
    async () => {
      const res = await fetch(`${base}/v1/stream`, { method: 'HEAD' });
      count(res.status);
    },
  ],
  [8, async () => void (await request('GET', `/v1/runs?tag=soak:yes&tag=k:${counts.requests % 7}&limit=20`))],
];
const TOTAL = CASES.reduce((n, [w]) => n + w, 0);

function pick(): () => Promise<void> {
  let r = Math.random() * TOTAL;
  for (const [w, f] of CASES) if ((r -= w) < 0) return f;
  return (CASES[0] as [number, () => Promise<void>])[1];
}

const size = (f: string) => (existsSync(f) ? statSync(f).size : 0);
const mb = (n: number) => (n / 1024 / 1024).toFixed(1);
const started = Date.now();
const deadline = started + minutes * 60_000;

function report(): void {
  const min = ((Date.now() - started) / 60_000).toFixed(1);
  console.log(
    `${min.padStart(5)} min  requests ${String(counts.requests).padStart(7)}  runs ${String(counts.runs).padStart(6)}  5xx ${counts.status5xx}  unexpected ${counts.failures}  ` +
      `rss ${mb(mem.rss)} MB  heap ${mb(mem.heap)} MB  db ${mb(size(db))} MB  wal ${mb(size(`${db}-wal`))} MB`,
  );
}

console.log(`soak: ${minutes} min, ${workers} workers, server pid ${child.pid}, db ${db}`);
const timer = setInterval(report, 60_000);
await Promise.all(
  Array.from({ length: workers }, async () => {
    while (Date.now() < deadline) {
      try {
        await pick()();
      } catch (e) {
        unexpected(`request failed: ${(e as Error).message}`);
        if (child.exitCode !== null) throw new Error(`the server died: ${String(e)}\n${logTail}`);
      }
    }
  }),
);
clearInterval(timer);
report();
const health = await fetch(`${base}/healthz`);
console.log(`healthz ${health.status}; statuses ${JSON.stringify(Object.fromEntries([...counts.byStatus].sort((a, b) => a[0] - b[0])))}`);
for (const [what, n] of counts.why) console.log(`unexpected: ${n} × ${what}`);
child.kill('SIGTERM');
await new Promise((r) => child.once('exit', r));
rmSync(dir, { recursive: true, force: true });
if (counts.status5xx > 0 || health.status !== 200) process.exitCode = 1;
