/**
 * The events the core emits (DESIGN §7). The shell numbers them (`seq`, gapless per run), persists
 * them, and streams them; a run's view is derived from them alone (see view.ts).
 */
export const EVENT_TYPES = [
  'run.created',
  'run.started',
  'call.ready',
  'call.started',
  'call.retry_scheduled',
  'call.succeeded',
  'call.failed',
  'call.blocked',
  'call.cancelled',
  'call.awaiting_review',
  'call.compensated',
  'review.decided',
  'run.needs_replan',
  'run.replanned',
  'run.completed',
  'run.calls_added',
  'run.sealed',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface CoreEvent {
  type: EventType;
  runId: string;
  callId?: string;
  /** The scheduler's clock: epoch ms in the live engine, virtual ms in replay. */
  at: number;
  data: Record<string, unknown>;
}

/** A persisted event. */
export interface RunEvent extends CoreEvent {
  seq: number;
}
