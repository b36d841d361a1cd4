// Worker-thread entry for hooks given as a `module` (plain JS: tinypool cannot load .ts files). It
// imports the hook's module by file URL, calls its default export `async (request, { signal }) =>
// answer` and returns a tagged result. Aborts are not delivered here: the main thread terminates this
// thread instead (a timeout, a cancel), so `signal` never fires.

const never = new AbortController().signal;

/**
 * @param {{ moduleUrl: string, request: unknown }} task
 * @returns {Promise<{ ok: true, answer: unknown } | { ok: false, message: string }>}
 */
export default async function run({ moduleUrl, request }) {
  try {
    const mod = await import(moduleUrl);
    const fn = mod.default;
    if (typeof fn !== 'function') return { ok: false, message: `${moduleUrl} has no default export function` };
    const answer = await fn(request, { signal: never });
    // Answers are JSON (they are stored in events and recordings): normalised here, off the main thread.
    return { ok: true, answer: answer === undefined ? null : JSON.parse(JSON.stringify(answer)) };
  } catch (err) {
    return { ok: false, message: err instanceof Error ? err.message : String(err) };
  }
}
