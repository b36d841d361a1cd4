/**
 * Client-run tools (DESIGN §17): the agent that submitted the run executes the call and posts its
 * result. The engine stamps each attempt of a `client` tool with an unguessable token (`dispatchToken`)
 * that its `call.started` carries; this executor then waits for `answer` with that token, or for the
 * attempt's time budget or abort, exactly as another executor waits for its tool (deadline.ts), so a
 * timeout or a cancel ends a client call the way it ends any other.
 *
 * A result is taken only for the attempt that waits now, and only with its token: an earlier
 * attempt's, one that timed out or was cancelled, one abandoned when the replica lost the run, or a
 * wrong token is `stale` and changes nothing. Tokens are compared in constant time.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { ExecuteRequest, ExecuteResult, Executor } from './types.js';
import { abortResult, cancelledResult, deadline, messageOf, toolError } from './deadline.js';

/** What an agent answers for one attempt: its output, or an error (retryable only if it says so). */
export type ClientAnswer = { output: unknown } | { error: { message: string; retryable?: boolean } };

/** Whether the answer was taken (`accepted`, with the attempt it ended) or not (`stale`). */
export type AnswerOutcome = { accepted: true; attempt: number } | { accepted: false };

/** A fresh token for one attempt: 144 random bits, URL-safe. */
export function dispatchToken(): string {
  return randomBytes(18).toString('base64url');
}

/** Whether `tool` is run by its agent. */
export function isClientTool(tool: { executor?: { kind?: string } } | undefined): boolean {
  return tool?.executor?.kind === 'client';
}

interface Waiting {
  attempt: number;
  token: Buffer;
  /** Set once the attempt runs here (`execute`); until then it is only announced. */
  settle?: (result: ExecuteResult) => void;
  /** An answer that came before the attempt ran here, for `execute` to take at once. */
  early?: ExecuteResult;
}

function sameToken(a: Buffer, b: string): boolean {
  const other = Buffer.from(b, 'utf8');
  return a.length === other.length && timingSafeEqual(a, other);
}

function resultOf(answer: ClientAnswer): ExecuteResult {
  return 'error' in answer
    ? toolError(answer.error.message, answer.error.retryable === true, { message: answer.error.message })
    : { ok: true, output: answer.output };
}

/**
 * The attempts of client tools that wait for their agent, by run and call. An attempt is announced
 * when its token is made, before its `call.started` is stored (`announce`): an agent that reads that
 * event from the store (another replica's feed, say) may answer before the engine has handed the
 * attempt to this executor, and such an answer is kept for it (`early`), not refused.
 */
export class ClientDesk implements Executor {
  private readonly waiting = new Map<string, Waiting>();
  private closed = false;

  /** How many attempts are announced or wait for their agent now. */
  get size(): number {
    return this.waiting.size;
  }

  /** An attempt whose token is made: its answer is taken from now on, even before it runs here. */
  announce(runId: string, callId: string, attempt: number, token: string): void {
    this.waiting.set(keyOf(runId, callId), { attempt, token: Buffer.from(token, 'utf8') });
  }

  /** Forgets the announced attempts that never ran here (of one run, or all): their runs were dropped. */
  forgetUnrun(runId?: string): void {
    const prefix = runId === undefined ? undefined : keyOf(runId, '');
    for (const [key, w] of this.waiting) if (!w.settle && (prefix === undefined || key.startsWith(prefix))) this.waiting.delete(key);
  }

  execute(request: ExecuteRequest): Promise<ExecuteResult> {
    const token = request.dispatch?.token;
    if (token === undefined)
      return Promise.resolve(toolError(`${request.callId}: a client tool's attempt came without a dispatch token`, false));
    const key = keyOf(request.runId, request.callId);
    let waiting = this.waiting.get(key);
    if (!waiting || waiting.settle || waiting.attempt !== request.attempt || !sameToken(waiting.token, token)) {
      waiting = { attempt: request.attempt, token: Buffer.from(token, 'utf8') };
      this.waiting.set(key, waiting);
    }
    const w = waiting;
    if (this.closed) {
      this.waiting.delete(key);
      return Promise.resolve(cancelledResult());
    }
    if (w.early !== undefined) {
      this.waiting.delete(key);
      return Promise.resolve(w.early);
    }
    const d = deadline(request);
    return new Promise<ExecuteResult>((resolve) => {
      const done = (result: ExecuteResult) => {
        if (this.waiting.get(key) === w) this.waiting.delete(key);
        d.signal.removeEventListener('abort', onAbort);
        d.dispose();
        resolve(result);
      };
      const onAbort = () => done(abortResult(d));
      w.settle = done;
      if (d.signal.aborted) return done(abortResult(d));
      d.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Ends the waiting attempt of the call with the agent's answer, if `token` is its token (once). */
  answer(runId: string, callId: string, token: string, answer: ClientAnswer): AnswerOutcome {
    const w = this.waiting.get(keyOf(runId, callId));
    if (!w || w.early !== undefined || !sameToken(w.token, token)) return { accepted: false };
    let result: ExecuteResult;
    try {
      result = resultOf(answer);
    } catch (err) {
      result = toolError(messageOf(err), false);
    }
    if (w.settle) w.settle(result);
    else w.early = result;
    return { accepted: true, attempt: w.attempt };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const w of [...this.waiting.values()]) w.settle?.(cancelledResult());
    this.waiting.clear();
  }
}

function keyOf(runId: string, callId: string): string {
  return `${runId}\u0000${callId}`;
}

/** `base`, but with the attempts of client tools handed to `desk`. */
export function withClientDesk(base: Executor, desk: ClientDesk): Executor {
  return {
    execute: (request) => (isClientTool(request.tool) ? desk.execute(request) : base.execute(request)),
    close: async () => {
      await Promise.allSettled([desk.close(), base.close()]);
    },
  };
}
