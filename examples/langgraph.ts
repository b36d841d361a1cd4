/**
 * LangGraph with toolgraph, offline: a LangChain fake chat model asks for write_file(/x),
 * read_file(/x) and read_file(/y) in one message. `new ToolGraphNode(...)` in place of
 * `new ToolNode(...)` is the one changed line: the read of /x then waits for the write and sees its
 * content, while /y runs beside it. ToolNode starts all three at once and the read of /x finds nothing.
 *
 * Run: npm run example:langgraph
 */
import { HumanMessage, type ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { FakeStreamingChatModel } from '@langchain/core/utils/testing';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { z } from 'zod';
// In your project: import { ToolGraphNode } from 'toolgraph/langgraph';
import { ToolGraphNode } from '../src/adapters/langgraph.js';

const files = new Map<string, string>([['/y', 'why']]);
const log: string[] = [];
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const writeFile = tool(
  async ({ path, content }) => {
    log.push(`start write ${path}`);
    await pause(15);
    files.set(path, content);
    log.push(`end write ${path}`);
    return `wrote ${path}`;
  },
  { name: 'write_file', description: 'Write a file', schema: z.object({ path: z.string(), content: z.string() }) },
);
const readFile = tool(
  async ({ path }) => {
    log.push(`start read ${path}`);
    const content = files.get(path) ?? '(no such file)';
    await pause(15);
    log.push(`end read ${path}`);
    return content;
  },
  { name: 'read_file', description: 'Read a file', schema: z.object({ path: z.string() }) },
);

// A fake model whose answer asks for the three calls.
const model = new FakeStreamingChatModel({
  chunks: [
    {
      content: '',
      tool_calls: [
        { id: 'call_w', name: 'write_file', args: { path: '/x', content: 'hello' }, type: 'tool_call' },
        { id: 'call_rx', name: 'read_file', args: { path: '/x' }, type: 'tool_call' },
        { id: 'call_ry', name: 'read_file', args: { path: '/y' }, type: 'tool_call' },
      ],
    } as never,
  ],
});

// The one changed line (was: new ToolNode([writeFile, readFile])).
const tools = new ToolGraphNode([writeFile, readFile], {
  tools: { read_file: { reads: ['file:{path}'], risk: 'read' }, write_file: { writes: ['file:{path}'] } },
});

const graph = new StateGraph(MessagesAnnotation)
  .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
  .addNode('tools', tools)
  .addEdge(START, 'agent')
  .addEdge('agent', 'tools')
  .addEdge('tools', END)
  .compile();

const out = await graph.invoke({ messages: [new HumanMessage('Write hello to /x, then read /x and /y.')] });
for (const m of out.messages.slice(2) as ToolMessage[]) console.log(`${m.tool_call_id} ${m.name} → ${JSON.stringify(m.content)}`);
console.log(`order: ${log.join(' | ')}`);
await tools.toolgraph.close();
