/**
 * The benchmark suite: presets (quick, full, and a tiny one for tests), running the parts in order
 * (makespan, core overhead, HTTP), and putting together the report and the JSON document.
 */
import { existsSync } from 'node:fs';
import os from 'node:os';
import { createBuiltinExecutor } from '../executors/builtin.js';
import { runCoreIsolated, type CoreOptions, type CoreResult } from './core.js';
import { runHttp, type HttpOptions, type HttpResult } from './http.js';
import { runMakespan, type MakespanOptions } from './makespan.js';
import { renderReport, type ReportMeta } from './report.js';
import { summarizeFamily, targets, toJson, type FamilySummary } from './summary.js';
import { settle } from './timing.js';
import { benchConfig, FAMILIES } from './workloads.js';

export const PARTS = ['makespan', 'core', 'http'] as const;
export type Part = (typeof PARTS)[number];

export interface Preset {
  makespan: Omit<MakespanOptions, 'log' | 'families'>;
  core: Omit<CoreOptions, 'log'>;
  http: Omit<HttpOptions, 'log'>;
  /** Also run the HTTP part with the store on /dev/shm, to tell the fsync cost from the rest. */
  tmpfs?: Omit<HttpOptions, 'log'>;
}

export const PRESETS: Record<'full' | 'quick' | 'tiny', Preset> = {
  full: {
    makespan: { seeds: 10, calls: 40, smallSeeds: 8, smallCalls: 10, optimumMs: 5000 },
    core: {
      schedulerNodes: 100_000,
      schedulerRepeats: 3,
      buildSizes: [
        [1_000, 7],
        [10_000, 5],
        [100_000, 3],
      ],
      engineRepeats: 5,
      engineBatch: 1000,
      engineSmallRuns: 500,
    },
    http: { clients: 8, durationMs: 2500, rounds: 8, warmupMs: 1000 },
    tmpfs: { clients: 8, durationMs: 3000, rounds: 2, warmupMs: 1000 },
  },
  quick: {
    makespan: { seeds: 3, calls: 40, smallSeeds: 4, smallCalls: 10, optimumMs: 2000 },
    // More, shorter repeats than before (3 scheduler runs, 4 rounds of 1.2 s): single runs and rounds
    // vary by ±20–40% on a shared 2-core machine, and a median of 3 or 4 moved with them.
    core: {
      schedulerNodes: 100_000,
      schedulerRepeats: 5,
      buildSizes: [
        [1_000, 3],
        [10_000, 1],
        [100_000, 1],
      ],
      engineRepeats: 2,
      engineBatch: 1000,
      engineSmallRuns: 300,
    },
    http: { clients: 8, durationMs: 1000, rounds: 8, warmupMs: 500 },
  },
  tiny: {
    makespan: { seeds: 1, calls: 6, smallSeeds: 1, smallCalls: 5, optimumMs: 200 },
    core: {
      schedulerNodes: 2_000,
      schedulerRepeats: 1,
      buildSizes: [
        [100, 1],
        [1_000, 1],
      ],
      engineRepeats: 1,
      engineBatch: 50,
      engineSmallRuns: 10,
    },
    http: { clients: 2, durationMs: 300, rounds: 1, warmupMs: 100 },
  },
};

export interface SuiteOptions {
  preset: keyof typeof PRESETS;
  parts: readonly Part[];
  /** Overrides the preset's seed count. */
  seeds?: number;
  command: string;
  log: (line: string) => void;
}

export interface SuiteResult {
  report: string;
  json: ReturnType<typeof toJson>;
  families: FamilySummary[];
  core?: CoreResult;
  http?: HttpResult;
}

export async function runSuite(o: SuiteOptions): Promise<SuiteResult> {
  const p = PRESETS[o.preset];
  const makespan = { ...p.makespan, ...(o.seeds !== undefined ? { seeds: o.seeds } : {}) };
  const started = performance.now();
  const loadBefore = os.loadavg();
  const executor = createBuiltinExecutor();
  const log = o.log;
  let families: FamilySummary[] = [];
  let core: CoreResult | undefined;
  let http: HttpResult | undefined;
  let tmpfs: HttpResult | undefined;
  try {
    if (o.parts.includes('makespan')) {
      log(`makespan: ${FAMILIES.length} families × ${makespan.seeds} seeds`);
      const raw = await runMakespan({ ...makespan, families: FAMILIES, log }, benchConfig(), executor);
      families = raw.map(summarizeFamily);
      await settle();
    }
    if (o.parts.includes('core')) {
      log('core overhead');
      core = await runCoreIsolated({ ...p.core, log }, executor);
      await settle();
    }
    if (o.parts.includes('http')) {
      log('http');
      http = await runHttp({ ...p.http, log }, executor);
      if (p.tmpfs && existsSync('/dev/shm')) {
        log('http, diagnostic: the store on /dev/shm');
        await settle();
        tmpfs = await runHttp({ ...p.tmpfs, log }, executor, '/dev/shm');
      }
    }
  } finally {
    await executor.close();
  }
  const meta: ReportMeta = {
    command: o.command,
    quick: o.preset !== 'full',
    date: new Date().toISOString(),
    node: process.version,
    cpu: os.cpus()[0]?.model ?? 'unknown CPU',
    cores: os.cpus().length,
    loadBefore,
    loadAfter: os.loadavg(),
    seconds: (performance.now() - started) / 1000,
    seeds: makespan.seeds,
    calls: makespan.calls,
    smallCalls: makespan.smallCalls,
  };
  const ts = targets(families, core, http);
  const report = renderReport(meta, ts, families, core, http, tmpfs);
  const json = toJson(families, core, http ? { ...http, ...(tmpfs ? { tmpfs } : {}) } : undefined, { ...meta });
  return { report, json, families, ...(core ? { core } : {}), ...(http ? { http } : {}) };
}
