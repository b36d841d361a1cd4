/**
 * From the body of `POST /v1/runs` to the one `SubmitRequest` the service and the engine take: the
 * calls in whatever form they came (a batch, or the model's own message, DESIGN §11), the tenant the
 * key may act for, and the idempotency key.
 */
import type { CallInput } from '../core/calls.js';
import { CallsSchema } from '../contract/batch.js';
import type { SubmitBody } from '../contract/requests.js';
import type { SubmitRequest } from '../contract/submission.js';
import { priorityFor, tenantFor, type Principal } from './auth.js';
import { callsFromAnthropic, callsFromOpenAi } from './formats.js';
import { parseRequestPart } from './request-part.js';
import type { ModelNames } from '../contract/model-names.js';

/** The calls of a submit body, whatever form they came in; ids unique (a 400 otherwise). */
function callsOf(body: SubmitBody, names?: Pick<ModelNames, 'tool'>): CallInput[] {
  const calls: CallInput[] | undefined = body.openai
    ? callsFromOpenAi(body.openai, names)
    : body.anthropic
      ? callsFromAnthropic(body.anthropic, names)
      : body.calls;
  if (!calls) return [];
  if (body.openai || body.anthropic)
    parseRequestPart(
      CallsSchema,
      calls.map(({ invalid: _invalid, ...c }) => c),
      body.openai ? 'openai tool_calls' : 'anthropic tool_use blocks',
    );
  return calls;
}

/** `names`: the catalog's model names, so a model's call of an exported name (`spotify_play`) runs its tool. */
export function submissionOf(
  p: Principal,
  body: SubmitBody,
  idempotencyKey: string | undefined,
  names?: Pick<ModelNames, 'tool'>,
): SubmitRequest {
  const calls = callsOf(body, names);
  return {
    tenant: tenantFor(p, body.tenant),
    calls,
    ...(body.failure ? { failure: body.failure } : {}),
    ...(body.tags ? { tags: body.tags } : {}),
    ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
    ...(body.open ? { open: true } : {}),
    ...(body.priority !== undefined ? { priority: priorityFor(p, body.priority) as number } : {}),
    ...(body.concurrencyKey !== undefined ? { concurrencyKey: body.concurrencyKey } : {}),
    ...(body.onConcurrent !== undefined ? { onConcurrent: body.onConcurrent } : {}),
  };
}
