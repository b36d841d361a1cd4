// Replay is exact on every store (DESIGN §8, issue #30): a recording holds every delay that came from
// outside the pure scheduler, so that replaying it under its own config never diverges.
//
// Real parts: http tools and hooks served by this process (hooks answer after a random 10–40 ms), a
// real server on SQLite, two replicas on one throwaway PostgreSQL (cluster permits), 200 runs per store
// in waves of concurrent submissions under tenant, tool and resource limits and cross-run locks, with
// retries, while a stream of other runs and a CPU burner load the machine. Every recording is fetched
// over HTTP as a user would, replayed with the library and with `toolgraph replay DIR` at the default
// tolerance: 0 divergences, and every start at exactly its recorded time. Recordings made before #30
// (tests/fixtures/recordings-v1) still replay clean.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Recording } from '../../src/contract/recording.js';
import { checkRecording } from '../../src/replay/check.js';
import { replayRecording } from '../../src/replay/replay.js';
import { runCli } from '../helpers/cli.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { LoadServer, loadBatch, loadYaml, seeded } from '../helpers/replay-load.js';
import { type Api, startApi } from '../helpers/server.js';

const RUNS = 200;
const WAVE = 50;
/** At most this many runs of the load beside them (one every 20 ms while they run). */
const LOAD_RUNS = 150;
const ROOT = path.resolve(import.meta.dirname, '../..');

let tools: LoadServer;
let pgc: TestPostgres;
let burner: ChildProcess;
const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-replay-exact-'));

beforeAll(async () => {
  tools = new LoadServer();
  await tools.start();
  pgc = await startPostgres();
  // Half a core of busy work beside the runs, for the whole file: timers and answers come late.
  burner = spawn(
    process.execPath,
    [
      '-e',
      'const spin = () => { const t = Date.now(); while (Date.now() - t < 15) {} setTimeout(spin, 15); }; spin(); setTimeout(() => process.exit(0), 120000);',
    ],
    { stdio: 'ignore' },
  );
}, 60_000);

