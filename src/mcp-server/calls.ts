/**
 * One `tools/call` of toolgraph's MCP server (DESIGN §16): a run of that one call (or, for
 * `toolgraph_batch`, of the batch) submitted through the same `Service` as `POST /v1/runs`, tagged
 * `mcp.session: <session id>` (and `mcp.request: <JSON-RPC id>`, so a cancel can find it from any
 * replica), then awaited until it ends: every limit, lock, policy rule, hook, review, trace and
 * recording applies as for any run, and a call awaiting review answers once a human decides it.
 *
 * While it waits, a client that asked for progress (`_meta.progressToken`) hears why: the limit or
 * lock the call waits for, a review, the start, a retry; and again every `progressIntervalMs`, so a
 * client that resets its timeout on progress keeps waiting for a review. The client's cancel cancels
 * the run, and so does a client that goes away (the SDK aborts the handlers of a closed connection).
 */
import type { CallToolResult, ProgressNotification } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { z } from 'zod';
import { priorityFor, type Principal } from '../api/auth.js';
import { httpErrorOf } from '../api/errors.js';
import type { Service } from '../api/service.js';
import type { CallInput } from '../core/calls.js';
import type { RunEvent } from '../core/events.js';
import type { RunView } from '../core/view.js';
import type { WaitReason } from '../core/waiting.js';
import { CALL_ID, CallsSchema, FailureSchema } from '../contract/batch.js';
import type { SubmitRequest } from '../contract/submission.js';
import { isEnded } from '../engine/engine.js';
import { batchResult, callResult, refusedResult } from './results.js';
import { BATCH_TOOL } from './tools.js';

/** The tag that names the MCP session of a run. */
export const SESSION_TAG = 'mcp.session';
/** The tag that names the JSON-RPC request of a run. */
export const REQUEST_TAG = 'mcp.request';

/** What a call needs of its session. */
export interface McpSession {
  service: Service;
  principal: Principal;
  /** The session id, tagged on every run. */
  id: string;
  logger?: Pick<Logger, 'warn' | 'error'>;
  /** How often a waiting call repeats its progress; default 10 s. */
  progressIntervalMs?: number;
}

/** What a call needs of its request. */
export interface CallRequest {
  requestId: string | number;
  name: string;
  args: Record<string, unknown> | undefined;
  /** The client's cancel. */
  signal: AbortSignal;
  progressToken?: string | number;
  sendProgress?: (n: ProgressNotification) => Promise<void>;
  /** Resolves when the call may be submitted: the session's earlier requests have been (arrival order). */
  turn?: Promise<void>;
  /** Called once the run is submitted (or refused): the session's next request may go. */
  submitted?: () => void;
}

const BatchArgsSchema = z.strictObject({
  calls: CallsSchema.min(1),
  failure: FailureSchema.optional(),
  priority: z.int().min(1).max(5).optional(),
});

/** The call id of a one-call run: `mcp-<request id>` when that is a valid id, else `call`. */
export function callIdOf(requestId: string | number): string {
  const id = `mcp-${requestId}`;
  return CALL_ID.test(id) ? id : 'call';
}

function tagsOf(session: string, requestId: string | number): Record<string, string> {
  const request = String(requestId);
  return request.length <= 500 ? { [SESSION_TAG]: session, [REQUEST_TAG]: request } : { [SESSION_TAG]: session };
}

type Submission = { ok: true; request: SubmitRequest } | { ok: false; result: CallToolResult };

function invalid(message: string): Submission {
  return { ok: false, result: refusedResult('invalid_request', message) };
}

