/**
 * The batch and catalog of the streaming measurements (eager-dispatch.ts, append-cost.ts): a
 * realistic mix of reads of distinct files, and every fourth call a write that uses the read before it
 * (a data edge) and overwrites the file read three calls earlier (a conflict). Every tool sleeps
 * `args.ms`.
 */
import type { CallInput } from '../../src/core/calls.js';
import { parseConfig } from '../../src/config/load.js';

/** How long each call takes, in ms. */
export const TOOL_MS = 300;

export const STREAM_CONFIG = parseConfig(
  `
tools:
  - name: read_file
    input: { type: object, properties: { path: { type: string }, ms: { type: integer } }, required: [path, ms] }
    reads: ["file:{path}"]
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: sleep }
  - name: write_file
    input: { type: object, properties: { path: { type: string }, content: {}, ms: { type: integer } }, required: [path, content, ms] }
    reads: []
    writes: ["file:{path}"]
    executor: { kind: builtin, name: sleep }
  - name: summarize
    input: { type: object }
    reads: []
    writes: []
    risk: read
    executor: { kind: builtin, name: echo }
limits:
  global: 16
  perRun: 8
  maxCallsPerRun: 1000000
defaults:
  timeoutMs: 60000
  failure: partial
`,
  'bench/scripts/streamed-batch.ts',
);

/**
 * N calls of the mix. With `forward`, every eighth read also refers to the call after it (it waits for
 * that call) and every 64th call refers to a tool by name (it waits for the seal).
 */
export function streamedBatch(n: number, forward = false): CallInput[] {
  return Array.from({ length: n }, (_, i): CallInput => {
    const id = `c${i}`;
    if (forward && i % 64 === 63) return { id, tool: 'summarize', args: { of: '${write_file.output}' } };
    if (i % 4 === 3)
      return { id, tool: 'write_file', args: { path: `/repo/f${i - 3}.txt`, content: `\${c${i - 1}.output.ms}`, ms: TOOL_MS } };
    const next = forward && i % 8 === 0 && i + 1 < n ? { after: `\${c${i + 1}.output.ms}` } : {};
    return { id, tool: 'read_file', args: { path: `/repo/f${i}.txt`, ms: TOOL_MS, ...next } };
  });
}
