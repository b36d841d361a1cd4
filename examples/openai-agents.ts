/**
 * The OpenAI Agents SDK with toolgraph, offline: a fake `Model` asks for write_file(/x), read_file(/x)
 * and read_file(/y) in one turn. `withToolgraph` is the one changed line: the read of /x then waits
 * for the write and sees its content, while /y runs beside it. Without it the SDK starts all three at
 * once and the read of /x finds nothing.
 *
 * Run: npm run example:openai-agents
 */
import {
  Agent,
  type AgentInputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  Runner,
  setTracingDisabled,
  tool,
  Usage,
} from '@openai/agents';
import { z } from 'zod';
// In your project: import { withToolgraph, toolgraphOf } from 'toolgraph/openai-agents';
import { toolgraphOf, withToolgraph } from '../src/adapters/openai-agents.js';

setTracingDisabled(true); // offline: no traces sent to OpenAI

const files = new Map<string, string>([['/y', 'why']]);
const log: string[] = [];
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const writeFile = tool({
  name: 'write_file',
  description: 'Write a file',
  parameters: z.object({ path: z.string(), content: z.string() }),
  execute: async ({ path, content }) => {
    log.push(`start write ${path}`);
    await pause(15);
    files.set(path, content);
    log.push(`end write ${path}`);
    return `wrote ${path}`;
  },
});
const readFile = tool({
  name: 'read_file',
  description: 'Read a file',
  parameters: z.object({ path: z.string() }),
  execute: async ({ path }) => {
    log.push(`start read ${path}`);
    const content = files.get(path) ?? '(no such file)';
    await pause(15);
    log.push(`end read ${path}`);
    return content;
  },
});

/** A fake model: the three calls in one turn, then a text answer. */
class FakeModel implements Model {
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const items = Array.isArray(request.input) ? (request.input as AgentInputItem[]) : [];
    if (items.some((i) => i.type === 'function_call_result')) {
      return {
        usage: new Usage(),
        output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }],
      };
    }
    const call = (callId: string, name: string, args: object) =>
      ({ type: 'function_call', status: 'completed', callId, name, arguments: JSON.stringify(args) }) as const;
    return {
      usage: new Usage(),
      output: [
        call('call_w', 'write_file', { path: '/x', content: 'hello' }),
        call('call_rx', 'read_file', { path: '/x' }),
        call('call_ry', 'read_file', { path: '/y' }),
      ],
    };
  }
  // biome-ignore lint/correctness/useYield: this example model never streams
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('this example model does not stream');
  }
}

// The one changed line: each tool's toolgraph fields say what it reads and writes.
const tools = withToolgraph([writeFile, readFile], {
  tools: { read_file: { reads: ['file:{path}'], risk: 'read' }, write_file: { writes: ['file:{path}'] } },
});

const agent = new Agent({ name: 'files', model: new FakeModel(), tools });
const result = await new Runner().run(agent, 'Write hello to /x, then read /x and /y.');
for (const item of result.history) {
  if (item.type !== 'function_call_result') continue;
  const output = item.output as { text?: string } | string;
  console.log(`${item.callId} ${item.name} → ${JSON.stringify(typeof output === 'string' ? output : output.text)}`);
}
console.log(`order: ${log.join(' | ')}`);
console.log(`model: ${result.finalOutput}`);
await toolgraphOf(tools)?.close();
