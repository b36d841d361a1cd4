/**
 * Recording a real run: a batch goes through the live Engine (real executors, real clock), with the
 * human side scripted — reviews decided after a delay, a cancel after some time, replans appended when
 * the run needs one — and the run's event log becomes a recording (`recordingOf`). Used by the example
 * generator (example-recordings.ts) and by the round-trip tests; nothing here is simulated.
 */
import type { CallInput } from '../src/core/calls.js';
import type { RunEvent } from '../src/core/events.js';
import type { ReviewDecision } from '../src/core/scheduler.js';
import type { FailureMode } from '../src/core/tool.js';
import type { RunView } from '../src/core/view.js';
import type { Config } from '../src/contract/config.js';
import { Engine } from '../src/engine/engine.js';
import type { Recording } from '../src/contract/recording.js';
import { recordingOf } from '../src/replay/recording.js';

export interface LiveBatch {
  runId?: string;
  tenant?: string;
  calls: CallInput[];
  failure?: FailureMode;
  tags?: Record<string, string>;
}

export interface LiveScript {
  /** How a reviewer decides a call that awaits review, and after how long (default: approve at once). */
  review?: (callId: string, args: Record<string, unknown>) => Omit<ReviewDecision, 'runId' | 'callId'> & { delayMs?: number };
  /** Cancels the run this long after it was submitted. */
  cancelAfterMs?: number;
  /** Each time the run ends `needs_replan`, the next of these is appended (after `delayMs`). */
  replans?: { delayMs?: number; calls: CallInput[] }[];
}

export interface LiveRecording {
  recording: Recording;
  view: RunView;
  events: RunEvent[];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Runs a batch on a real Engine under `config` and returns its recording.
 *
 * @example
 * const { recording } = await recordLive(loadConfig('config.yaml'), { calls }, { review: () => ({ decision: 'approve', delayMs: 20 }) });
 */
export async function recordLive(config: Config, batch: LiveBatch, script: LiveScript = {}): Promise<LiveRecording> {
  const events: RunEvent[] = [];
  const engine = new Engine({ config, sink: { append: (es) => void events.push(...es) } });
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, f: () => unknown) => {
    const t = setTimeout(() => {
      timers.delete(t);
      try {
        void Promise.resolve(f()).catch(() => {});
      } catch {
        // The run moved on (a review of a call that was cancelled meanwhile): nothing to decide.
      }
    }, ms);
    timers.add(t);
  };
  engine.onEvent((e) => {
    if (e.type !== 'call.awaiting_review' || e.callId === undefined) return;
    const callId = e.callId;
    const { delayMs = 0, ...decision } = script.review?.(callId, e.data.args) ?? { decision: 'approve' as const };
    later(delayMs, () => engine.review({ runId: e.runId, callId, ...decision }));
  });
  try {
    const run = await engine.submit({
      ...(batch.runId ? { runId: batch.runId } : {}),
      tenant: batch.tenant ?? 'default',
      calls: batch.calls,
      ...(batch.failure ? { failure: batch.failure } : {}),
      ...(batch.tags ? { tags: batch.tags } : {}),
    });
    if (script.cancelAfterMs !== undefined) later(script.cancelAfterMs, () => engine.cancel(run.id));
    const replans = [...(script.replans ?? [])];
    let view = (await engine.wait(run.id)) as RunView;
    while (view.status === 'needs_replan' && replans.length > 0) {
      const next = replans.shift() as { delayMs?: number; calls: CallInput[] };
      await sleep(next.delayMs ?? 0);
      await engine.replan(run.id, next.calls);
      view = (await engine.wait(run.id)) as RunView;
    }
    return { recording: recordingOf(events, config), view, events };
  } finally {
    for (const t of timers) clearTimeout(t);
    await engine.close();
  }
}
