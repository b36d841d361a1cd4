/** A tool call as the model asked for it (DESIGN §1). */
export interface CallInput {
  id: string;
  tool: string;
  args?: Record<string, unknown>;
  /** Set when the model's arguments could not be read (malformed JSON): the call fails `invalid_args`. */
  invalid?: string;
}

export const CALL_STATUSES = [
  'pending',
  'ready',
  'running',
  'awaiting_review',
  'succeeded',
  'failed',
  'blocked',
  'cancelled',
] as const;
export type CallStatus = (typeof CALL_STATUSES)[number];

export const RUN_STATUSES = [
  'queued',
  'running',
  'succeeded',
  'partial',
  'failed',
  'needs_replan',
  'deadlocked',
  'cancelled',
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export const TERMINAL_CALL_STATUSES: ReadonlySet<CallStatus> = new Set(['succeeded', 'failed', 'blocked', 'cancelled']);
export const TERMINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set([
  'succeeded',
  'partial',
  'failed',
  'needs_replan',
  'deadlocked',
  'cancelled',
]);

export type EdgeKind = 'data' | 'policy' | 'conflict';

export interface Edge {
  from: string;
  to: string;
  kind: EdgeKind;
  reason: string;
}

/** A plan-time finding: a cycle, or a call that cannot run. */
export interface Diagnostic {
  code: string;
  message: string;
  callId?: string;
  callIds?: string[];
}
