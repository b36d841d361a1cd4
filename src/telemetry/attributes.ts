/**
 * The names on toolgraph's spans (DESIGN §15): the run span `toolgraph.run`, and one span per attempt
 * named `execute_tool <tool>` after the OpenTelemetry GenAI semantic conventions
 * (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/#execute-tool-span).
 */
import type { RunStatus } from '../core/calls.js';

export const RUN_SPAN = 'toolgraph.run';
/** The span event for a time an attempt waited on limits (ready → start). */
export const LIMIT_WAIT_EVENT = 'toolgraph.limit_wait';

export const ATTR = {
  runId: 'toolgraph.run.id',
  tenant: 'toolgraph.tenant',
  runStatus: 'toolgraph.run.status',
  attempt: 'toolgraph.attempt',
  waitMs: 'toolgraph.wait_ms',
  /** On the span of a compensation (DESIGN §6): the attempt of the tool that undoes the call. */
  compensation: 'toolgraph.compensation',
  /** On a run span started again by a replan (the first one ended with `needs_replan`). */
  replanned: 'toolgraph.run.replanned',
  operation: 'gen_ai.operation.name',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  errorType: 'error.type',
} as const;

export const EXECUTE_TOOL = 'execute_tool';

export function attemptSpanName(tool: string): string {
  return `${EXECUTE_TOOL} ${tool}`;
}

/** The run statuses whose run span says ERROR. */
export function runFailed(status: RunStatus): boolean {
  return status === 'failed' || status === 'deadlocked';
}
