/** A tool call as the model asked for it (DESIGN §1). */
export interface CallInput {
  id: string;
  tool: string;
  args?: Record<string, unknown>;
  /** Set when the model's arguments could not be read (malformed JSON): the call fails `invalid_args`. */
  invalid?: string;
}

// The statuses and what "ended" means live with their state machines (state.ts).
export { CALL_STATUSES, RUN_STATUSES, TERMINAL_CALL_STATUSES, TERMINAL_RUN_STATUSES, type CallStatus, type RunStatus } from './state.js';

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
