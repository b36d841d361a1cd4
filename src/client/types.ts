/** The typed client's shapes that its parts share (index.ts, handlers.ts). */
import type { z } from 'zod';
import type { EventType } from '../core/events.js';
import type { BatchSchema } from '../contract/batch.js';
import type { SubmitBodySchema } from '../contract/requests.js';
import type { RunSchema } from '../contract/responses.js';

/**
 * A submission: the calls, and optionally one run per key (`concurrencyKey` with `onConcurrent`:
 * `queue` by default, `cancel_running` or `reject`, which answers 409 `concurrent_run`), and a `priority`
 * (1 most urgent to 5, default 3; more urgent than the key's `maxPriority` answers 403
 * `priority_not_allowed`; DESIGN §4).
 */
export type Batch = z.input<typeof BatchSchema> & Pick<z.input<typeof SubmitBodySchema>, 'concurrencyKey' | 'onConcurrent' | 'priority'>;
export type Run = z.infer<typeof RunSchema>;

export interface RunEvent {
  seq: number;
  type: EventType;
  runId: string;
  callId?: string;
  at: string;
  data: Record<string, unknown>;
}
