/**
 * The Vercel AI SDK with toolgraph, offline: a mock model asks for write_file(/x), read_file(/x) and
 * read_file(/y) in one step. `withToolgraph` is the one changed line: the read of /x then waits for
 * the write and sees its content, while /y runs beside it. Without it, `generateText` starts all three
 * at once and the read of /x finds nothing.
 *
 * Run: npm run example:ai-sdk
 */
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
// In your project: import { withToolgraph, toolgraphOf } from 'toolgraph/ai-sdk';
import { toolgraphOf, withToolgraph } from '../src/adapters/ai-sdk.js';

const files = new Map<string, string>([['/y', 'why']]);
const log: string[] = [];
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const myTools = {
  write_file: tool({
    description: 'Write a file',
    inputSchema: jsonSchema<{ path: string; content: string }>({
      type: 'object',
      properties: { path: { type: 'string' }, content: { type: 'string' } },
      required: ['path', 'content'],
    }),
    execute: async ({ path, content }) => {
      log.push(`start write ${path}`);
      await pause(15);
      files.set(path, content);
      log.push(`end write ${path}`);
      return { written: path };
    },
  }),
  read_file: tool({
    description: 'Read a file',
    inputSchema: jsonSchema<{ path: string }>({ type: 'object', properties: { path: { type: 'string' } }, required: ['path'] }),
    execute: async ({ path }) => {
      log.push(`start read ${path}`);
      const content = files.get(path) ?? null;
      await pause(15);
      log.push(`end read ${path}`);
      return { path, content };
    },
  }),
};

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};
// A fake model: the three calls in one step, then a text answer.
const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) =>
    prompt.some((m) => m.role === 'tool')
      ? { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }
      : {
          content: [
            { type: 'tool-call', toolCallId: 'call_w', toolName: 'write_file', input: JSON.stringify({ path: '/x', content: 'hello' }) },
            { type: 'tool-call', toolCallId: 'call_rx', toolName: 'read_file', input: JSON.stringify({ path: '/x' }) },
            { type: 'tool-call', toolCallId: 'call_ry', toolName: 'read_file', input: JSON.stringify({ path: '/y' }) },
          ],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
          usage,
          warnings: [],
        },
});

// The one changed line: each tool's toolgraph fields say what it reads and writes.
const tools = withToolgraph(myTools, {
  tools: { read_file: { reads: ['file:{path}'], risk: 'read' }, write_file: { writes: ['file:{path}'] } },
});

const result = await generateText({ model, tools, prompt: 'Write hello to /x, then read /x and /y.', stopWhen: stepCountIs(3) });
for (const r of result.steps[0]?.toolResults ?? []) console.log(`${r.toolCallId} ${r.toolName} → ${JSON.stringify(r.output)}`);
console.log(`order: ${log.join(' | ')}`);
console.log(`model: ${result.text}`);
await toolgraphOf(tools)?.close();
