import type { CallError } from '../core/errors.js';
import type { ToolManifest } from '../core/tool.js';

/** One attempt of one call, handed to an executor by the engine. */
export interface ExecuteRequest {
  runId: string;
  callId: string;
  tool: ToolManifest;
  /** Resolved args (references already substituted). */
  args: Record<string, unknown>;
  /** 1 for the first attempt. */
  attempt: number;
  /**
   * Aborted on cancel, fail-fast, or the engine's own timeout. The engine makes it on first read (an
   * AbortSignal costs microseconds, and an instant tool never needs one): read it from the request, do
   * not copy it out before the attempt needs it.
   */
  readonly signal: AbortSignal;
  /**
   * Optional: whether `signal` has fired, without making it (the engine's requests have it). An
   * executor that only needs to know that checks `request.aborted?.() ?? request.signal.aborted`.
   */
  aborted?(): boolean;
  /** The attempt's time budget; the executor enforces it too and reports `timeout`. */
  timeoutMs: number;
  /** A call of a `client` tool (DESIGN §17): the token its agent answers this attempt with. */
  dispatch?: { token: string };
  /** The W3C trace context of the attempt's span, with tracing on, for a tool whose executor sends it on (`http`: DESIGN §15). */
  traceparent?: string;
}

export type ExecuteResult =
  | { ok: true; output: unknown }
  | {
      ok: false;
      /** `tool_error`, `timeout` or `cancelled`; the HTTP status or thrown message goes in `details`. */
      error: CallError;
      /** Whether a retry may help (408, 429, 5xx, network errors, timeouts, `retryable: true`). */
      retryable: boolean;
      /** From a `Retry-After` header: the least time to wait before the next attempt. */
      retryAfterMs?: number;
      /**
       * Backpressure (DESIGN §4): a 429, a 503 with Retry-After, or an MCP error result with
       * `_meta.retryAfterMs` asks that the tool be left alone this long (ms): the scheduler pauses it.
       */
      pauseMs?: number;
      /** The HTTP status that asked for the pause. */
      pauseStatus?: number;
      /**
       * The request was sent and no answer came (a connection lost mid-call): for a non-idempotent
       * tool the attempt fails `outcome_unknown` (core/outcome.ts). A timeout says so by its code.
       */
      unanswered?: true;
    };

/** Runs attempts of one kind of tool. Never throws: every failure is an `ExecuteResult`. */
export interface Executor {
  execute(request: ExecuteRequest): Promise<ExecuteResult>;
  close(): Promise<void>;
}
