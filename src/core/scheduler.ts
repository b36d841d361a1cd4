/**
 * The scheduler's public surface: what the rest of toolgraph may use of ./scheduler/ (a folder of
 * concerns, listed in scheduler/scheduler.ts). Everything outside core/ imports the scheduler from
 * here, never a module of the folder, so its inner modules can move without touching the shell.
 */
export { Scheduler } from './scheduler/scheduler.js';
export {
  SchedulerError,
  type AbortAttempt,
  type AttemptEnded,
  type AttemptResult,
  type Output,
  type PermitRequest,
  type ReviewDecision,
  type SchedulerOptions,
  type StartAttempt,
  type SubmitOptions,
} from './scheduler/api.js';
export type { HookAnswer, HookDecision, HookMatcher, HookOn, HookRequest } from './hooks.js';
export { limitItems, waitId, type LimitInUse, type LimitSource, type WaitCount, type WaitCounts } from './scheduler/limits-in-use.js';
export { DEFAULT_PRIORITY_AGING_MS } from './scheduler/records.js';
