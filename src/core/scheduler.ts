/**
 * The scheduler's public surface; it lives in ./scheduler/ (a folder of concerns, listed in scheduler/scheduler.ts).
 * Kept so that importers of `core/scheduler.js` need not change.
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
