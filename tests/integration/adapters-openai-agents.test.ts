/**
 * toolgraph/openai-agents with the real @openai/agents and an Agents SDK `Model` of the test's own
 * that returns function calls: one turn with write_file(/x), read_file(/x), read_file(/y). Through
 * the adapter the read of /x waits for the write and sees its content while /y runs beside it; with
 * the SDK alone the read of /x misses the write.
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
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { toolgraphOf, withToolgraph } from '../../src/adapters/openai-agents.js';
import { FILE_TOOL_FIELDS, fileTools, orderOf, type FileTools } from '../helpers/file-tools.js';

const STEP = [
  { callId: 'call_w', name: 'write_file', arguments: JSON.stringify({ path: '/x', content: 'hello' }) },
  { callId: 'call_rx', name: 'read_file', arguments: JSON.stringify({ path: '/x' }) },
  { callId: 'call_ry', name: 'read_file', arguments: JSON.stringify({ path: '/y' }) },
];

/** Asks for the step's calls; once their outputs are in the input, answers in text. */
class FakeModel implements Model {
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const items = Array.isArray(request.input) ? (request.input as AgentInputItem[]) : [];
    if (items.some((i) => i.type === 'function_call_result')) {
      return {
        usage: new Usage(),
        output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }],
      };
    }
    return { usage: new Usage(), output: STEP.map((c) => ({ type: 'function_call' as const, status: 'completed' as const, ...c })) };
  }
  // biome-ignore lint/correctness/useYield: this test model never streams
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not streamed');
  }
}

function agentTools(files: FileTools) {
  return [
    tool({
      name: 'write_file',
      description: 'Write a file',
      parameters: z.object({ path: z.string(), content: z.string() }),
      execute: async (args) => JSON.stringify(await files.write_file(args)),
    }),
    tool({
      name: 'read_file',
      description: 'Read a file',
      parameters: z.object({ path: z.string() }),
      execute: async (args) => JSON.stringify(await files.read_file(args)),
    }),
  ];
}

/** The outputs the SDK fed back to the model, by call id. */
function outputs(items: readonly AgentInputItem[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const i of items) {
    if (i.type !== 'function_call_result') continue;
    const o = i.output as { type: string; text?: string } | string;
    const text = typeof o === 'string' ? o : (o.text ?? '');
    try {
      out[i.callId] = JSON.parse(text);
    } catch {
      out[i.callId] = text;
    }
  }
  return out;
}

beforeAll(() => setTracingDisabled(true));

describe('toolgraph/openai-agents', () => {
  it('runs the read of /x after the write and /y beside it; outputs under the model call ids', async () => {
    const files = fileTools();
    const tools = withToolgraph(agentTools(files), { tools: FILE_TOOL_FIELDS });
    const runs = new Map<string, string[]>();
    toolgraphOf(tools)?.onEvent((e) => {
      if (e.type === 'run.calls_added') runs.set(e.runId, [...(runs.get(e.runId) ?? []), ...e.data.calls.map((c) => c.id)]);
    });
    const agent = new Agent({ name: 'files', model: new FakeModel(), tools });
    const result = await new Runner().run(agent, 'write then read');
    expect(result.finalOutput).toBe('done');
    const history = result.history;
    expect(history.filter((i) => i.type === 'function_call_result').map((i) => (i as { callId: string }).callId)).toEqual([
      'call_w',
      'call_rx',
      'call_ry',
    ]);
    expect(outputs(history)).toEqual({
      call_w: { written: '/x', bytes: 5 },
      call_rx: { path: '/x', content: 'hello' },
      call_ry: { path: '/y', content: 'why' },
    });
    expect(orderOf(files.log)).toEqual({ readXAfterWrite: true, readYBesideWrite: true });
    expect([...runs.values()]).toEqual([['call_w', 'call_rx', 'call_ry']]);
    await toolgraphOf(tools)?.close();
  });

  it('without the adapter the same turn races: the read of /x misses the write', async () => {
    const files = fileTools();
    const agent = new Agent({ name: 'files', model: new FakeModel(), tools: agentTools(files) });
    const result = await new Runner().run(agent, 'write then read');
    expect(outputs(result.history).call_rx).toEqual({ path: '/x', content: null });
    expect(orderOf(files.log).readXAfterWrite).toBe(false);
  });

  it("a tool error is the SDK's own error output; a call toolgraph denies says why", async () => {
    const tools = withToolgraph(
      [
        tool({
          name: 'write_file',
          description: 'fails',
          parameters: z.object({ path: z.string(), content: z.string() }),
          execute: async (): Promise<string> => {
            throw new Error('disk full');
          },
        }),
        tool({ name: 'read_file', description: 'read', parameters: z.object({ path: z.string() }), execute: async ({ path }) => path }),
      ],
      { tools: FILE_TOOL_FIELDS, policy: { rules: [{ match: { tool: 'read_file' }, deny: 'no reads today' }] } },
    );
    const result = await new Runner().run(new Agent({ name: 'files', model: new FakeModel(), tools }), 'x');
    const out = outputs(result.history);
    expect(out.call_w).toBe('An error occurred while running the tool. Please try again.');
    expect(out.call_rx).toContain('policy_denied');
    expect(out.call_rx).toContain('no reads today');
    await toolgraphOf(tools)?.close();
  });
});
