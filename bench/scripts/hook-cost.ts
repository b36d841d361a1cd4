/**
 * What a hook costs (DESIGN §14), per call: `npm run bench:hooks`. A hook service in a child process
 * (node:http on 127.0.0.1, answering `{"decision":"allow"}` at once, so its own CPU is not counted
 * here) and engines in this process, alike but for their hooks:
 *
 *   none    no hook;
 *   before  one `before_call` hook on loopback;
 *   both    a `before_call` and an `after_call` hook.
 *
 * One client submits one-call runs of the no-op builtin `echo` back to back and waits for each to end;
 * a call's latency is submit → run ended. Rounds alternate between the modes (the order turned each
 * round). Per round: the p50 and p99 latency, and the CPU time of this process per call. Reported:
 * the medians, and the p50 each hooked mode adds per call (median of the paired rounds' differences).
 *
 * Twice: with an in-memory event log (what the hook itself costs: its HTTP round trip and one more
 * turn of the engine), and with a durable SQLite file (where a before_call decision is one more
 * commit, so one more fsync, before the call starts).
 *
 * Target (issue #19): a loopback hook adds at most 1 ms p50 per call.
 *
 * Options (environment): ROUNDS (6), RUNS (1500 per round and mode in memory), SQLITE_RUNS (300: each
 * costs a few fsyncs), STORES (memory,sqlite).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { parseConfig } from '../../src/config/load.js';
import { Engine } from '../../src/engine/engine.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { median, quantile } from '../../src/bench/stats.js';

const ROUNDS = Number(process.env.ROUNDS ?? 6);
const RUNS = Number(process.env.RUNS ?? 1500);
const SQLITE_RUNS = Number(process.env.SQLITE_RUNS ?? 300);
const STORES = (process.env.STORES ?? 'memory,sqlite').split(',') as ('memory' | 'sqlite')[];
const MODES = ['none', 'before', 'both'] as const;
type Mode = (typeof MODES)[number];

/** The hook service: answers every POST with allow, at once. */
function startHookService(): Promise<{ url: string; child: ChildProcess }> {
  const code = `
    const http = require('node:http');
    const answer = '{"decision":"allow"}';
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length }); res.end(answer); });
    });
    server.keepAliveTimeout = 60000;
    server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
  `;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.stdout?.once('data', (d: Buffer) => resolve({ url: `http://127.0.0.1:${d.toString().trim()}/hook`, child }));
  });
}

function yaml(mode: Mode, url: string): string {
  const hooks =
    mode === 'none'
      ? ''
      : `hooks:\n  - { on: before_call, name: guard, url: ${url} }\n${mode === 'both' ? `  - { on: after_call, name: audit, url: ${url} }\n` : ''}`;
  return `tools:\n  - { name: echo, reads: [], writes: [], idempotent: true, executor: { kind: builtin, name: echo } }\n${hooks}`;
}

interface Round {
  p50: number;
  p99: number;
  cpuUsPerCall: number;
}

async function round(engine: Engine, runs: number): Promise<Round> {
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const run = await engine.submit({ calls: [{ id: 'c1', tool: 'echo', args: { n: i } }] });
    const done = await engine.wait(run.id);
    if (done?.status !== 'succeeded') throw new Error(`run ${run.id} ended ${done?.status}`);
    lat.push(performance.now() - t0);
  }
  const cpu = process.cpuUsage(cpu0);
  return { p50: quantile(lat, 0.5), p99: quantile(lat, 0.99), cpuUsPerCall: (cpu.user + cpu.system) / runs };
}

const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' / ');

async function bench(storeKind: 'memory' | 'sqlite', url: string, dir: string): Promise<void> {
  const runs = storeKind === 'memory' ? RUNS : SQLITE_RUNS;
  const engines = new Map<Mode, { engine: Engine; store?: Store }>();
  for (const mode of MODES) {
    const config = parseConfig(yaml(mode, url), `bench-${mode}.yaml`);
    const store = storeKind === 'sqlite' ? openSqliteStore(path.join(dir, `${mode}.db`)) : undefined;
    engines.set(mode, { engine: new Engine({ config, retainEndedMs: 0, ...(store ? { sink: store } : {}) }), ...(store ? { store } : {}) });
  }
  const results = new Map<Mode, Round[]>(MODES.map((m) => [m, []]));
  try {
    for (const mode of MODES) await round((engines.get(mode) as { engine: Engine }).engine, Math.min(300, runs)); // warm-up
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? [...MODES] : [...MODES].reverse();
      for (const mode of order) {
        const res = await round((engines.get(mode) as { engine: Engine }).engine, runs);
        (results.get(mode) as Round[]).push(res);
        console.log(
          `  ${storeKind} round ${r + 1} ${mode.padEnd(6)} p50 ${res.p50.toFixed(3)} ms  p99 ${res.p99.toFixed(3)} ms  ${res.cpuUsPerCall.toFixed(0)} µs CPU/call`,
        );
      }
    }
  } finally {
    for (const { engine, store } of engines.values()) {
      await engine.close();
      await store?.close();
    }
  }
  const none = results.get('none') as Round[];
  console.log('');
  console.log(
    `${storeKind === 'memory' ? 'In-memory event log' : 'Durable SQLite file'} (${ROUNDS} rounds × ${runs} one-call runs per mode; load average now ${load()}):`,
  );
  console.log('');
  console.log('| hooks | p50 ms | p99 ms | added p50 per call (paired rounds: median, range) | CPU µs per call |');
  console.log('|---|---|---|---|---|');
  for (const mode of MODES) {
    const rs = results.get(mode) as Round[];
    const added = rs.map((x, i) => x.p50 - (none[i] as Round).p50);
    const addedText =
      mode === 'none' ? '—' : `${median(added).toFixed(3)} ms (${Math.min(...added).toFixed(3)} – ${Math.max(...added).toFixed(3)})`;
    const label = mode === 'none' ? 'none' : mode === 'before' ? 'before_call on loopback' : 'before_call + after_call on loopback';
    console.log(
      `| ${label} | ${median(rs.map((x) => x.p50)).toFixed(3)} | ${median(rs.map((x) => x.p99)).toFixed(3)} | ${addedText} | ${median(rs.map((x) => x.cpuUsPerCall)).toFixed(0)} |`,
    );
  }
  const before = (results.get('before') as Round[]).map((x, i) => x.p50 - (none[i] as Round).p50);
  console.log('');
  console.log(
    `one loopback hook adds ${median(before).toFixed(3)} ms p50 per call (target ≤ 1 ms: ${median(before) <= 1 ? 'met' : 'missed'})`,
  );
  console.log('');
}

async function main(): Promise<void> {
  const hook = await startHookService();
  const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-bench-hooks-'));
  try {
    console.log(`hooks bench: Node ${process.version}, load average ${load()} (1 / 5 / 15 min) at the start`);
    for (const s of STORES) await bench(s, hook.url, dir);
  } finally {
    hook.child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
