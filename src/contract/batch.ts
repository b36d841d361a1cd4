/**
 * The shape of a batch of calls (zod), shared by the HTTP API, the CLI, the client and recordings: a
 * `BATCH.json` is the body of `POST /v1/runs` (DESIGN §1, §9). The OpenAPI document is generated from
 * these too.
 */
import { z } from 'zod';
import { CALL_ERROR_CODES } from '../core/errors.js';
import { CALL_STATUSES, RUN_STATUSES } from '../core/calls.js';
import { FAILURE_MODES } from '../core/tool.js';

export const MAX_ARGS_DEPTH = 64;

/** Depth of nesting of a JSON value: a scalar is 0, `{}` is 1. Stops counting past `limit`. */
export function depthOf(value: unknown, limit = MAX_ARGS_DEPTH + 1): number {
  if (value === null || typeof value !== 'object') return 0;
  let max = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop() as [unknown, number];
    if (d > max) max = d;
    if (max > limit) return max;
    for (const child of Object.values(v as object)) if (child !== null && typeof child === 'object') stack.push([child, d + 1]);
  }
  return max;
}

/** The patterns of call ids and tenants (also used by the fast path of `fast-body.ts`). */
export const CALL_ID = /^[A-Za-z0-9_.:-]{1,128}$/;
export const TENANT = /^[A-Za-z0-9_.:-]{1,64}$/;
export const MAX_WAIT_MS = 60_000;

export const CallIdSchema = z.string().regex(CALL_ID, 'a call id is 1–128 characters of A-Z a-z 0-9 _ . : -');

export const ArgsSchema = z
  .record(z.string(), z.unknown())
  .refine((v) => depthOf(v) <= MAX_ARGS_DEPTH, { message: `args may nest at most ${MAX_ARGS_DEPTH} levels deep` });

export const CallSchema = z.strictObject({
  id: CallIdSchema,
  tool: z.string().min(1).max(200),
  args: ArgsSchema.optional(),
});

export const FailureSchema = z.enum(FAILURE_MODES);
export const TagsSchema = z.record(z.string().min(1).max(100), z.string().max(500));
export const TenantSchema = z.string().regex(TENANT, 'a tenant is 1–64 characters of A-Z a-z 0-9 _ . : -');
export const WaitMsSchema = z.number().int().min(0).max(MAX_WAIT_MS);

/**
 * The indexes of the calls whose id an earlier call uses, or `taken` (the ids a run has already); empty
 * when every id is new. The one definition of "call ids are unique within a run".
 */
export function duplicateIds(calls: readonly { id: string }[], taken?: { has(id: string): boolean }): number[] {
  const seen = new Set<string>();
  const out: number[] = [];
  calls.forEach((c, i) => {
    if (seen.has(c.id) || taken?.has(c.id)) out.push(i);
    seen.add(c.id);
  });
  return out;
}

function uniqueIds(calls: { id: string }[], ctx: z.RefinementCtx): void {
  for (const i of duplicateIds(calls))
    ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `duplicate call id ${(calls[i] as { id: string }).id}` });
}

export const CallsSchema = z.array(CallSchema).superRefine(uniqueIds);

export const BatchSchema = z.strictObject({
  calls: CallsSchema,
  failure: FailureSchema.optional(),
  tags: TagsSchema.optional(),
  tenant: TenantSchema.optional(),
  waitMs: WaitMsSchema.optional(),
});
export type Batch = z.infer<typeof BatchSchema>;

export const CallErrorSchema = z.object({
  code: z.enum(CALL_ERROR_CODES),
  message: z.string(),
  callId: z.string().optional(),
  details: z.unknown().optional(),
});

export const CallStatusSchema = z.enum(CALL_STATUSES);
export const RunStatusSchema = z.enum(RUN_STATUSES);
