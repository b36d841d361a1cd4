// Worker-thread entry for the `worker` executor (plain JS: tinypool cannot load .ts files). It imports
// the tool's module by file URL, calls its default export `async (args, { signal }) => output` and
// returns a tagged result, so that error fields such as `retryable` survive the trip to the main thread.
// Aborts are not delivered here: the main thread terminates this thread instead, so `signal` never fires.

const never = new AbortController().signal;

/**
 * @param {{ moduleUrl: string, args: unknown }} task
 * @returns {Promise<{ ok: true, output: unknown } | { ok: false, error: { message: string, name?: string, retryable: boolean } }>}
 */
export default async function run({ moduleUrl, args }) {
  try {
    const mod = await import(moduleUrl);
    const fn = mod.default;
    if (typeof fn !== 'function') {
      return { ok: false, error: { message: `${moduleUrl} has no default export function`, retryable: false } };
    }
    const output = await fn(args, { signal: never });
    // Outputs are JSON (they are stored and sent to the model): normalise here, off the main thread.
    return { ok: true, output: output === undefined ? null : JSON.parse(JSON.stringify(output)) };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const name = err instanceof Error ? err.name : typeof err;
    return {
      ok: false,
      error: { message, name, retryable: /** @type {{ retryable?: unknown } | null | undefined} */ (err)?.retryable === true },
    };
  }
}
