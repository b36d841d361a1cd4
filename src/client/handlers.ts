/**
 * `client.run(batch, { handlers })` (DESIGN §17): the agent keeps its tools as functions. The batch is
 * submitted; the run's event stream says when each call of a `client` tool starts (its `call.started`
 * carries the attempt's token); its handler then runs with an AbortSignal, and its output (or what it
 * threw) is posted as the attempt's result. The signal aborts when the attempt ends otherwise: a
 * timeout, a cancel, a fail-fast. A call whose tool has no handler fails with an error that says so.
 * Resolves to the run once it has ended.
 */
import type { CallInput } from '../core/calls.js';
import type { Batch, Run, RunEvent } from './types.js';

/** What a handler is told besides its args. */
export interface HandlerContext {
  /** Aborts when the attempt ends without this handler's answer (timeout, cancel, fail-fast). */
  signal: AbortSignal;
  runId: string;
  callId: string;
  tool: string;
  /** 1 for the first attempt; a retry of an idempotent tool is a new attempt. */
  attempt: number;
}

/**
 * Runs one call of a client tool; resolves to its output (any JSON). A throw is the call's error:
 * retried (for an idempotent tool with `retry`) only when the thrown value has `retryable: true`.
 */
export type ToolHandler = (args: Record<string, unknown>, ctx: HandlerContext) => unknown;

export interface RunOptions {
  /** Tool name → handler. Handlers of tools the batch does not use are ignored. */
  handlers: Record<string, ToolHandler>;
  idempotencyKey?: string;
  /** Aborting cancels the run (the handlers' signals then abort); the promise still resolves to the run. */
  signal?: AbortSignal;
}

/** What `client.run` needs of the client. */
export interface RunsClient {
  submit(batch: Batch, opts?: { idempotencyKey?: string }): Promise<Run>;
  append(runId: string, calls: CallInput[]): Promise<Run>;
  seal(runId: string): Promise<Run>;
  get(runId: string): Promise<Run>;
  cancel(runId: string): Promise<Run>;
  events(runId: string, opts?: { from?: number; signal?: AbortSignal }): AsyncGenerator<RunEvent>;
  postResult(
    runId: string,
    callId: string,
    body: { token: string; output: unknown } | { token: string; error: { message: string; retryable?: boolean } },
  ): Promise<unknown>;
}

/** An attempt whose handler this process runs. */
interface Running {
  attempt: number;
  controller: AbortController;
  /** Its handler has finished, and its answer is being posted. */
  answered: boolean;
}

/** The events that end an attempt (its handler's signal aborts unless its answer did it). */
const ENDS = new Set(['call.succeeded', 'call.failed', 'call.cancelled', 'call.retry_scheduled', 'call.blocked']);

export async function runWithHandlers(client: RunsClient, batch: Batch, opts: RunOptions): Promise<Run> {
  const run = await client.submit(batch, opts.idempotencyKey !== undefined ? { idempotencyKey: opts.idempotencyKey } : {});
  return follow(client, run, new Map((run.calls ?? []).map((c) => [c.id, c.tool])), opts);
}

/** A streamed run (DESIGN §10) whose client tools this process runs: add calls as they come, then seal. */
export interface OpenClientRun {
  readonly id: string;
  /** Appends calls in model order; each starts as soon as it is safe, its handler as it starts. */
  add(...calls: CallInput[]): Promise<Run>;
  /** No more calls. */
  seal(): Promise<Run>;
  /** Resolves to the run once it has ended (seal it first, or the server seals it at `openRunTimeoutMs`). */
  done(): Promise<Run>;
}

export async function openWithHandlers(
  client: RunsClient,
  batch: Omit<Batch, 'calls' | 'open'> & { calls?: Batch['calls'] },
  opts: RunOptions,
): Promise<OpenClientRun> {
  const run = await client.submit(
    { ...batch, calls: batch.calls ?? [], open: true } as Batch,
    opts.idempotencyKey !== undefined ? { idempotencyKey: opts.idempotencyKey } : {},
  );
  const tools = new Map((run.calls ?? []).map((c) => [c.id, c.tool]));
  const done = follow(client, run, tools, opts);
  done.catch(() => {});
  return {
    id: run.id,
    add: (...calls) => {
      for (const c of calls) tools.set(c.id, c.tool);
      return client.append(run.id, calls);
    },
    seal: () => client.seal(run.id),
    done: () => done,
  };
}

