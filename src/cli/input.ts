/**
 * Reading the CLI's inputs: a batch file and a config file. Every problem becomes a `UsageError`,
 * which the CLI prints as one message naming the file (exit 2), never a stack trace.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { BatchSchema, type Batch } from '../contract/batch.js';
import { formatIssues } from '../contract/issues.js';
import { ConfigError, loadConfig } from '../config/load.js';
import type { Config } from '../contract/config.js';

export class UsageError extends Error {}

export function readJsonFile(file: string, what: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(`${file}: cannot read the ${what}${code === 'ENOENT' ? ': no such file' : code ? ` (${code})` : ''}`);
  }
  if (text.trim() === '') throw new UsageError(`${file}: the ${what} is empty`);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new UsageError(`${file}: the ${what} is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * A batch file is the body of `POST /v1/runs` (DESIGN §9). A bare array is taken as that body's
 * `calls`, since a batch *is* an ordered list of calls (§1) and that is what people write first.
 */
/** A run's priority (DESIGN §4), in a batch file or `--priority`: 1 (most urgent) to 5. */
export const PrioritySchema = z.int().min(1).max(5);

/** A batch file: the batch, and the run's `priority` as `POST /v1/runs` takes it. */
const BatchFileSchema = BatchSchema.extend({ priority: PrioritySchema.optional() });

export function readBatch(file: string): Batch & { priority?: number } {
  const raw = readJsonFile(file, 'batch');
  const parsed = BatchFileSchema.safeParse(Array.isArray(raw) ? { calls: raw } : raw);
  if (!parsed.success) {
    const problems = formatIssues(parsed.error);
    throw new UsageError(`${file}: not a valid batch:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
  return parsed.data;
}

export function readConfig(file: string | undefined): Config {
  try {
    return loadConfig(file);
  } catch (e) {
    if (e instanceof ConfigError) throw new UsageError(e.message);
    throw e;
  }
}
