/**
 * The benchmark's tool catalog and its five workload families. Every call sleeps `args.ms` ms
 * (the builtin `sleep`, real timers), 20–50 ms drawn from a seeded generator, so every executor runs
 * exactly the same batch with the same durations.
 *
 * Tools: `read` (reads `file:{path}`), `write` (writes `file:{path}`), `search` and `join` (pure, like
 * an LLMCompiler plan's tasks), `echo` (pure no-op, for the overhead measurements). Limits in force for
 * every family: a per-run limit of 6 and tool limits `read: 4`, `search: 3`.
 *
 * Families (calls are in model order; a data reference always names an earlier call):
 * - `independent-reads`: reads of distinct files and searches, no edges;
 * - `mixed-rw`: reads (60%) and writes (40%) on 4 files, interleaved;
 * - `rw-chain`: reads (65%) and writes (35%) on one file;
 * - `fan-out-in`: stages of 3–6 searches joined by a `join` that references them all; a search of the
 *   next stage references the previous join half of the time;
 * - `random-dag`: layers of 2–6 calls, each referencing 0–2 calls of earlier layers, reading (45%) or
 *   writing (25%) one of 6 files, or searching (30%).
 */
import type { CallInput } from '../core/calls.js';
import { parseConfig } from '../config/load.js';
import type { Config } from '../config/types.js';
import { intIn, pick, rng } from './random.js';

export const FAMILIES = ['independent-reads', 'mixed-rw', 'rw-chain', 'fan-out-in', 'random-dag'] as const;
export type Family = (typeof FAMILIES)[number];

export interface BenchLimits {
  perRun: number;
  tool: Record<string, number>;
}

export const LIMITS: BenchLimits = { perRun: 6, tool: { read: 4, search: 3 } };

export const MIN_MS = 20;
export const MAX_MS = 50;

function sleepTool(name: string, what: string, reads: string[], writes: string[]): string {
  return `  - name: ${name}
    description: ${what} (sleeps ms milliseconds)
    input: { type: object, properties: { ms: { type: integer, minimum: 0 } }, required: [ms] }
    reads: ${JSON.stringify(reads)}
    writes: ${JSON.stringify(writes)}
    risk: ${writes.length > 0 ? 'write' : 'read'}
    idempotent: ${writes.length === 0}
    executor: { kind: builtin, name: sleep }
`;
}

/** The benchmark config as YAML; `limits` defaults to the limits every family runs under. */
export function benchConfigYaml(limits: Partial<BenchLimits> & { maxCallsPerRun?: number } = LIMITS): string {
  const tool = limits.tool ?? {};
  const lines = [
    `  maxCallsPerRun: ${limits.maxCallsPerRun ?? 1000}`,
    ...(limits.perRun !== undefined ? [`  perRun: ${limits.perRun}`] : []),
    `  tool: ${JSON.stringify(tool)}`,
  ];
  return `# toolgraph benchmark catalog (src/bench/workloads.ts)
tools:
${sleepTool('read', 'Read a file', ['file:{path}'], [])}${sleepTool('write', 'Write a file', [], ['file:{path}'])}${sleepTool('search', 'Search the web', [], [])}${sleepTool('join', 'Join results', [], [])}  - name: echo
    description: Return the args (a no-op)
    input: { type: object }
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: echo }
limits:
${lines.join('\n')}
`;
}

export function benchConfig(limits: Partial<BenchLimits> & { maxCallsPerRun?: number } = LIMITS): Config {
  return parseConfig(benchConfigYaml(limits), 'builtin:bench');
}

export interface Workload {
  family: Family;
  seed: number;
  calls: CallInput[];
}

/** A call's duration (every executor reads it from `args.ms`). */
export function durationOf(c: CallInput): number {
  return (c.args as { ms: number }).ms;
}

/** Builds one batch of about `n` calls (fan-out-in and random-dag end on a whole stage or layer). */
export function workload(family: Family, n: number, seed: number): Workload {
  const rand = rng(hashSeed(family, seed));
  const calls: CallInput[] = [];
  const ms = () => intIn(rand, MIN_MS, MAX_MS);
  const add = (tool: string, args: Record<string, unknown>) => {
    const id = `c${calls.length}`;
    calls.push({ id, tool, args: { ms: ms(), ...args } });
    return id;
  };
  const ref = (id: string) => `\${${id}.output.ms}`;
  switch (family) {
    case 'independent-reads':
      for (let i = 0; i < n; i++) {
        if (rand() < 0.5) add('read', { path: `/repo/f${i}.ts` });
        else add('search', { q: `q${i}` });
      }
      break;
    case 'mixed-rw':
    case 'rw-chain': {
      const files = family === 'mixed-rw' ? ['a', 'b', 'c', 'd'].map((f) => `/repo/${f}.ts`) : ['/repo/main.ts'];
      const pRead = family === 'mixed-rw' ? 0.6 : 0.65;
      for (let i = 0; i < n; i++) add(rand() < pRead ? 'read' : 'write', { path: pick(rand, files) });
      break;
    }
    case 'fan-out-in': {
      let join: string | undefined;
      while (calls.length < n) {
        const k = Math.min(intIn(rand, 3, 6), Math.max(1, n - calls.length - 1));
        const searches: string[] = [];
        for (let i = 0; i < k; i++)
          searches.push(add('search', join && rand() < 0.5 ? { q: `q${calls.length}`, ctx: ref(join) } : { q: `q${calls.length}` }));
        join = add('join', { in: searches.map(ref) });
      }
      break;
    }
    case 'random-dag': {
      const files = [1, 2, 3, 4, 5, 6].map((f) => `/repo/m${f}.ts`);
      const earlier: string[] = [];
      while (calls.length < n) {
        const width = Math.min(intIn(rand, 2, 6), n - calls.length);
        const layer: string[] = [];
        for (let i = 0; i < width; i++) {
          const r = rand();
          const refs = earlier.length === 0 ? 0 : r < 0.3 ? 0 : r < 0.75 ? 1 : 2;
          const deps = [...new Set(Array.from({ length: refs }, () => pick(rand, earlier)))].map(ref);
          const kind = rand();
          const args: Record<string, unknown> = deps.length > 0 ? { in: deps } : {};
          if (kind < 0.45) layer.push(add('read', { ...args, path: pick(rand, files) }));
          else if (kind < 0.7) layer.push(add('write', { ...args, path: pick(rand, files) }));
          else layer.push(add('search', { ...args, q: `q${calls.length}` }));
        }
        earlier.push(...layer);
      }
      break;
    }
  }
  return { family, seed, calls };
}

function hashSeed(family: string, seed: number): number {
  let h = 2166136261;
  for (const ch of `${family}#${seed}`) h = Math.imul(h ^ ch.charCodeAt(0), 16777619);
  return h >>> 0;
}
