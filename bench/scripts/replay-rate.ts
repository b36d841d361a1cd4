/**
 * Replay benchmark: how many recordings per second `toolgraph replay` checks.
 *
 * The corpus: N synthetic recordings (../synthetic-recordings.ts: 3–16 calls each with references,
 * file hazards, limits, retries, reviews, compensations, fail-fast, cancels and replans), made by the real
 * Scheduler on the virtual clock from fixed seeds and written as JSON files to a temporary directory.
 * Two figures: replaying parsed recordings in process (replay + compare), and the whole command
 * (what `toolgraph replay DIR --json` does: read, validate with zod, replay, compare, report). Every recording must match.
 *
 * Run: `npm run bench:replay [-- N]` (`npx tsx bench/scripts/replay-rate.ts [N]`; default 1000).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createAjv } from '../../src/config/catalog.js';
import { checkFile, checkRecording } from '../../src/replay/check.js';
import { expandPaths } from '../../src/replay/load.js';
import { jsonReport, totalsOf } from '../../src/replay/report.js';
import type { Recording } from '../../src/contract/recording.js';
import { syntheticRecording } from '../../src/bench/synthetic-recordings.js';

const n = Number(process.argv[2] ?? 1000);
const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-bench-replay-'));
const rate = (count: number, ms: number) => `${Math.round((count / ms) * 1000).toLocaleString('en-US')} recordings/s`;
/** Wall and CPU time of `f` (CPU time is the fairer figure on a busy machine). */
async function timed<T>(f: () => T | Promise<T>): Promise<{ value: T; wall: number; cpu: number }> {
  const c = process.cpuUsage();
  const t = performance.now();
  const value = await f();
  const used = process.cpuUsage(c);
  return { value, wall: performance.now() - t, cpu: (used.user + used.system) / 1000 };
}
const figures = (count: number, w: { wall: number; cpu: number }) =>
  `${count} in ${Math.round(w.wall)} ms wall = ${rate(count, w.wall)} (CPU ${Math.round(w.cpu)} ms = ${rate(count, w.cpu)})`;

try {
  const t = performance.now();
  const recordings: Recording[] = [];
  let calls = 0;
  let attempts = 0;
  for (let seed = 1; seed <= n; seed++) {
    const { recording } = syntheticRecording(seed);
    recordings.push(recording);
    calls += recording.calls.length + recording.replans.reduce((k, p) => k + p.calls.length, 0);
    attempts += recording.attempts.length;
    writeFileSync(path.join(dir, `rec-${String(seed).padStart(5, '0')}.json`), JSON.stringify(recording));
  }
  console.log(`corpus: ${n} recordings, ${calls} calls, ${attempts} attempts (made in ${Math.round(performance.now() - t)} ms)`);

  const ajv = createAjv();
  const parsed: Recording[] = recordings.map((r) => JSON.parse(JSON.stringify(r)) as Recording);
  checkRecording(parsed[0] as Recording, 'warmup', { ajv });
  const inProcess = await timed(() => parsed.filter((rec) => !checkRecording(rec, 'bench', { ajv }).ok).length);
  const diverged = inProcess.value;
  console.log(`replay + compare, in process: ${figures(n, inProcess)}; ${diverged} diverged`);

  // What `toolgraph replay DIR --json` does, file by file (the CLI sits above the bench: not imported).
  const command = await timed(() => {
    const results = expandPaths([dir]).map((file) => checkFile(file, { tolerance: 5, ajv }));
    JSON.stringify(jsonReport(results, { tolerance: 5 }), null, 2);
    return totalsOf(results);
  });
  const summary = command.value;
  const code = summary.unreadable > 0 ? 2 : summary.diverged > 0 ? 1 : 0;
  console.log(
    `replay DIR as the CLI does (read, validate, replay, compare, report): ${figures(n, command)}; exit ${code}, ${JSON.stringify(summary)}`,
  );
  if (code !== 0 || diverged > 0) process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
