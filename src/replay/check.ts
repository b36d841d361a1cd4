/**
 * Checking one recording file end to end: read and validate it, replay it (under its own config or the
 * one given), compare, and keep the result as plain data for the text, JSON and JUnit reports.
 * Nothing here throws for a bad recording: an unreadable one is a result with `error`.
 */
import type { Ajv } from 'ajv';
import type { RunStatus } from '../core/calls.js';
import { createAjv } from '../config/catalog.js';
import { compareRuns, type Divergence, type FirstDifference } from './compare.js';
import { readRecording } from './load.js';
import type { Recording } from '../contract/recording.js';
import type { RecordingConfig } from './recording.js';
import { replayRecording } from './replay.js';
import { RecordingError } from './schema.js';

export interface CheckOptions {
  /** Replay under this config (what-if) instead of each recording's own. */
  config?: RecordingConfig;
  /** Starts the recording puts less than this many ms apart count as simultaneous. @default 5 */
  tolerance?: number;
  /** Shared across recordings so identical input schemas compile once. */
  ajv?: Ajv;
}

export interface RecordingResult {
  file: string;
  /** Replayed and nothing diverged. */
  ok: boolean;
  /** Set when the file could not be read or is not a valid recording (exit 2). */
  error?: string;
  runId?: string;
  calls?: number;
  recorded?: { status: RunStatus; makespanMs: number };
  replay?: { status: RunStatus; makespanMs: number };
  divergences: Divergence[];
  firstDifference?: FirstDifference;
  /** Wall time this check took. */
  durationMs: number;
}

/** When the recorded run (last) completed; older recordings without `result.endMs` use the last thing seen. */
export function recordedMakespan(rec: Recording): number {
  if (rec.result.endMs !== undefined) return rec.result.endMs;
  const times = [0, ...rec.attempts.map((a) => a.endMs), ...rec.reviews.map((r) => r.atMs), ...rec.replans.map((p) => p.atMs)];
  if (rec.cancelledAtMs !== undefined) times.push(rec.cancelledAtMs);
  return Math.max(...times);
}

/** Replays a parsed recording and compares. */
export function checkRecording(rec: Recording, file: string, opts: CheckOptions = {}): RecordingResult {
  const t0 = performance.now();
  const tolerance = opts.tolerance ?? 5;
  const run = replayRecording(rec, { tolerance, ...(opts.config ? { config: opts.config } : {}), ...(opts.ajv ? { ajv: opts.ajv } : {}) });
  const { divergences, firstDifference } = compareRuns(rec, run.replayed, { tolerance, notes: run.notes });
  return {
    file,
    ok: divergences.length === 0,
    runId: rec.run.id,
    calls: rec.calls.length + rec.replans.reduce((n, p) => n + p.calls.length, 0),
    recorded: { status: rec.result.status, makespanMs: recordedMakespan(rec) },
    replay: { status: run.replayed.result.status, makespanMs: run.makespanMs },
    divergences,
    ...(firstDifference ? { firstDifference } : {}),
    durationMs: performance.now() - t0,
  };
}

/** Reads, validates, replays and compares one file; never throws for what the file contains. */
export function checkFile(file: string, opts: CheckOptions = {}): RecordingResult {
  const t0 = performance.now();
  const ajv = opts.ajv ?? createAjv();
  try {
    return checkRecording(readRecording(file, ajv), file, { ...opts, ajv });
  } catch (e) {
    const message = e instanceof RecordingError ? e.message : `${file}: replay failed: ${(e as Error).message}`;
    return { file, ok: false, error: message, divergences: [], durationMs: performance.now() - t0 };
  }
}
