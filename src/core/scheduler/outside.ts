/**
 * Outside waits (DESIGN §8: a recording holds every delay that came from outside the pure scheduler).
 * A replay runs one run alone, so a start that waited for anything the run cannot see by itself must
 * say so, or the replay starts it early:
 *
 * - calls of other runs that held a limit or lock it needed (or took the rate tokens it waited for);
 * - the cluster (DESIGN §12): a refused permit, and the permit's own round trip (`asked` → start);
 * - a timer that fired late (a rate's wake-up, on a loaded engine).
 *
 * Each start's `call.started` carries `waited` (`StartWait`) when it waited for any of these: when it
 * joined its run's ready set (`since`), when the cluster was asked (`asked`), and `outside` when the
 * wait before that may not have been its own run's. The test is conservative and cheap (no scan): other
 * runs held something when it was queued, or one took something while it waited, or the cluster
 * refused it, or a late timer let it go. A wait marked `outside` that was really the run's own only
 * costs replay the chance to recompute it; an outside wait left unmarked would make replay diverge.
 *
 * Replay (replay/replay.ts) gives `SchedulerOptions.holds`: a held attempt is skipped by dispatch
 * until its time, when replay wakes the scheduler (`Scheduler.wake`).
 */
import type { StartWait } from '../events.js';
import type { ScheduledCall, ScheduledRun, SchedulerState } from './records.js';

/** A call joins its run's ready set: a new wait begins. */
export function queued(s: SchedulerState, run: ScheduledRun, c: ScheduledCall): void {
  c.queuedAt = s.now;
  c.crowded = s.limiter.runningCount > s.limiter.inspect().runningOf(run.id);
  // A refusal of an earlier wait says nothing of this one (it is always of an older permit epoch).
  if (c.permitRefusedIn !== undefined) c.permitRefusedIn = undefined;
}

/** A call of `run` takes its limits (it starts, or asks for its permit). */
export function acquired(s: SchedulerState, run: ScheduledRun): void {
  const last = s.lastAcquire;
  if (last.runId === run.id) last.at = s.now;
  else {
    s.otherAcquireAt = last.at;
    last.runId = run.id;
    last.at = s.now;
  }
}

/** The last time a run other than `runId` took its limits. */
function othersAcquiredAt(s: SchedulerState, runId: string): number {
  return s.lastAcquire.runId === runId ? s.otherAcquireAt : s.lastAcquire.at;
}

/** At the moment its local limits let it go: whether its wait since `queuedAt` may have been outside its run. */
export function waitedOutside(s: SchedulerState, run: ScheduledRun, c: ScheduledCall): boolean {
  if (c.permitRefusedIn !== undefined) return true;
  if (s.now <= c.queuedAt) return false;
  if (c.crowded || s.timerLate || othersAcquiredAt(s, run.id) >= c.queuedAt) return true;
  // A pause another replica told (`Scheduler.paused`) lasted past the moment it became ready.
  const paused = s.outsidePauses.get(c.tool);
  return paused !== undefined && paused > c.queuedAt;
}

/** The `waited` of a start: undefined when it waited for nothing outside (the usual start). */
export function startWait(c: ScheduledCall, outside: boolean, asked: number | undefined): StartWait | undefined {
  if (asked === undefined && !outside) return undefined;
  const w: StartWait = { since: c.queuedAt };
  if (asked !== undefined) w.asked = asked;
  if (outside) w.outside = true;
  return w;
}

/**
 * Replay: whether `c`'s next attempt is held back now (`SchedulerOptions.holds`). No timer is set for
 * the hold's end (the live engine had none): replay calls `Scheduler.wake` then.
 */
export function heldBack(s: SchedulerState, run: ScheduledRun, c: ScheduledCall): boolean {
  const until = s.opts.holds?.(run.id, c.id, c.attempts + 1);
  return until !== undefined && until > s.now;
}
