/**
 * Caps on what a request body may ask of the event loop (DESIGN §4, §7), checked on the parsed JSON
 * before any validation walks it: a body with more `calls` than `limits.maxCallsPerRun` is a `413` on
 * every route that takes calls (`/v1/plan` included), and more than `MAX_TAGS` tags is a `400`. Without
 * these, a 25 MB body of 800,000 calls was validated and planned call by call (12.8 s with the event
 * loop blocked) before any count was looked at.
 */
import { ApiError } from './errors.js';

/** At most this many tags on a run (each key ≤ 100 and value ≤ 500 characters). */
export const MAX_TAGS = 64;

/** Throws the cap a parsed JSON body passes, if any. */
export function checkBodyCaps(body: unknown, maxCalls: number): void {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return;
  const b = body as Record<string, unknown>;
  const n = Math.max(
    count(b.calls),
    count(field(b.openai, 'tool_calls')),
    count(field(b.anthropic, 'content'), (x) => field(x, 'type') === 'tool_use'),
  );
  if (n > maxCalls) {
    throw new ApiError('payload_too_large', `a run takes at most ${maxCalls} calls (limits.maxCallsPerRun), got ${n}`, {
      calls: n,
      max: maxCalls,
    });
  }
  const tags = b.tags;
  if (typeof tags === 'object' && tags !== null) {
    let n = 0;
    for (const k in tags) {
      if (Object.hasOwn(tags, k) && ++n > MAX_TAGS)
        throw new ApiError('invalid_request', `a run takes at most ${MAX_TAGS} tags`, { max: MAX_TAGS });
    }
  }
}

function field(v: unknown, key: string): unknown {
  return typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[key] : undefined;
}

/** The length of an array (of the items that pass `which`), or 0 for anything else. */
function count(v: unknown, which?: (x: unknown) => boolean): number {
  if (!Array.isArray(v)) return 0;
  if (!which) return v.length;
  let n = 0;
  for (const x of v) if (which(x)) n++;
  return n;
}
