/**
 * The executor of an adapter's in-process engine: an attempt of a call runs the framework tool's own
 * function, in the agent's process. The step runner (step-runs.ts) registers each call's function
 * before the call reaches the engine; the engine then runs it when the call is safe to start, as
 * often as its retry policy says, within its `timeoutMs`.
 *
 * The tool's value itself never passes through the engine: the engine gets a JSON view of it (the
 * value when it is JSON already), and the step runner hands the framework the very value the tool
 * returned, unless an `after_call` hook replaced it (DESIGN §14).
 */
import type { ExecuteRequest, ExecuteResult, Executor } from '../executors/types.js';
import { abortResult, deadline, messageOf, toolError } from '../executors/deadline.js';

/** Runs one call's tool: `args` as the engine resolved them (a `before_call` hook may have rewritten them). */
export type ToolFunction = (args: Record<string, unknown>, signal: AbortSignal) => Promise<unknown>;

/** What the last attempt of a call gave, as the tool gave it. */
export type Raw = { ok: true; value: unknown; handed: unknown } | { ok: false; error: unknown };

interface Registered {
  fn: ToolFunction;
  /** What the engine records of a value (default: the value, when it is JSON). */
  project: ((value: unknown) => unknown) | undefined;
  raw?: Raw | undefined;
}

const key = (runId: string, callId: string) => `${runId}\u0000${callId}`;

export class InProcessExecutor implements Executor {
  private readonly calls = new Map<string, Registered>();
  private closed = false;

  /** Registers the function of a call before the call is submitted. */
  register(runId: string, callId: string, fn: ToolFunction, project?: (value: unknown) => unknown): void {
    this.calls.set(key(runId, callId), { fn, project });
  }

  /** What the call's last attempt gave; forgets the call. */
  take(runId: string, callId: string): Raw | undefined {
    const k = key(runId, callId);
    const r = this.calls.get(k);
    this.calls.delete(k);
    return r?.raw;
  }

  async execute(request: ExecuteRequest): Promise<ExecuteResult> {
    const entry = this.calls.get(key(request.runId, request.callId));
    if (!entry || this.closed)
      return toolError(`no function of ${request.tool.name} is registered for call ${request.callId} in this process`, false);
    entry.raw = undefined;
    const d = deadline(request);
    try {
      if (d.signal.aborted) return abortResult(d);
      const aborted = new Promise<'aborted'>((resolve) => d.signal.addEventListener('abort', () => resolve('aborted'), { once: true }));
      const running = entry.fn(request.args, d.signal).then(
        (value) => ({ ok: true as const, value }),
        (error: unknown) => ({ ok: false as const, error }),
      );
      const outcome = await Promise.race([running, aborted]);
      if (outcome === 'aborted') return abortResult(d);
      if (outcome.ok) {
        const handed = jsonView(entry.project ? entry.project(outcome.value) : outcome.value);
        entry.raw = { ok: true, value: outcome.value, handed };
        return { ok: true, output: handed };
      }
      entry.raw = { ok: false, error: outcome.error };
      return toolError(messageOf(outcome.error), retryableOf(outcome.error));
    } catch (err) {
      return toolError(messageOf(err), false);
    } finally {
      d.dispose();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

/** A thrown error is worth a retry (when the tool has a retry policy) unless it says `retryable: false`. */
function retryableOf(err: unknown): boolean {
  return !(typeof err === 'object' && err !== null && (err as { retryable?: unknown }).retryable === false);
}

/**
 * What the engine records of a tool's value: the value itself when JSON can write it (undefined is
 * `null`), else its text (a cycle, a BigInt, a nesting too deep to walk).
 */
export function jsonView(value: unknown): unknown {
  if (value === undefined) return null;
  if (typeof value !== 'object' || value === null) {
    if (typeof value === 'bigint' || typeof value === 'function' || typeof value === 'symbol') return String(value);
    return value;
  }
  try {
    JSON.stringify(value);
    return value;
  } catch {
    return String(value);
  }
}
