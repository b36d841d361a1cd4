/**
 * A fast path for the commonest body of `POST /v1/runs`: `{ calls, waitMs?, failure?, tenant? }` with
 * plain calls `{ id, tool, args? }`. zod's `SubmitBodySchema` (contract/requests.ts) costs about as
 * much as planning the run; this checks the same rules by hand, and answers only when the body
 * obviously passes them. Anything else (another key, a value of another type, any doubt) answers
 * `undefined`, and the caller asks zod, which then decides and words the 400. So it may only ever
 * *accept* what zod accepts, with the value zod would give (tests/unit/api-fast-body.test.ts checks both
 * on generated bodies).
 */
import type { CallInput } from '../core/calls.js';
import { FAILURE_MODES, type FailureMode } from '../core/tool.js';
import { CALL_ID, depthOf, MAX_ARGS_DEPTH, MAX_WAIT_MS, TENANT } from '../contract/batch.js';

export interface FastSubmitBody {
  calls: CallInput[];
  waitMs?: number;
  failure?: FailureMode;
  tenant?: string;
}

const FAILURES: ReadonlySet<string> = new Set(FAILURE_MODES);

/** A plain object (what JSON.parse makes of `{…}`): no array, no null, no other prototype. */
function plain(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype;
}

/** The body as zod's `SubmitBodySchema` would give it, if it surely passes; else undefined (ask zod). */
export function fastSubmitBody(body: unknown): FastSubmitBody | undefined {
  if (!plain(body)) return undefined;
  let calls: CallInput[] | undefined;
  const out: FastSubmitBody = { calls: [] };
  for (const key in body) {
    if (!Object.hasOwn(body, key)) return undefined;
    const v = body[key];
    switch (key) {
      case 'calls':
        calls = fastCalls(v);
        if (!calls) return undefined;
        break;
      case 'waitMs':
        if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > MAX_WAIT_MS) return undefined;
        out.waitMs = v;
        break;
      case 'failure':
        if (typeof v !== 'string' || !FAILURES.has(v)) return undefined;
        out.failure = v as FailureMode;
        break;
      case 'tenant':
        if (typeof v !== 'string' || !TENANT.test(v)) return undefined;
        out.tenant = v;
        break;
      default:
        return undefined;
    }
  }
  if (!calls) return undefined;
  out.calls = calls;
  return out;
}

function fastCalls(v: unknown): CallInput[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const seen = new Set<string>();
  const calls: CallInput[] = [];
  for (const c of v as unknown[]) {
    if (!plain(c)) return undefined;
    let id: string | undefined;
    let tool: string | undefined;
    let args: Record<string, unknown> | undefined;
    for (const key in c) {
      if (!Object.hasOwn(c, key)) return undefined;
      const x = c[key];
      if (key === 'id') {
        if (typeof x !== 'string' || !CALL_ID.test(x)) return undefined;
        id = x;
      } else if (key === 'tool') {
        if (typeof x !== 'string' || x.length < 1 || x.length > 200) return undefined;
        tool = x;
      } else if (key === 'args') {
        if (!plain(x) || depthOf(x) > MAX_ARGS_DEPTH) return undefined;
        args = { ...x };
      } else return undefined;
    }
    if (id === undefined || tool === undefined || seen.has(id)) return undefined;
    seen.add(id);
    calls.push(args === undefined ? { id, tool } : { id, tool, args });
  }
  return calls;
}
