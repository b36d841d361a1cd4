/** Run ids. */
import { randomUUID } from 'node:crypto';

/** A new run id: `run_` and 20 random hex digits. */
export function newRunId(): string {
  // The first 20 hex digits of a random UUID (which is 8-4-4-4-12), without a regex per run.
  const u = randomUUID();
  return `run_${u.slice(0, 8)}${u.slice(9, 13)}${u.slice(14, 18)}${u.slice(19, 23)}`;
}
