/**
 * Compensation (DESIGN §6): when a run fails fast, the succeeded calls whose tool declares
 * `compensate` are undone one at a time, newest first, each reported as a `call.compensated` event.
 * The run ends only when the last compensation has.
 */
import { callError, type CallError } from '../errors.js';
import { resolveValue } from '../references.js';
import type { ToolManifest } from '../tool.js';
import type { AttemptResult } from './api.js';
import { emit, markDirty, type ScheduledCall, type ScheduledRun, type SchedulerState } from './records.js';

/** Succeeded calls that declare a compensation, newest first. */
export function compensationQueue(run: ScheduledRun): number[] {
  return run.calls
    .filter((c) => c.status === 'succeeded' && c.manifest?.compensate)
    .sort((a, b) => (b.endedAt as number) - (a.endedAt as number) || b.index - a.index)
    .map((c) => c.index);
}

/** Starts the next compensation in the run's queue (those that cannot start are reported failed). */
export function startNextCompensation(s: SchedulerState, run: ScheduledRun): void {
  const queue = run.compensations as number[];
  while (queue.length > 0) {
    const c = run.calls[queue.shift() as number] as ScheduledCall;
    const spec = (c.manifest as ToolManifest).compensate as NonNullable<ToolManifest['compensate']>;
    const tool = s.opts.catalog.get(spec.tool);
    const args = resolveValue(spec.args, (ref) =>
      ref.target === 'self' ? { value: ref.field === 'args' ? (c.resolved ?? c.args) : c.output } : undefined,
    );
    if (!tool || !args.ok) {
      const error: CallError = !tool
        ? callError('unknown_tool', `no tool named ${spec.tool} to compensate ${c.id}`)
        : (args as { error: CallError }).error;
      emit(s, 'call.compensated', run, c, { status: 'failed', error });
      continue;
    }
    run.compensating = c.index;
    run.compensationStartedAt = s.now;
    s.out.starts.push({
      kind: 'compensation',
      runId: run.id,
      callId: c.id,
      index: c.index,
      attempt: 1,
      tool,
      args: args.value as Record<string, unknown>,
      timeoutMs: tool.timeoutMs,
    });
    return;
  }
  run.compensating = undefined;
  markDirty(s, run);
}

export function compensationEnded(s: SchedulerState, run: ScheduledRun, c: ScheduledCall, r: AttemptResult): void {
  const startedAt = run.compensationStartedAt as number;
  emit(
    s,
    'call.compensated',
    run,
    c,
    r.ok ? { status: 'succeeded', output: r.output, startedAt } : { status: 'failed', error: r.error, startedAt },
  );
  startNextCompensation(s, run);
}
