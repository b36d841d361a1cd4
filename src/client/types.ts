/** The typed client's shapes that its parts share (index.ts, handlers.ts). */
import type { z } from 'zod';
import type { EventType } from '../core/events.js';
import type { BatchSchema } from '../contract/batch.js';
import type { RunSchema } from '../contract/responses.js';

export type Batch = z.input<typeof BatchSchema>;
export type Run = z.infer<typeof RunSchema>;

export interface RunEvent {
  seq: number;
  type: EventType;
  runId: string;
  callId?: string;
  at: string;
  data: Record<string, unknown>;
}
