/**
 * Waiting for something that happens on its own time (a child process, a held request, a commit), by
 * probing often instead of sleeping for a guessed time.
 */

/**
 * Calls `probe` until it returns a value other than `undefined`, or throws when `timeoutMs` passes.
 * The wait between probes is short: this replaces sleeping for a guessed time.
 */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 20_000,
  everyMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Waits (probing every 5 ms, for up to a second) until `holds()` is true; throws if it never is. */
export async function untilTrue(holds: () => boolean, timeoutMs = 1000): Promise<void> {
  await until(holds.toString(), () => (holds() ? true : undefined), timeoutMs, 5);
}
