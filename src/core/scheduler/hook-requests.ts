/**
 * Asking for hooks (DESIGN §14): when a call is ready (`before_call`) or its last attempt has ended
 * (`after_call`), the hooks that match it go out as a `HookRequest`, and the call waits for the
 * shell's answer (hooking.ts) in the status it has: `ready` holding no permit, or `running` with its
 * permits given back and its outcome held.
 */
import type { HookOn, HookRequest } from '../hooks.js';
import { matchingHooks } from '../hooks.js';
import type { ScheduledCall, ScheduledRun, SchedulerState } from './records.js';

/** Asks the shell to run the call's hooks of `on`; false (and nothing asked) when none matches. */
export function askHooks(
  s: SchedulerState,
  run: ScheduledRun,
  c: ScheduledCall,
  on: HookOn,
  after?: Pick<HookRequest, 'status' | 'output' | 'error'>,
): boolean {
  const hooks = s.opts.hooks;
  if (hooks === undefined || hooks.length === 0 || c.manifest === undefined) return false;
  const which = matchingHooks(hooks, on, c.manifest, run.tenant);
  if (which.length === 0) return false;
  c.hookPending = on;
  c.hookAskedAt = s.now;
  const req: HookRequest = {
    on,
    runId: run.id,
    callId: c.id,
    index: c.index,
    tenant: run.tenant,
    tool: c.manifest,
    args: c.resolved ?? c.args,
    hooks: which,
    ...after,
  };
  (s.out.hooks ??= []).push(req);
  return true;
}
