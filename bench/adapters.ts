/**
 * The adapters' cost (DESIGN §17): one model step of 5 tool calls, each a read of its own file that
 * takes `--ms` (default 10), run by each framework alone and through its toolgraph adapter (an
 * in-process engine, no store), in one process. The two are interleaved step by step so both see the
 * same machine; the figures are the median step time of each, their ratio (target ≤ 1.05 at 10 ms)
 * and the adapter's overhead per call. With `--ms 0` the tools are instant and the difference is the
 * adapter's whole cost. `npm run bench:adapters [-- --steps 200 --ms 10]`
 */
import { parseArgs } from 'node:util';
import { HumanMessage } from '@langchain/core/messages';
import { tool as lcTool } from '@langchain/core/tools';
import { FakeStreamingChatModel } from '@langchain/core/utils/testing';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { Agent, type Model, type ModelResponse, Runner, setTracingDisabled, tool as agentTool, Usage } from '@openai/agents';
import { generateText, jsonSchema, stepCountIs, tool as aiTool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { toolgraphOf, withToolgraph } from '../src/adapters/ai-sdk.js';
import { ToolGraphNode } from '../src/adapters/langgraph.js';
import { withToolgraph as withToolgraphAgents } from '../src/adapters/openai-agents.js';

const { values } = parseArgs({ options: { steps: { type: 'string', default: '200' }, ms: { type: 'string', default: '10' } } });
const STEPS = Number(values.steps);
const MS = Number(values.ms);
const CALLS = 5;
const FIELDS = { tools: { read_file: { reads: ['file:{path}'], risk: 'read' as const, idempotent: true } } };

setTracingDisabled(true);

const pause = (ms: number) => (ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve());
async function readFile({ path }: { path: string }) {
  await pause(MS);
  return { path, content: 'x' };
}
const paths = Array.from({ length: CALLS }, (_, i) => `/f${i}`);

// ---- AI SDK ----------------------------------------------------------------------------------
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};
const aiModel = new MockLanguageModelV3({
  doGenerate: async () => ({
    content: paths.map((path, i) => ({
      type: 'tool-call' as const,
      toolCallId: `c${i}`,
      toolName: 'read_file',
      input: JSON.stringify({ path }),
    })),
    finishReason: { unified: 'tool-calls' as const, raw: 'tool_calls' },
    usage,
    warnings: [],
  }),
});
const aiTools = {
  read_file: aiTool({
    inputSchema: jsonSchema<{ path: string }>({ type: 'object', properties: { path: { type: 'string' } }, required: ['path'] }),
    execute: readFile,
  }),
};
const aiWrapped = withToolgraph(aiTools, FIELDS);
const aiStep = (tools: typeof aiTools) => () => generateText({ model: aiModel, tools, prompt: 'x', stopWhen: stepCountIs(1) });

// ---- LangGraph -------------------------------------------------------------------------------
const lcTools = [lcTool(readFile, { name: 'read_file', schema: z.object({ path: z.string() }) })];
const lcModel = new FakeStreamingChatModel({
  chunks: [
    { content: '', tool_calls: paths.map((path, i) => ({ id: `c${i}`, name: 'read_file', args: { path }, type: 'tool_call' })) } as never,
  ],
});
function lcGraph(node: ToolNode) {
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state) => ({ messages: [await lcModel.invoke(state.messages)] }))
    .addNode('tools', node)
    .addEdge(START, 'agent')
    .addEdge('agent', 'tools')
    .addEdge('tools', END)
    .compile();
}
const lcPlain = lcGraph(new ToolNode(lcTools));
const lcNode = new ToolGraphNode(lcTools, FIELDS);
const lcWrapped = lcGraph(lcNode);
const lcStep = (graph: ReturnType<typeof lcGraph>) => () => graph.invoke({ messages: [new HumanMessage('x')] });

// ---- OpenAI Agents SDK -----------------------------------------------------------------------
class StepModel implements Model {
  async getResponse(): Promise<ModelResponse> {
    return {
      usage: new Usage(),
      output: paths.map((path, i) => ({
        type: 'function_call' as const,
        status: 'completed' as const,
        callId: `c${i}`,
        name: 'read_file',
        arguments: JSON.stringify({ path }),
      })),
    };
  }
  // biome-ignore lint/correctness/useYield: never streams
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not streamed');
  }
}
const agentTools = [
  agentTool({
    name: 'read_file',
    description: 'read',
    parameters: z.object({ path: z.string() }),
    execute: async (a) => JSON.stringify(await readFile(a)),
  }),
];
const agentsWrapped = withToolgraphAgents(agentTools, FIELDS);
const runner = new Runner();
// maxTurns 1: the turn's tools run, then the run stops (MaxTurnsExceeded) before a second model call.
const agentsStep = (tools: typeof agentTools) => {
  const agent = new Agent({ name: 'bench', model: new StepModel(), tools });
  return () => runner.run(agent, 'x', { maxTurns: 1 }).catch(() => undefined);
};

// ---- measure ---------------------------------------------------------------------------------
async function compare(name: string, plain: () => Promise<unknown>, adapted: () => Promise<unknown>) {
  for (let i = 0; i < 20; i++) {
    await plain();
    await adapted();
  }
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < STEPS; i++) {
    let t = performance.now();
    await plain();
    a.push(performance.now() - t);
    t = performance.now();
    await adapted();
    b.push(performance.now() - t);
  }
  const pa = median(a);
  const pb = median(b);
  console.log(
    `${name.padEnd(14)} alone ${pa.toFixed(2).padStart(7)} ms/step   adapter ${pb.toFixed(2).padStart(7)} ms/step   ratio ${(pb / pa).toFixed(3)}   overhead ${(((pb - pa) / CALLS) * 1000).toFixed(0).padStart(5)} µs/call`,
  );
}

function median(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)] as number;
}

console.log(`adapters: a step of ${CALLS} calls of ${MS} ms, ${STEPS} steps each, median step time (in one process)`);
await compare('ai-sdk', aiStep(aiTools), aiStep(aiWrapped));
await compare('langgraph', lcStep(lcPlain), lcStep(lcWrapped));
await compare('openai-agents', agentsStep(agentTools), agentsStep(agentsWrapped));
await toolgraphOf(aiWrapped)?.close();
await lcNode.toolgraph.close();
await toolgraphOf(agentsWrapped)?.close();
