/**
 * `toolgraph/openai-agents`: `withToolgraph(tools, options)` for OpenAI Agents SDK function tools
 * (DESIGN §17).
 *
 * Each function tool's `invoke` goes through toolgraph: the calls of one model turn form one run,
 * conflicting calls in model order and the rest at once, under the limits, policy and hooks of
 * `options`. The tool itself is untouched: its input parsing, `errorFunction`, timeout and guardrails
 * run as before, inside the call; hosted tools, handoffs and other tool kinds pass through as they are.
 * A call toolgraph ends itself (a denial, a hook, a cancel) answers the model with a text that says
 * why, as the SDK answers a tool error (or the tool's own `errorFunction`, when it has one).
 *
 * @example
 * import { withToolgraph } from 'toolgraph/openai-agents';
 * const agent = new Agent({ name: 'files', tools: withToolgraph([readFile, writeFile], { tools: { write_file: { writes: ['file:{path}'] } } }) });
 */
import type { FunctionTool, RunContext, Tool } from '@openai/agents';
import type { AdapterOptions } from './options.js';
import { AdapterRuntime, attach } from './runtime.js';
import { ToolgraphCallError } from './step-runs.js';

export type { AdapterOptions, AdapterToolFields } from './options.js';
export { ToolgraphCallError } from './step-runs.js';
export { toolgraphOf, type AdapterRuntime } from './runtime.js';

// biome-ignore lint/suspicious/noExplicitAny: the SDK's own context parameter
type AnyFunctionTool = FunctionTool<any, any, any>;
type InvokeDetails = Parameters<AnyFunctionTool['invoke']>[2];

/**
 * Wraps an Agents SDK tool list so each turn's function calls run through toolgraph; returns the
 * same list, each function tool with its `invoke` wrapped.
 */
// biome-ignore lint/suspicious/noExplicitAny: the SDK's own context parameter
export function withToolgraph<T extends Tool<any>>(tools: T[], options: AdapterOptions = {}): T[] {
  const functions = tools.filter((t): t is T & AnyFunctionTool => t.type === 'function');
  const runtime = new AdapterRuntime(
    functions.map((t) => t.name),
    options,
  );
  const out = tools.map((t) => (t.type === 'function' ? (wrap(runtime, t as T & AnyFunctionTool) as T) : t));
  return attach(out, runtime);
}

function wrap(runtime: AdapterRuntime, tool: AnyFunctionTool): AnyFunctionTool {
  const invoke = tool.invoke;
  return {
    ...tool,
    // biome-ignore lint/suspicious/noExplicitAny: the SDK's own context parameter
    invoke: async (runContext: RunContext<any>, input: string, details?: InvokeDetails) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(input);
      } catch {
        // Input the tool cannot parse either: it reports that itself, as it would without toolgraph.
        return invoke(runContext, input, details);
      }
      const wrapped = typeof parsed !== 'object' || parsed === null || Array.isArray(parsed);
      const args = (wrapped ? { input: parsed } : parsed) as Record<string, unknown>;
      const outcome = await runtime.runs.call({
        tool: tool.name,
        args,
        ...(details?.toolCall?.callId !== undefined ? { id: details.toolCall.callId } : {}),
        ...(details?.signal ? { signal: details.signal } : {}),
        run: (given) => {
          // The model's own text when a hook did not rewrite the args (the SDK keys what it prepared on it).
          const same = JSON.stringify(given) === JSON.stringify(args);
          return invoke(runContext, same ? input : JSON.stringify(wrapped ? given.input : given), details);
        },
      });
      if (outcome.ok) return outcome.value;
      const error = outcome.error;
      if (!(error instanceof ToolgraphCallError)) throw error;
      if (tool.errorFunction) return tool.errorFunction(runContext, error, details);
      return `An error occurred while running the tool: ${error.message}`;
    },
  };
}
