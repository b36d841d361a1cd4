/**
 * `toolgraph/ai-sdk`: Vercel AI SDK tools in, AI SDK tools out (DESIGN §17).
 *
 * Each tool's `execute` goes through toolgraph: the calls of one model step (`generateText`,
 * `streamText`, an agent's loop) form one run, conflicting calls run in model order and the rest at
 * once, under the limits, policy and hooks of `options`. Every other field of a tool (description,
 * input schema, `toModelOutput`, `needsApproval`, …) is kept as it is, and a tool without `execute`
 * is left alone. Uses only `execute(input, { toolCallId, abortSignal })`, which AI SDK 5, 6 and 7
 * share; the package itself is never imported.
 *
 * @example
 * import { withToolgraph } from 'toolgraph/ai-sdk';
 * const result = await generateText({
 *   model,
 *   tools: withToolgraph({ read_file, write_file }, { tools: { read_file: { reads: ['file:{path}'] }, write_file: { writes: ['file:{path}'] } } }),
 *   prompt,
 * });
 */
import type { AdapterOptions } from './options.js';
import { AdapterRuntime, attach } from './runtime.js';

export type { AdapterOptions, AdapterToolFields } from './options.js';
export { ToolgraphCallError } from './step-runs.js';
export { toolgraphOf, type AdapterRuntime } from './runtime.js';

/** What the adapter needs of an AI SDK tool. */
interface AiSdkTool {
  // biome-ignore lint/suspicious/noExplicitAny: the AI SDK's own signature (input typed by each tool's schema)
  execute?: (input: any, options: any) => unknown;
}

interface ExecuteOptions {
  toolCallId?: string;
  abortSignal?: AbortSignal;
}

/** The values an async-iterable tool yielded (its last is the output). */
class Yielded {
  constructor(readonly values: unknown[]) {}
  get last(): unknown {
    return this.values[this.values.length - 1];
  }
}

/**
 * Wraps AI SDK tools so each step's calls run through toolgraph; returns the same tools.
 *
 * @param tools the `tools` you pass to `generateText`, `streamText` or an `Agent`.
 * @param options each tool's toolgraph fields (`tools`), `limits`, `policy`, `hooks`, `store` or `client`.
 */
export function withToolgraph<T extends Record<string, object>>(tools: T, options: AdapterOptions = {}): T {
  const runtime = new AdapterRuntime(Object.keys(tools), options);
  const out: Record<string, object> = {};
  for (const [name, tool] of Object.entries(tools)) {
    const execute = (tool as AiSdkTool).execute;
    out[name] = typeof execute === 'function' ? { ...tool, execute: wrapExecute(runtime, name, execute.bind(tool)) } : tool;
  }
  return attach(out as T, runtime);
}

function wrapExecute(runtime: AdapterRuntime, name: string, execute: (input: unknown, options: unknown) => unknown) {
  const generator = execute.constructor?.name === 'AsyncGeneratorFunction';
  const run = async (input: unknown, options: ExecuteOptions | undefined): Promise<unknown> => {
    const wrapped = !isRecord(input);
    const outcome = await runtime.runs.call({
      tool: name,
      args: wrapped ? { input } : input,
      ...(options?.toolCallId !== undefined ? { id: options.toolCallId } : {}),
      ...(options?.abortSignal ? { signal: options.abortSignal } : {}),
      run: async (args, signal) => {
        // The signal aborts on the framework's abort and on toolgraph's (a cancel, the tool's timeout);
        // made when the tool reads it, as most tools never do.
        let abortSignal: AbortSignal | undefined;
        const given = Object.defineProperty({ ...options }, 'abortSignal', {
          enumerable: true,
          get: () => (abortSignal ??= options?.abortSignal ? AbortSignal.any([options.abortSignal, signal]) : signal),
        });
        const value = await execute(wrapped ? args.input : args, given);
        return isAsyncIterable(value) ? new Yielded(await collect(value)) : value;
      },
      project: (value) => (value instanceof Yielded ? value.last : value),
    });
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  };
  if (!generator) return async (input: unknown, options?: ExecuteOptions) => unwrap(await run(input, options));
  // A streaming tool stays one: its values come again, in order, once its call has ended.
  return async function* (input: unknown, options?: ExecuteOptions) {
    const value = await run(input, options);
    if (value instanceof Yielded) yield* value.values;
    else yield value;
  };
}

function unwrap(value: unknown): unknown {
  return value instanceof Yielded ? value.last : value;
}

async function collect(values: AsyncIterable<unknown>): Promise<unknown[]> {
  const all: unknown[] = [];
  for await (const v of values) all.push(v);
  return all;
}

function isAsyncIterable(v: unknown): v is AsyncIterable<unknown> {
  return typeof v === 'object' && v !== null && typeof (v as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function';
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
