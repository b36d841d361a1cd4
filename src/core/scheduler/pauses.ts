/**
 * Pauses (backpressure, DESIGN §4) as the runs record them (DESIGN §8: a recording holds every input
 * from outside its run). A pause reaches the limiter from an attempt's answer (`pauseFor`), from
 * another replica (`Scheduler.paused`) or from a cluster refusal that names one (`permitRefused`).
 * Every other active run that has calls of the paused tool gets a `run.tool_paused` event, and so does
 * a run that arrives (or is taken back) while the pause lasts: its replay pauses the tool at that time.
 * The run whose own attempt got the answer records nothing more: replay pauses from that attempt.
 */
import type { Pause } from '../limits.js';
import { TERMINAL_RUN_STATUSES } from '../state.js';
import { emit, type ScheduledRun, type SchedulerState, wakeAt } from './records.js';

/**
 * Pauses `p.tool` (or its keyed group) until `p.until`, and tells the runs that may wait for it,
 * but `byRun` (the run whose attempt got the answer). Returns whether it changed anything.
 */
export function pauseTool(s: SchedulerState, p: Pause, byRun?: string): boolean {
  if (p.until <= s.now || !s.limiter.pause({ ...p })) return false;
  wakeAt(s, p.until);
  for (const run of s.runs.values()) if (run.id !== byRun && mayWaitFor(run, p.tool)) record(s, run, p);
  return true;
}

/** A run that arrives, or is taken back, while pauses last: it records those of its tools. */
export function pausesFor(s: SchedulerState, run: ScheduledRun): void {
  const pauses = s.limiter.inspect().pauses;
  if (pauses.size === 0) return;
  for (const p of pauses.values()) if (p.until > s.now && mayWaitFor(run, p.tool)) record(s, run, p);
}

function record(s: SchedulerState, run: ScheduledRun, p: Pause): void {
  emit(s, 'run.tool_paused', run, undefined, {
    tool: p.tool,
    ...(p.key !== undefined ? { key: p.key } : {}),
    until: p.until,
    ...(p.status !== undefined ? { status: p.status } : {}),
  });
}

/** Whether the active run has (or, held or open, may have) a call of `tool` or one compensated by it. */
function mayWaitFor(run: ScheduledRun, tool: string): boolean {
  if (TERMINAL_RUN_STATUSES.has(run.status)) return false;
  if (run.stream !== undefined && !run.stream.sealed) return true;
  if (run.heldCalls?.some((c) => c.tool === tool)) return true;
  for (const c of run.calls) if (c.tool === tool || c.manifest?.compensate?.tool === tool) return true;
  return false;
}
