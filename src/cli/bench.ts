/**
 * `toolgraph bench [--quick] [--out FILE] [--only PART,…] [--seeds N] [--results FILE] [--check]`
 *
 * Runs the benchmark suite (src/bench/): makespan against the baselines, core overhead, HTTP. Progress
 * goes to stderr, the report to stdout and to `bench/RESULTS.md` (with how to reproduce it), and with
 * `--out` the figures as JSON. A run of only some parts (`--only`) leaves RESULTS.md alone unless
 * `--results` names a file. Exit 0, or with `--check` 1 when a target was missed; 2 for bad options.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PARTS, runSuite, type Part } from '../bench/suite.js';
import { UsageError } from './input.js';
import { parseOptions, type Io } from './options.js';

/** bench/RESULTS.md at the package root (two levels above src/cli or dist/cli). */
const DEFAULT_RESULTS = fileURLToPath(new URL('../../bench/RESULTS.md', import.meta.url));

export async function benchCommand(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseOptions(args, {
    quick: { type: 'boolean', default: false },
    out: { type: 'string' },
    only: { type: 'string' },
    seeds: { type: 'string' },
    results: { type: 'string' },
    check: { type: 'boolean', default: false },
  });
  if (positionals.length > 0) throw new UsageError(`bench takes no positional arguments, got "${positionals.join(' ')}"`);
  const parts = parseParts(values.only as string | undefined);
  let seeds: number | undefined;
  if (values.seeds !== undefined) {
    seeds = Number(values.seeds);
    if (!Number.isInteger(seeds) || seeds < 1 || seeds > 1000)
      throw new UsageError(`--seeds must be an integer from 1 to 1000, got "${String(values.seeds)}"`);
  }
  const command = ['toolgraph bench', ...args].join(' ');
  const result = await runSuite({
    preset: values.quick ? 'quick' : 'full',
    parts,
    ...(seeds !== undefined ? { seeds } : {}),
    command,
    log: (line) => io.err(`${line}\n`),
  });
  io.out(`${result.report}\n`);
  const resultsFile = (values.results as string | undefined) ?? (parts.length === PARTS.length ? DEFAULT_RESULTS : undefined);
  if (resultsFile) {
    write(resultsFile, `${result.report}\n`);
    io.err(`report written to ${resultsFile}\n`);
  }
  if (values.out) {
    write(values.out as string, `${JSON.stringify(result.json, null, 2)}\n`);
    io.err(`figures written to ${values.out as string}\n`);
  }
  const missed = result.json.targets.filter((t) => !t.met);
  return values.check && missed.length > 0 ? 1 : 0;
}

function parseParts(only: string | undefined): Part[] {
  if (only === undefined) return [...PARTS];
  const parts = only
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = parts.filter((p) => !(PARTS as readonly string[]).includes(p));
  if (parts.length === 0 || bad.length > 0)
    throw new UsageError(`--only takes a comma-separated list of ${PARTS.join(', ')}, got "${only}"`);
  return PARTS.filter((p) => parts.includes(p));
}

function write(file: string, text: string): void {
  try {
    mkdirSync(dirname(resolve(file)), { recursive: true });
    writeFileSync(file, text);
  } catch (e) {
    throw new UsageError(`cannot write ${file}: ${(e as Error).message}`);
  }
}