afterAll(async () => {
  burner?.kill('SIGKILL');
  await tools?.close();
  await pgc?.stop();
  if (process.env.KEEP_REPLAY_DIR) console.log(`kept ${dir}`);
  else rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function submit(api: Api, body: unknown): Promise<string> {
  const r = await api.post('/v1/runs', body);
  expect(r.status, r.text).toBe(201);
  return r.body.id as string;
}

/**
 * 200 runs in waves of 50 submitted at once, round robin over `servers`, while other runs keep
 * arriving beside them; every run's recording (theirs too) is fetched and written to a folder.
 */
async function exercise(servers: Api[], seed: number, folder: string): Promise<Recording[]> {
  mkdirSync(folder, { recursive: true });
  const rand = seeded(seed);
  const loadRand = seeded(seed + 1000);
  const owned: [Api, string][] = [];
  let stop = false;
  const load = (async () => {
    for (let i = 0; !stop && i < LOAD_RUNS; i++) {
      const api = servers[i % servers.length] as Api;
      owned.push([api, await submit(api, { ...loadBatch(loadRand, i), tenant: 'load' })]);
      await sleep(20);
    }
  })();
  for (let w = 0; w < RUNS / WAVE; w++) {
    const wave = await Promise.all(
      Array.from({ length: WAVE }, async (_, k): Promise<[Api, string]> => {
        const api = servers[k % servers.length] as Api;
        return [api, await submit(api, loadBatch(rand, w * WAVE + k))];
      }),
    );
    owned.push(...wave);
    await Promise.all(wave.map(([api, id]) => api.settled(id)));
  }
  stop = true;
  await load;
  const recs: Recording[] = [];
  for (const [api, id] of owned) {
    await api.settled(id);
    const r = await api.get(`/v1/runs/${id}/recording`);
    expect(r.status).toBe(200);
    recs.push(r.body as Recording);
    writeFileSync(path.join(folder, `${id}.json`), r.text);
  }
  return recs;
}

/** Replays each recording under its own config: 0 divergences, every start at its recorded time. */
function expectExact(recs: readonly Recording[]): void {
  const diverged: string[] = [];
  let shown = false;
  for (const rec of recs) {
    const before = diverged.length;
    const result = checkRecording(rec, rec.run.id);
    if (!result.ok) diverged.push(`${rec.run.id}: ${JSON.stringify(result.divergences).slice(0, 400)}`);
    const replayed = new Map(replayRecording(rec).replayed.attempts.map((a) => [`${a.compensation === true}/${a.callId}/${a.attempt}`, a]));
    for (const a of rec.attempts) {
      const b = replayed.get(`${a.compensation === true}/${a.callId}/${a.attempt}`);
      if (!b) diverged.push(`${rec.run.id}: ${a.callId} attempt ${a.attempt} never replayed`);
      else if (Math.abs(b.startMs - a.startMs) > 1e-6)
        diverged.push(`${rec.run.id}: ${a.callId} attempt ${a.attempt} started at ${b.startMs}, recorded at ${a.startMs}`);
    }
    // The first recording that diverges is printed whole, so that a rare divergence can be replayed later.
    if (diverged.length > before && !shown) {
      shown = true;
      console.error(`diverged recording ${rec.run.id}: ${JSON.stringify(rec)}`);
    }
  }
  expect(diverged).toEqual([]);
}

/** What the workload put in the recordings: it must have had all of it for the test to mean anything. */
function tally(recs: readonly Recording[]) {
  const attempts = recs.flatMap((r) => r.attempts);
  const hooks = recs.flatMap((r) => r.hooks ?? []);
  return {
    retries: attempts.filter((a) => a.attempt > 1).length,
    turns: attempts.filter((a) => a.waits?.some((w) => w.kind === 'turn' && w.toMs > w.fromMs)).length,
    permits: attempts.filter((a) => a.waits?.some((w) => w.kind === 'permit')).length,
    permitWaitMs: Math.max(0, ...attempts.flatMap((a) => (a.waits ?? []).filter((w) => w.kind === 'permit').map((w) => w.toMs - w.fromMs))),
    hooks: hooks.length,
    slowHooks: hooks.filter((h) => h.appliedMs !== undefined && h.askedMs !== undefined && h.appliedMs - h.askedMs >= 10).length,
    replaced: hooks.filter((h) => h.decision === 'replace').length,
  };
}

async function replayDir(folder: string, count: number): Promise<void> {
  const r = await runCli(['replay', folder, '--json']);
  expect(r.err).toBe('');
  expect(JSON.parse(r.out).summary).toEqual({ recordings: count, match: count, diverged: 0, unreadable: 0 });
  expect(r.code).toBe(0);
}

describe('recordings made under load replay with 0 divergences', () => {
  it('on SQLite: 200 runs and the load beside them', async () => {
    const api = await startApi({ yaml: loadYaml(tools.url), db: path.join(dir, 'sqlite.db') });
    try {
      const folder = path.join(dir, 'sqlite');
      const recs = await exercise([api], 1, folder);
      expect(recs.filter((r) => r.run.tenant !== 'load').length).toBe(RUNS);
      const t = tally(recs);
      expect(t.retries).toBeGreaterThan(50);
      expect(t.turns).toBeGreaterThan(50);
      expect(t.permits).toBe(0);
      expect(t.slowHooks).toBeGreaterThan(50);
      expect(t.replaced).toBeGreaterThan(5);
      expectExact(recs);
      await replayDir(folder, recs.length);
    } finally {
      await api.close();
    }
  }, 120_000);

  it('on PostgreSQL: 200 runs over two replicas (cluster permits) and the load beside them', async () => {
    const db = await pgc.createDatabase();
    const replicas = [
      await startApi({ yaml: loadYaml(tools.url), db, replica: 'r0' }),
      await startApi({ yaml: loadYaml(tools.url), db, replica: 'r1' }),
    ];
    try {
      const folder = path.join(dir, 'postgres');
      const recs = await exercise(replicas, 2, folder);
      expect(recs.filter((r) => r.run.tenant !== 'load').length).toBe(RUNS);
      const t = tally(recs);
      expect(t.retries).toBeGreaterThan(50);
      expect(t.turns).toBeGreaterThan(50);
      expect(t.permits).toBeGreaterThan(RUNS);
      expect(t.permitWaitMs).toBeGreaterThan(0);
      expect(t.slowHooks).toBeGreaterThan(50);
      expect(t.replaced).toBeGreaterThan(5);
      expectExact(recs);
      await replayDir(folder, recs.length);
    } finally {
      for (const r of replicas) await r.close();
    }
  }, 120_000);
});

describe('recordings made before the outside waits were recorded', () => {
  it('replay clean, as they did (tests/fixtures/recordings-v1, made on SQLite and PostgreSQL)', async () => {
    const r = await runCli(['replay', path.join(ROOT, 'tests/fixtures/recordings-v1'), '--json']);
    expect(JSON.parse(r.out).summary).toEqual({ recordings: 8, match: 8, diverged: 0, unreadable: 0 });
    expect(r.code).toBe(0);
  });
});
