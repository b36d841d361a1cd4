/**
 * toolgraph/langgraph with the real @langchain/langgraph and a LangChain fake chat model that returns
 * tool calls (FakeStreamingChatModel): one step with write_file(/x), read_file(/x), read_file(/y) in a
 * StateGraph. Through ToolGraphNode the read of /x waits for the write and sees its content while /y
 * runs beside it; with LangGraph's own ToolNode the read of /x misses the write.
 */
import { type AIMessage, type BaseMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { FakeStreamingChatModel } from '@langchain/core/utils/testing';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ToolGraphNode } from '../../src/adapters/langgraph.js';
import { FILE_TOOL_FIELDS, fileTools, orderOf, type FileTools } from '../helpers/file-tools.js';

const STEP = [
  { id: 'call_w', name: 'write_file', args: { path: '/x', content: 'hello' }, type: 'tool_call' as const },
  { id: 'call_rx', name: 'read_file', args: { path: '/x' }, type: 'tool_call' as const },
  { id: 'call_ry', name: 'read_file', args: { path: '/y' }, type: 'tool_call' as const },
];

function lcTools(files: FileTools) {
  return [
    tool(async (args) => files.write_file(args), {
      name: 'write_file',
      description: 'Write a file',
      schema: z.object({ path: z.string(), content: z.string() }),
    }),
    tool(async (args) => files.read_file(args), {
      name: 'read_file',
      description: 'Read a file',
      schema: z.object({ path: z.string() }),
    }),
  ];
}

/** agent (the fake model asks for the step's calls) → tools → end. */
function graph(tools: ToolNode) {
  const model = new FakeStreamingChatModel({ chunks: [{ content: '', tool_calls: STEP } as never] });
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
    .addNode('tools', tools)
    .addEdge(START, 'agent')
    .addEdge('agent', 'tools')
    .addEdge('tools', END)
    .compile();
}

function toolMessages(messages: BaseMessage[]): Record<string, unknown> {
  return Object.fromEntries(
    messages.filter((m): m is ToolMessage => m instanceof ToolMessage).map((m) => [m.tool_call_id, JSON.parse(m.content as string)]),
  );
}

describe('toolgraph/langgraph', () => {
  it('ToolGraphNode runs the read of /x after the write and /y beside it; ToolMessages under the model call ids', async () => {
    const files = fileTools();
    const node = new ToolGraphNode(lcTools(files), { tools: FILE_TOOL_FIELDS });
    const runs = new Map<string, string[]>();
    node.toolgraph.onEvent((e) => {
      if (e.type === 'run.calls_added') runs.set(e.runId, [...(runs.get(e.runId) ?? []), ...e.data.calls.map((c) => c.id)]);
    });
    const out = await graph(node).invoke({ messages: [new HumanMessage('write then read')] });
    const ai = out.messages[1] as AIMessage;
    expect(ai.tool_calls?.map((c) => c.id)).toEqual(['call_w', 'call_rx', 'call_ry']);
    expect(out.messages.slice(2).map((m) => (m as ToolMessage).tool_call_id)).toEqual(['call_w', 'call_rx', 'call_ry']);
    expect(toolMessages(out.messages)).toEqual({
      call_w: { written: '/x', bytes: 5 },
      call_rx: { path: '/x', content: 'hello' },
      call_ry: { path: '/y', content: 'why' },
    });
    expect(orderOf(files.log)).toEqual({ readXAfterWrite: true, readYBesideWrite: true });
    expect([...runs.values()]).toEqual([['call_w', 'call_rx', 'call_ry']]);
    await node.toolgraph.close();
  });

  it("with LangGraph's own ToolNode the same step races: the read of /x misses the write", async () => {
    const files = fileTools();
    const out = await graph(new ToolNode(lcTools(files))).invoke({ messages: [new HumanMessage('write then read')] });
    expect(toolMessages(out.messages).call_rx).toEqual({ path: '/x', content: null });
    expect(orderOf(files.log).readXAfterWrite).toBe(false);
  });

  it("a tool error is ToolNode's error ToolMessage; a call toolgraph denies is one too", async () => {
    const failing = [
      tool(
        async (): Promise<string> => {
          throw new Error('disk full');
        },
        { name: 'write_file', schema: z.object({ path: z.string(), content: z.string() }) },
      ),
      tool(async ({ path }) => `read ${path}`, { name: 'read_file', schema: z.object({ path: z.string() }) }),
    ];
    const node = new ToolGraphNode(failing, {
      tools: FILE_TOOL_FIELDS,
      policy: { rules: [{ match: { tool: 'read_file' }, deny: 'no reads today' }] },
    });
    const out = await graph(node).invoke({ messages: [new HumanMessage('x')] });
    const msgs = out.messages.slice(2) as ToolMessage[];
    expect(msgs.map((m) => [m.tool_call_id, m.status])).toEqual([
      ['call_w', 'error'],
      ['call_rx', 'error'],
      ['call_ry', 'error'],
    ]);
    expect(msgs[0]?.content).toContain('disk full');
    expect(msgs[1]?.content).toContain('policy_denied');
    await node.toolgraph.close();
  });

  it('a tool that returns a string gives ToolNode that string', async () => {
    const node = new ToolGraphNode([
      tool(async ({ path }: { path: string }) => `wrote ${path}`, {
        name: 'write_file',
        schema: z.object({ path: z.string(), content: z.string() }),
      }),
      tool(async ({ path }: { path: string }) => `read ${path}`, { name: 'read_file', schema: z.object({ path: z.string() }) }),
    ]);
    const out = await graph(node).invoke({ messages: [new HumanMessage('x')] });
    expect((out.messages.slice(2) as ToolMessage[]).map((m) => m.content)).toEqual(['wrote /x', 'read /x', 'read /y']);
    await node.toolgraph.close();
  });
});