/** Runs the handlers of the run's client calls as they start, until the run ends; then the run. */
async function follow(client: RunsClient, run: Run, tools: Map<string, string>, opts: RunOptions): Promise<Run> {
  const running = new Map<string, Running>();
  const posts: Promise<void>[] = [];
  const onAbort = () => void client.cancel(run.id).catch(() => {});
  if (opts.signal?.aborted) onAbort();
  else opts.signal?.addEventListener('abort', onAbort, { once: true });
  const toolOf = async (callId: string) => {
    if (!tools.has(callId)) for (const c of (await client.get(run.id)).calls) tools.set(c.id, c.tool);
    return tools.get(callId) ?? '';
  };
  try {
    for await (const e of client.events(run.id)) {
      const callId = e.callId;
      if (callId === undefined) continue;
      if (e.type === 'call.started') {
        const dispatch = e.data.dispatch as { token?: unknown } | undefined;
        if (typeof dispatch?.token !== 'string') continue;
        const attempt = Number(e.data.attempt);
        const entry: Running = { attempt, controller: new AbortController(), answered: false };
        running.set(callId, entry);
        const ctx: HandlerContext = { signal: entry.controller.signal, runId: run.id, callId, tool: await toolOf(callId), attempt };
        posts.push(answer(client, opts.handlers, ctx, (e.data.args ?? {}) as Record<string, unknown>, dispatch.token, entry));
      } else if (ENDS.has(e.type)) {
        const r = running.get(callId);
        if (!r) continue;
        running.delete(callId);
        // Answered: the attempt's end is its own doing, and its handler's signal stays quiet.
        if (!r.answered) r.controller.abort(new Error(`${callId} attempt ${r.attempt} ended (${e.type})`));
      }
    }
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    for (const r of running.values()) if (!r.answered) r.controller.abort(new Error('the run ended'));
  }
  await Promise.allSettled(posts);
  return endedRun(client, run.id);
}

const ENDED = new Set(['succeeded', 'partial', 'failed', 'needs_replan', 'deadlocked', 'cancelled']);

/**
 * The run once its `run.completed` was seen. With PostgreSQL the event stream reads the store, and the
 * owner may answer a read from its engine a moment before it has applied that same commit: read again
 * (briefly) until the run says it has ended.
 */
export async function endedRun(client: Pick<RunsClient, 'get'>, runId: string): Promise<Run> {
  let run = await client.get(runId);
  for (let i = 0; i < 100 && !ENDED.has(run.status); i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    run = await client.get(runId);
  }
  return run;
}

/** Runs the handler of one attempt and posts what it gave; an answer the server no longer wants is dropped. */
async function answer(
  client: RunsClient,
  handlers: RunOptions['handlers'],
  ctx: HandlerContext,
  args: Record<string, unknown>,
  token: string,
  entry: Running,
) {
  const handler = Object.hasOwn(handlers, ctx.tool) ? handlers[ctx.tool] : undefined;
  let body: Parameters<RunsClient['postResult']>[2];
  if (typeof handler !== 'function') {
    body = {
      token,
      error: {
        message: `no handler for tool ${ctx.tool} was given to client.run (handlers: ${Object.keys(handlers).join(', ') || 'none'})`,
      },
    };
  } else {
    try {
      const output = await handler(args, ctx);
      body = { token, output: output === undefined ? null : output };
    } catch (err) {
      const message = clip((err instanceof Error ? err.message : String(err)) || 'the handler failed');
      const retryable = (err as { retryable?: unknown } | null)?.retryable === true;
      body = { token, error: retryable ? { message, retryable } : { message } };
    }
  }
  if (ctx.signal.aborted) return;
  entry.answered = true;
  try {
    await client.postResult(ctx.runId, ctx.callId, body);
  } catch (err) {
    // 409 stale_token: the attempt ended meanwhile (a timeout, a cancel); nothing to do. An output the
    // server refused (400: nested too deep; 413: too large) or that is not JSON is the call's error,
    // rather than a call left to time out.
    const status = (err as { status?: unknown } | null)?.status;
    if (!('output' in body) || status === 409) return;
    const message = clip(`the output of ${ctx.tool} could not be posted: ${err instanceof Error ? err.message : String(err)}`);
    await client.postResult(ctx.runId, ctx.callId, { token, error: { message } }).catch(() => {});
  }
}

/** The most characters of an error message the server takes (MAX_CLIENT_ERROR_MESSAGE). */
const MAX_MESSAGE = 10_000;

function clip(message: string): string {
  return message.length <= MAX_MESSAGE ? message : `${message.slice(0, MAX_MESSAGE - 1)}…`;
}
