/**
 * Builtin executor (DESIGN §2): `sleep` ({ ms } → { ms }, abortable), `echo` (returns its args) and
 * `fail` (tool_error with args.message, retryable when args.retryable === true). The attempt's
 * `timeoutMs` applies to all of them.
 */
import type { ExecuteRequest, ExecuteResult, Executor } from './types.js';
import { abortResult, deadline, messageOf, toolError, type Deadline } from './deadline.js';

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

export function createBuiltinExecutor(): Executor {
  return {
    async execute(request: ExecuteRequest): Promise<ExecuteResult> {
      const d = deadline(request);
      try {
        if (d.signal.aborted) return abortResult(d);
        const spec = request.tool.executor;
        const name = spec.kind === 'builtin' ? spec.name : undefined;
        const args = request.args ?? {};
        switch (name) {
          case 'sleep':
            return await sleep(args, d);
          case 'echo':
            return { ok: true, output: args };
          case 'fail':
            return fail(args);
          default:
            return toolError(`unknown builtin ${JSON.stringify(name)}`, false);
        }
      } catch (err) {
        return toolError(messageOf(err), false);
      } finally {
        d.dispose();
      }
    },
    async close() {},
  };
}
