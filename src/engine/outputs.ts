/**
 * Scheduler outputs as the engine and its commit pipeline handle them: two merged into one, and one
 * run's part taken out of a queued output (a run withdrawn or refused).
 */
import type { AbortAttempt, HookRequest, Output, StartAttempt } from '../core/scheduler.js';

/** Appends `out` to `into`. */
export function merge(into: Output, out: Output): void {
  into.events.push(...out.events);
  into.starts.push(...out.starts);
  into.aborts.push(...out.aborts);
  if (out.hooks) (into.hooks ??= []).push(...out.hooks);
  if (out.permits) (into.permits ??= []).push(...out.permits);
  if (out.pauses) (into.pauses ??= []).push(...out.pauses);
}

/** Takes a run's events, starts, aborts and hooks out of an output; returns the starts taken (early ones too). */
export function strip<E extends { runId: string }>(
  q: {
    events: E[];
    starts: readonly StartAttempt[];
    aborts: readonly AbortAttempt[];
    early?: readonly StartAttempt[];
    hooks?: readonly HookRequest[];
  },
  runId: string,
): StartAttempt[] {
  const taken = [...(q.early ?? []), ...q.starts].filter((s) => s.runId === runId);
  q.events = q.events.filter((e) => e.runId !== runId);
  q.starts = q.starts.filter((s) => s.runId !== runId);
  q.aborts = q.aborts.filter((a) => a.runId !== runId);
  if (q.early) q.early = q.early.filter((s) => s.runId !== runId);
  if (q.hooks) q.hooks = q.hooks.filter((h) => h.runId !== runId);
  return taken;
}
