/**
 * The call state machine (DESIGN §6).
 *
 *   pending          → ready | awaiting_review | failed | blocked | cancelled
 *   ready            → running | pending (a limit moved it back: never) | failed | blocked | cancelled
 *   awaiting_review  → pending | ready | failed (review_rejected) | blocked | cancelled
 *   running          → succeeded | failed | cancelled | pending (a retry waits for its backoff)
 *   blocked          → cancelled (superseded by a replan)
 *   succeeded, failed, cancelled: final
 *
 * `transition()` refuses every other move: a bug in the scheduler shows up as an exception in tests
 * instead of as a silently wrong run.
 */
import type { CallStatus } from './calls.js';

const EXITS: Record<CallStatus, readonly CallStatus[]> = {
  pending: ['ready', 'awaiting_review', 'failed', 'blocked', 'cancelled'],
  ready: ['running', 'failed', 'blocked', 'cancelled'],
  awaiting_review: ['pending', 'ready', 'failed', 'blocked', 'cancelled'],
  running: ['succeeded', 'failed', 'cancelled', 'pending'],
  blocked: ['cancelled'],
  succeeded: [],
  failed: [],
  cancelled: [],
};

export class IllegalTransition extends Error {
  constructor(callId: string, from: CallStatus, to: CallStatus) {
    super(`call ${callId}: illegal transition ${from} → ${to}`);
  }
}

export function transition(call: { id: string; status: CallStatus }, to: CallStatus): void {
  if (!EXITS[call.status].includes(to)) throw new IllegalTransition(call.id, call.status, to);
  call.status = to;
}

export function isTerminal(status: CallStatus): boolean {
  return status === 'succeeded' || status === 'failed' || status === 'blocked' || status === 'cancelled';
}