function issuesText(err: z.ZodError): string {
  return err.issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.join('.') : 'arguments'}: ${i.message}`)
    .join('; ');
}

/** The run a request asks for, or the result that refuses it. */
function submissionOf(s: McpSession, r: CallRequest): Submission {
  const tags = tagsOf(s.id, r.requestId);
  const args = r.args ?? {};
  if (r.name === BATCH_TOOL) {
    const max = s.service.config.limits.maxCallsPerRun;
    const n = Array.isArray(args.calls) ? args.calls.length : 0;
    if (n > max)
      return {
        ok: false,
        result: refusedResult('payload_too_large', `a run takes at most ${max} calls (limits.maxCallsPerRun), got ${n}`),
      };
    const parsed = BatchArgsSchema.safeParse(args);
    if (!parsed.success) return invalid(`the arguments of ${BATCH_TOOL} are not a batch: ${issuesText(parsed.error)}`);
    return {
      ok: true,
      request: {
        calls: parsed.data.calls,
        ...(parsed.data.failure ? { failure: parsed.data.failure } : {}),
        // Capped by the key's auth.keys[].maxPriority: a refusal priority_not_allowed (DESIGN §4).
        ...(parsed.data.priority !== undefined ? { priority: priorityFor(s.principal, parsed.data.priority) as number } : {}),
        tags,
      },
    };
  }
  const call: CallInput = { id: callIdOf(r.requestId), tool: r.name, args };
  const parsed = CallsSchema.safeParse([call]);
  if (!parsed.success) return invalid(`the call is not valid: ${issuesText(parsed.error)}`);
  // One call: `partial`, so a failure ends the run at once (a replan would leave it waiting for calls no client sends).
  return { ok: true, request: { calls: [call], failure: 'partial', tags } };
}

/** What a waiting call is told, in one line. */
function waitingText(reasons: readonly WaitReason[]): string {
  const parts = reasons.map((w) => {
    if (w.kind === 'lock') return `the lock on ${w.key ?? 'a resource'} (held by run ${w.holders[0]?.runId ?? 'another run'})`;
    const what = w.key !== undefined ? `${w.kind} limit ${w.key}` : `${w.kind} limit`;
    return w.limit !== undefined ? `${what} (${w.inUse ?? w.limit}/${w.limit} in use)` : what;
  });
  return `waiting for ${parts.join(', ')}`;
}

function progressText(e: RunEvent): string | undefined {
  switch (e.type) {
    case 'call.waiting':
      return `${e.callId}: ${waitingText(e.data.waitingFor)}`;
    case 'call.awaiting_review':
      return `${e.callId}: awaiting review (${e.data.reason}) in run ${e.runId}`;
    case 'call.started':
      return `${e.callId}: started`;
    case 'call.retry_scheduled':
      return `${e.callId}: failed, retry scheduled`;
    default:
      return undefined;
  }
}

/**
 * Sends progress while the run goes on, when the client asked for it (a token) and this replica runs
 * it (another replica's events are not followed for progress). Returns the function that stops it.
 */
function followProgress(s: McpSession, r: CallRequest, runId: string): () => void {
  const token = r.progressToken;
  const send = r.sendProgress;
  if (token === undefined || !send || !s.service.engine.has(runId)) return () => {};
  let n = 0;
  let last = `run ${runId} submitted`;
  const notify = (message: string) => {
    last = message;
    send({ method: 'notifications/progress', params: { progressToken: token, progress: ++n, message } }).catch(() => {});
  };
  notify(last);
  const unsubscribe = s.service.engine.subscribe(runId, (e) => {
    const text = progressText(e);
    if (text !== undefined) notify(text);
  });
  const timer = setInterval(() => notify(last), s.progressIntervalMs ?? 10_000);
  timer.unref();
  return () => {
    clearInterval(timer);
    unsubscribe();
  };
}

/** Waits for the run to end, or for the signal; the run as it then stands. */
async function untilEnded(s: McpSession, run: RunView, signal: AbortSignal): Promise<RunView> {
  let view = run;
  let onAbort: () => void = () => {};
  const aborted = new Promise<undefined>((resolve) => {
    onAbort = () => resolve(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    while (!isEnded(view.status) && !signal.aborted) {
      view = (await Promise.race([s.service.wait(s.principal, view.id, 60_000), aborted])) ?? view;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  return view;
}

/**
 * A refusal as the request's tool answers it: a refused `toolgraph_batch` keeps its error as text
 * only, since clients check any structured content against the tool's output schema, error or not.
 */
function refusal(r: CallRequest, result: CallToolResult): CallToolResult {
  if (r.name !== BATCH_TOOL) return result;
  const { structuredContent: _s, ...rest } = result;
  return rest;
}

/** A tools/call, answered: the result of its run, or why no run was made. */
export async function runToolCall(s: McpSession, r: CallRequest): Promise<CallToolResult> {
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    r.submitted?.();
  };
  let run: RunView;
  try {
    const sub = submissionOf(s, r);
    if (!sub.ok) return refusal(r, sub.result);
    if (r.turn) await r.turn;
    if (r.signal.aborted)
      return refusal(r, refusedResult('cancelled', 'the client cancelled the call before it was submitted: no run was made'));
    run = (await s.service.submitGrouped(s.principal, sub.request)).run;
  } catch (err) {
    const answer = httpErrorOf(err);
    if (answer.unexpected) s.logger?.error({ err }, 'mcp: a tools/call could not be submitted');
    return refusal(r, refusedResult(answer.body.error.code, answer.body.error.message, answer.headers['retry-after']));
  } finally {
    release();
  }
  const stop = followProgress(s, r, run.id);
  try {
    const view = await untilEnded(s, run, r.signal);
    if (!isEnded(view.status)) {
      // The client cancelled: so is the run (its running call is aborted, DESIGN §6).
      await s.service.cancel(s.principal, run.id).catch((err: unknown) => s.logger?.warn({ err, runId: run.id }, 'mcp: cancel failed'));
      return refusal(r, refusedResult('cancelled', `the client cancelled the call; run ${run.id} is cancelled`));
    }
    return r.name === BATCH_TOOL ? batchResult(view) : callResult(view, s.service.config.catalog.get(r.name));
  } finally {
    stop();
  }
}

/**
 * Cancels the runs of a session's request that this replica does not hold a handler for (the
 * request came to another replica): found by their tags, cancelled through the service (which sends
 * the cancel to the run's owner).
 */
export async function cancelByTags(s: McpSession, requestId: string | number): Promise<void> {
  const p = s.principal;
  const page = await s.service.store.list({
    limit: 10,
    status: ['queued', 'running'],
    tags: [
      [SESSION_TAG, s.id],
      [REQUEST_TAG, String(requestId)],
    ],
    ...(p.role === 'agent' ? { tenant: p.tenant as string } : {}),
  });
  for (const item of page.items) await s.service.cancel(p, item.id).catch(() => undefined);
}
