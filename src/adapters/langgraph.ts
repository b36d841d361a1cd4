/**
 * `toolgraph/langgraph`: `new ToolGraphNode(tools, options)`, a drop-in for LangGraph's `ToolNode`
 * (DESIGN §17).
 *
 * It is a `ToolNode` whose calls of one AI message (one model step) run as one toolgraph run:
 * conflicting calls in model order, the rest at once, under the limits, policy and hooks of `options`.
 * Everything else is `ToolNode`'s own: the input shapes (messages, `{ messages }`, `Send`), the
 * `ToolMessage`s and `Command`s it returns, `handleToolErrors`, graph interrupts.
 *
 * @example
 * import { ToolGraphNode } from 'toolgraph/langgraph';
 * graph.addNode('tools', new ToolGraphNode([readFile, writeFile], { tools: { read_file: { reads: ['file:{path}'] }, write_file: { writes: ['file:{path}'] } } }));
 */
import { ToolMessage } from '@langchain/core/messages';
import type { ToolCall } from '@langchain/core/messages/tool';
import { isGraphInterrupt, type LangGraphRunnableConfig } from '@langchain/langgraph';
import { ToolNode, type ToolNodeOptions } from '@langchain/langgraph/prebuilt';
import type { AdapterOptions } from './options.js';
import { AdapterRuntime, attach } from './runtime.js';

export type { AdapterOptions, AdapterToolFields } from './options.js';
export { ToolgraphCallError } from './step-runs.js';
export { toolgraphOf, type AdapterRuntime } from './runtime.js';

/** `ToolNode`'s options and toolgraph's. */
export type ToolGraphNodeOptions = ToolNodeOptions & AdapterOptions;

/** A ToolMessage with `status: 'error'` (ToolNode's report of a tool error), carried as an error through toolgraph. */
class ErrorMessage extends Error {
  constructor(readonly toolMessage: ToolMessage) {
    super(typeof toolMessage.content === 'string' ? toolMessage.content : JSON.stringify(toolMessage.content));
  }
}

// biome-ignore lint/suspicious/noExplicitAny: ToolNode's own type parameter
export class ToolGraphNode<T = any> extends ToolNode<T> {
  /** The engine and `close()` behind this node (see `toolgraphOf`). */
  readonly toolgraph: AdapterRuntime;

  constructor(tools: ConstructorParameters<typeof ToolNode>[0], options: ToolGraphNodeOptions = {}) {
    const { name, tags, handleToolErrors, ...adapter } = options;
    super(tools, {
      ...(name !== undefined ? { name } : {}),
      ...(tags !== undefined ? { tags } : {}),
      ...(handleToolErrors !== undefined ? { handleToolErrors } : {}),
    });
    this.toolgraph = new AdapterRuntime(
      tools.map((t) => t.name),
      adapter,
    );
    attach(this, this.toolgraph);
  }

  /**
   * ToolNode starts every call of the message at once; here each goes into the step's run, and
   * ToolNode's own `runTool` runs it when toolgraph says it may (with the args a hook may have rewritten).
   */
  protected override async runTool(call: ToolCall, config: LangGraphRunnableConfig, state: unknown) {
    const outcome = await this.toolgraph.runs.call({
      tool: call.name,
      args: call.args,
      ...(call.id !== undefined ? { id: call.id } : {}),
      ...(config.signal ? { signal: config.signal } : {}),
      run: async (args) => {
        const out = await super.runTool({ ...call, args }, config, state);
        if (out instanceof ToolMessage && out.status === 'error') throw new ErrorMessage(out);
        return out;
      },
      project: (out) =>
        out instanceof ToolMessage ? { content: out.content, ...(out.artifact !== undefined ? { artifact: out.artifact } : {}) } : out,
    });
    if (outcome.ok) return outcome.value as ToolMessage;
    const error = outcome.error;
    if (error instanceof ErrorMessage) return error.toolMessage;
    // toolgraph ended the call itself (denied, timed out, cancelled), or the tool threw with
    // handleToolErrors off: as ToolNode reports an error.
    if (!this.handleToolErrors || !(error instanceof Error) || isGraphInterrupt(error)) throw error;
    return new ToolMessage({
      status: 'error',
      content: `Error: ${error.message}\n Please fix your mistakes.`,
      name: call.name,
      tool_call_id: call.id ?? '',
    });
  }
}
