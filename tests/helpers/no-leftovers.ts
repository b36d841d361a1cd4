/**
 * A setup file of every integration test file (vitest.config.ts): every process the file starts
 * inherits `TOOLGRAPH_TEST_FILE`, a mark of this file. After its last hook, a `toolgraph serve` that
 * still carries the mark was left behind (a wrapper such as `npx` ended without its child): it is
 * killed, and the file fails, naming it. Linux only (it reads /proc); elsewhere the check is skipped.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { afterAll } from 'vitest';

const MARK = 'TOOLGRAPH_TEST_FILE';
const mark = randomBytes(6).toString('hex');
process.env[MARK] = mark;

/** Processes that carry this run's mark and run `toolgraph … serve`: pid and command line. */
export function leftServers(mark: string): { pid: number; cmd: string }[] {
  if (!existsSync('/proc/self/environ')) return [];
  const out: { pid: number; cmd: string }[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      if (!env.includes(`${MARK}=${mark}`)) continue;
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
      if (/toolgraph/.test(cmd) && /\bserve\b/.test(cmd)) out.push({ pid, cmd });
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return out;
}

// Registered first, so it runs after the file's own afterAll hooks (which stop its servers).
afterAll(async () => {
  // A server stopped by the last test may take a moment to exit.
  let left = leftServers(mark);
  for (let i = 0; i < 50 && left.length > 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    left = leftServers(mark);
  }
  if (left.length === 0) return;
  for (const p of left) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // Gone.
    }
  }
  throw new Error(
    `this test file left ${left.length} toolgraph serve process(es) running (now killed):\n${left.map((p) => `${p.pid} ${p.cmd}`).join('\n')}`,
  );
}, 15_000);
