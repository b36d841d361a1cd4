/**
 * The catalog of call error and block codes (DESIGN §6). They are part of the API: a call's `error`
 * or `blockedBy` always carries one of these codes, never free text.
 */
export const CALL_ERROR_CODES = [
  'unknown_tool',
  'invalid_args',
  'unresolved_reference',
  'ambiguous_reference',
  'policy_denied',
  'missing_required_predecessor',
  'cycle',
  'dependency_failed',
  'dependency_blocked',
  'awaiting_replan',
  'superseded',
  'review_rejected',
  'cancelled',
  'timeout',
  'tool_error',
  'interrupted',
  'args_too_large',
  'output_too_large',
  'unrecoverable',
  'hook_denied',
  'hook_rejected',
  'hook_changed_resources',
  'queue_timeout',
  'outcome_unknown',
] as const;

export type CallErrorCode = (typeof CALL_ERROR_CODES)[number];

/** A call's `error` or `blockedBy`. */
export interface CallError {
  code: CallErrorCode;
  message: string;
  /** The call this error points at (the failed dependency, the waited-on call…). */
  callId?: string;
  details?: unknown;
}

export function callError(code: CallErrorCode, message: string, extra: Omit<CallError, 'code' | 'message'> = {}): CallError {
  return { code, message, ...extra };
}
