/**
 * Parsing a part of a request (its body, query, path or a header) with its zod schema: a failure is a
 * 400 whose message names each bad field.
 */
import type { z } from 'zod';
import { ApiError } from './errors.js';
import { formatIssues } from '../contract/issues.js';

export function parseRequestPart<S extends z.ZodType>(schema: S, value: unknown, what: string): z.infer<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const problems = formatIssues(r.error, what);
  throw new ApiError('invalid_request', `invalid ${what}: ${problems.join('; ')}`, { problems });
}
