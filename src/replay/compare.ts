/**
 * Comparing a recording with its replay (DESIGN §9): the run's status; per call its status, output,
 * error code, number of attempts and compensation; attempts the recording lacks; and the ORDER of
 * starts, not their times (a recording carries real scheduling jitter, a replay has none).
 *
 * Order rule: for every pair of starts a, b that both made, when the recording has
 * `a.start + tolerance ≤ b.start`, the replay must not start b before a. Starts closer than the
 * tolerance count as simultaneous. The check sweeps the starts in recorded order keeping the latest
 * replay start among those recorded at least `tolerance` earlier: O(n log n), not all pairs.
 */
import { isDeepStrictEqual } from 'node:util';
import type { CallStatus, RunStatus } from '../core/calls.js';
import { formatPath } from '../config/load.js';
import type { RecordedAttempt, RecordedCallResult, Recording } from '../contract/recording.js';
import { NOT_RECORDED } from './replay.js';

/** One start: a call's attempt, or a compensation's. */
export interface StartRef {
  callId: string;
  attempt: number;
  compensation: boolean;
  recordedMs?: number;
  replayMs?: number;
}

export interface CallSummary {
  status: CallStatus;
  attempts: number;
  firstStartMs?: number;
  output?: unknown;
  error?: { code: string; message: string };
  compensation?: string;
}

export type CallField = 'presence' | 'status' | 'output' | 'error' | 'attempts' | 'compensation';

export type Divergence =
  | { kind: 'run_status'; recorded: RunStatus; replay: RunStatus }
  | {
      kind: 'call';
      callId: string;
      tool?: string;
      fields: CallField[];
      recorded?: CallSummary;
      replay?: CallSummary;
      outputDiff?: OutputDiff;
    }
  | { kind: 'order'; count: number; before: StartRef; after: StartRef }
  | { kind: 'missing_attempt'; start: StartRef; recordedAttempts: number; message: string }
  | { kind: 'input'; message: string };

/** Where two outputs first differ: a JSON path (`hits[1].url`, `(the output)` at the root) and both values there. */
export interface OutputDiff {
  path: string;
  recorded?: unknown;
  replay?: unknown;
}

/** The first place, depth first in key order, where two JSON values differ. */
export function firstJsonDifference(a: unknown, b: unknown, path: (string | number)[] = []): OutputDiff | undefined {
  if (isDeepStrictEqual(a, b)) return undefined;
  const here = (): OutputDiff => ({
    path: path.length === 0 ? '(the output)' : formatPath(path),
    ...(a !== undefined ? { recorded: a } : {}),
    ...(b !== undefined ? { replay: b } : {}),
  });
  const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
  if (!isObj(a) || !isObj(b) || Array.isArray(a) !== Array.isArray(b)) return here();
  const keys = Array.isArray(a)
    ? [...Array(Math.max(a.length, (b as unknown as unknown[]).length)).keys()]
    : [...new Set([...Object.keys(a), ...Object.keys(b)])];
  for (const k of keys) {
    const d = firstJsonDifference((a as Record<string | number, unknown>)[k], (b as Record<string | number, unknown>)[k], [...path, k]);
    if (d) return d;
  }
  return here();
}

/** The first start where the two runs part: out of order, never made by replay, or not recorded. */
export interface FirstDifference {
  what: 'order' | 'missing' | 'extra';
  start: StartRef;
  /** For `order`: the start recorded before it that replay started after it. */
  other?: StartRef;
}

export interface Comparison {
  divergences: Divergence[];
  firstDifference?: FirstDifference;
}

const keyOf = (a: { callId: string; attempt: number; compensation?: boolean }) =>
  `${a.compensation ? 'compensation' : 'call'}/${a.callId}/${a.attempt}`;

function isNotRecorded(a: RecordedAttempt): boolean {
  return !a.ok && (a.error?.details as { replay?: unknown } | undefined)?.replay === NOT_RECORDED;
}

function summarize(c: RecordedCallResult, own: readonly RecordedAttempt[] = []): CallSummary {
  return {
    status: c.status,
    attempts: own.length,
    ...(own[0] ? { firstStartMs: own[0].startMs } : {}),
    ...(c.status === 'succeeded' ? { output: c.output } : {}),
    ...(c.error ? { error: { code: c.error.code, message: c.error.message } } : {}),
    ...(c.compensation ? { compensation: c.compensation.status } : {}),
  };
}

/** Each call's own attempts (not its compensation's), in start order. */
function attemptsByCall(attempts: readonly RecordedAttempt[]): Map<string, RecordedAttempt[]> {
  const out = new Map<string, RecordedAttempt[]>();
  for (const a of attempts) {
    if (a.compensation) continue;
    const list = out.get(a.callId);
    if (list) list.push(a);
    else out.set(a.callId, [a]);
  }
  return out;
}

