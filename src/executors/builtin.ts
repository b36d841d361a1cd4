/**
 * Builtin executor (DESIGN §2): `sleep` ({ ms } → { ms }, abortable), `echo` (returns its args) and
 * `fail` (tool_error with args.message, retryable when args.retryable === true). The attempt's
 * `timeoutMs` applies to all of them.
 *
 * Only `sleep` takes time, so only it gets a deadline (an AbortSignal, a timer and a listener on the
 * request's signal). `echo`, `fail` and an unknown name answer in the same call, before any timer or
 * abort could fire, so for them the deadline could only ever report an abort that came before the
 * call: they check that instead (without making the engine's lazy signal, see `ExecuteRequest.aborted`).
 */
import type { ExecuteRequest, ExecuteResult, Executor } from './types.js';
import { abortResult, cancelledResult, deadline, messageOf, toolError, type Deadline } from './deadline.js';

function sleep(args: Record<string, unknown>, d: Deadline): Promise<ExecuteResult> {
  const ms = args.ms ?? 0;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    return Promise.resolve(toolError('sleep: `ms` must be a non-negative number', false, { ms }));
  }
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      d.signal.removeEventListener('abort', onAbort);
    };
    const onAbort = () => {
      done();
      resolve(abortResult(d));
    };
    const timer = setTimeout(() => {
      done();
      resolve({ ok: true, output: { ms } });
    }, ms);
    d.signal.addEventListener('abort', onAbort, { once: true });
  });
}

function fail(args: Record<string, unknown>): ExecuteResult {
  const message = typeof args.message === 'string' ? args.message : 'failed';
  return toolError(message, args.retryable === true, { message });
}

/** A builtin that answers at once (no deadline needed), given the request is not aborted. */
function instant(name: string | undefined, args: Record<string, unknown>): ExecuteResult {
  switch (name) {
    case 'echo':
      return { ok: true, output: args };
    case 'fail':
      return fail(args);
    default:
      return toolError(`unknown builtin ${JSON.stringify(name)}`, false);
  }
}

async function timed(request: ExecuteRequest, args: Record<string, unknown>): Promise<ExecuteResult> {
  const d = deadline(request);
  try {
    if (d.signal.aborted) return abortResult(d);
    return await sleep(args, d);
  } catch (err) {
    return toolError(messageOf(err), false);
  } finally {
    d.dispose();
  }
}

export function createBuiltinExecutor(): Executor {
  return {
    execute(request: ExecuteRequest): Promise<ExecuteResult> {
      try {
        const spec = request.tool.executor;
        const name = spec.kind === 'builtin' ? spec.name : undefined;
        const args = request.args ?? {};
        if (name === 'sleep') return timed(request, args);
        if (request.aborted ? request.aborted() : request.signal.aborted) return Promise.resolve(cancelledResult());
        return Promise.resolve(instant(name, args));
      } catch (err) {
        return Promise.resolve(toolError(messageOf(err), false));
      }
    },
    async close() {},
  };
}
