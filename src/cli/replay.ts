/**
 * `toolgraph replay REC.json|DIR... [--config FILE] [--tolerance MS] [--json] [--junit OUT.xml]`
 *
 * Replays recordings on a virtual clock through the same scheduler (src/replay) and compares them with
 * what was recorded. A directory is a corpus: every `*.json` inside, sorted, with a progress bar on a
 * terminal (stderr) and a summary table. With `--config` it answers "what would this config do to
 * these runs?": makespan recorded → replayed under it, and which outcomes change.
 *
 * Exit 0 when everything matches, 1 when anything diverges, 2 when an input is unreadable (each one
 * named on stderr with the JSON path at fault) or the options are wrong.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createAjv } from '../config/catalog.js';
import { checkFile, type CheckOptions, type RecordingResult } from '../replay/check.js';
import { expandPaths } from '../replay/load.js';
import { jsonReport, junitXml, resultText, summaryTable, totalsLine, totalsOf } from '../replay/report.js';
import { RecordingError } from '../replay/schema.js';
import { readConfig, UsageError } from './input.js';
import { parseOptions, type Io } from './options.js';
import { startCliMcp } from './mcp.js';

/** A progress bar redrawn in place on a terminal; nothing otherwise (the report says it all). */
class ProgressBar {
  private drawn = false;

  constructor(
    private readonly io: Io,
    private readonly total: number,
  ) {}

  update(done: number, file: string): void {
    if (!this.io.isTTY || this.total < 2) return;
    const width = 30;
    const full = Math.round((done / this.total) * width);
    this.io.err(`\r\x1b[K[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${done}/${this.total} ${path.basename(file)}`);
    this.drawn = true;
  }

  finish(): void {
    if (this.drawn) this.io.err('\r\x1b[K');
  }
}

function parseTolerance(text: string | undefined): number {
  if (text === undefined) return 5;
  if (!/^\d+(\.\d+)?$/.test(text.trim())) throw new UsageError(`--tolerance must be a number of milliseconds ≥ 0, got "${text}"`);
  return Number(text);
}

export async function replayCommand(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseOptions(args, {
    config: { type: 'string' },
    tolerance: { type: 'string' },
    json: { type: 'boolean', default: false },
    junit: { type: 'string' },
  });
  if (positionals.length === 0) throw new UsageError('replay needs at least one REC.json or directory of recordings');
  const tolerance = parseTolerance(values.tolerance as string | undefined);
  const configFile = values.config as string | undefined;
  const opts: CheckOptions = { tolerance, ajv: createAjv() };
  if (configFile !== undefined) {
    // With MCP servers, "what would this config do" needs their tools as they are now: list them.
    const mcp = await startCliMcp(readConfig(configFile));
    await mcp.close();
    opts.config = mcp.config;
  }
  let files: string[];
  try {
    files = expandPaths(positionals);
  } catch (e) {
    if (e instanceof RecordingError) throw new UsageError(e.message);
    throw e;
  }

  const bar = new ProgressBar(io, files.length);
  const results: RecordingResult[] = [];
  for (const file of files) {
    bar.update(results.length, file);
    results.push(checkFile(file, opts));
  }
  bar.finish();

  for (const r of results) if (r.error) io.err(`toolgraph replay: ${r.error}\n`);
  if (values.junit) {
    try {
      writeFileSync(values.junit as string, junitXml(results, configFile));
    } catch (e) {
      throw new UsageError(
        `${values.junit as string}: cannot write the JUnit report: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      );
    }
  }
  if (values.json) {
    io.out(`${JSON.stringify(jsonReport(results, { tolerance, ...(configFile ? { config: configFile } : {}) }), null, 2)}\n`);
  } else {
    for (const r of results) if (!r.error) io.out(resultText(r, configFile));
    if (results.length > 1) io.out(`\n${summaryTable(results)}`);
    io.out(totalsLine(totalsOf(results)));
  }
  const t = totalsOf(results);
  return t.unreadable > 0 ? 2 : t.diverged > 0 ? 1 : 0;
}