function compareCalls(rec: Recording, rep: Recording): Divergence[] {
  const out: Divergence[] = [];
  const tools = new Map(
    [...rec.calls, ...rec.replans.flatMap((p) => p.calls), ...rep.calls, ...rep.replans.flatMap((p) => p.calls)].map((c) => [c.id, c.tool]),
  );
  const recorded = new Map(rec.result.calls.map((c) => [c.id, c]));
  const replayed = new Map(rep.result.calls.map((c) => [c.id, c]));
  const recAttempts = attemptsByCall(rec.attempts);
  const repAttempts = attemptsByCall(rep.attempts);
  const ids = [...recorded.keys(), ...[...replayed.keys()].filter((id) => !recorded.has(id))];
  for (const id of ids) {
    const a = recorded.get(id);
    const b = replayed.get(id);
    const tool = tools.get(id);
    const base = { kind: 'call' as const, callId: id, ...(tool !== undefined ? { tool } : {}) };
    const sa = a && summarize(a, recAttempts.get(id));
    const sb = b && summarize(b, repAttempts.get(id));
    if (!sa || !sb) {
      out.push({ ...base, fields: ['presence'], ...(sa ? { recorded: sa } : {}), ...(sb ? { replay: sb } : {}) });
      continue;
    }
    const fields: CallField[] = [];
    if (sa.status !== sb.status) fields.push('status');
    else if (sa.status === 'succeeded' && !isDeepStrictEqual(sa.output, sb.output)) fields.push('output');
    if ((sa.error?.code ?? null) !== (sb.error?.code ?? null)) fields.push('error');
    if (sa.attempts !== sb.attempts) fields.push('attempts');
    if ((sa.compensation ?? null) !== (sb.compensation ?? null)) fields.push('compensation');
    if (fields.length === 0) continue;
    const outputDiff = fields.includes('output') ? firstJsonDifference(sa.output, sb.output) : undefined;
    out.push({ ...base, fields, recorded: sa, replay: sb, ...(outputDiff ? { outputDiff } : {}) });
  }
  return out;
}

function startsOf(attempts: readonly RecordedAttempt[]): Map<string, RecordedAttempt> {
  return new Map(attempts.map((a) => [keyOf(a), a]));
}

function ref(a: RecordedAttempt, recordedMs?: number, replayMs?: number): StartRef {
  return {
    callId: a.callId,
    attempt: a.attempt,
    compensation: a.compensation === true,
    ...(recordedMs !== undefined ? { recordedMs } : {}),
    ...(replayMs !== undefined ? { replayMs } : {}),
  };
}

/** Order violations among the starts both runs made, and the first start where they differ. */
function compareStarts(rec: Recording, rep: Recording, tolerance: number): { order?: Divergence; first?: FirstDifference } {
  const recStarts = startsOf(rec.attempts);
  const repStarts = startsOf(rep.attempts);
  const common = [...recStarts.values()]
    .filter((a) => repStarts.has(keyOf(a)))
    .map((a) => ({ a, rec: a.startMs, rep: (repStarts.get(keyOf(a)) as RecordedAttempt).startMs }))
    .sort((x, y) => x.rec - y.rec || x.rep - y.rep);
  let count = 0;
  let firstViolation: { before: (typeof common)[number]; after: (typeof common)[number] } | undefined;
  let j = 0;
  let latest: (typeof common)[number] | undefined;
  for (const b of common) {
    while (j < common.length && (common[j] as (typeof common)[number]).rec + tolerance <= b.rec) {
      const a = common[j] as (typeof common)[number];
      if (!latest || a.rep > latest.rep) latest = a;
      j++;
    }
    if (latest && latest.rep > b.rep) {
      count++;
      firstViolation ??= { before: latest, after: b };
    }
  }
  const candidates: { at: number; first: FirstDifference }[] = [];
  if (firstViolation) {
    const { before, after } = firstViolation;
    candidates.push({
      at: after.rec,
      first: { what: 'order', start: ref(after.a, after.rec, after.rep), other: ref(before.a, before.rec, before.rep) },
    });
  }
  const missing = [...recStarts.values()].filter((a) => !repStarts.has(keyOf(a))).sort((x, y) => x.startMs - y.startMs)[0];
  if (missing) candidates.push({ at: missing.startMs, first: { what: 'missing', start: ref(missing, missing.startMs) } });
  const extra = [...repStarts.values()].filter((a) => !recStarts.has(keyOf(a))).sort((x, y) => x.startMs - y.startMs)[0];
  if (extra) candidates.push({ at: extra.startMs, first: { what: 'extra', start: ref(extra, undefined, extra.startMs) } });
  candidates.sort((x, y) => x.at - y.at);
  const result: { order?: Divergence; first?: FirstDifference } = {};
  if (candidates[0]) result.first = candidates[0].first;
  if (firstViolation) {
    const { before, after } = firstViolation;
    result.order = { kind: 'order', count, before: ref(before.a, before.rec, before.rep), after: ref(after.a, after.rec, after.rep) };
  }
  return result;
}

/**
 * Compares a recording with the replay of it.
 *
 * @example
 * const run = replayRecording(rec);
 * const { divergences } = compareRuns(rec, run.replayed, { tolerance: 5, notes: run.notes });
 */
export function compareRuns(rec: Recording, rep: Recording, opts: { tolerance: number; notes?: readonly string[] }): Comparison {
  const divergences: Divergence[] = [];
  if (rec.result.status !== rep.result.status)
    divergences.push({ kind: 'run_status', recorded: rec.result.status, replay: rep.result.status });
  divergences.push(...compareCalls(rec, rep));
  const { order, first } = compareStarts(rec, rep, opts.tolerance);
  if (order) divergences.push(order);
  const counts = new Map<string, number>();
  for (const a of rec.attempts)
    counts.set(`${a.compensation === true}/${a.callId}`, (counts.get(`${a.compensation === true}/${a.callId}`) ?? 0) + 1);
  for (const a of rep.attempts) {
    if (!isNotRecorded(a)) continue;
    const recordedAttempts = counts.get(`${a.compensation === true}/${a.callId}`) ?? 0;
    divergences.push({
      kind: 'missing_attempt',
      start: ref(a, undefined, a.startMs),
      recordedAttempts,
      message: (a.error as { message: string }).message,
    });
  }
  for (const message of opts.notes ?? []) divergences.push({ kind: 'input', message });
  return { divergences, ...(first ? { firstDifference: first } : {}) };
}
