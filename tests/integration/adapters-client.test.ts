/**
 * `options.client` (DESIGN §17): the AI SDK adapter over a real toolgraph server whose catalog declares
 * the tools `executor: { kind: client }`. The step is a streamed run of the server; each call's
 * function runs in this process when the server dispatches it, in the server's order (the read of /x
 * after the write, /y beside it), and the framework gets every result under its call id.
 *
 * It needs the typed client's `open(batch, { handlers })` and the server's client tools (branch
 * `client`): until they are there the test is skipped.
 */
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterEach, describe, expect, it } from 'vitest';
import { withToolgraph } from '../../src/adapters/ai-sdk.js';
import type { RemoteClient } from '../../src/adapters/options.js';
import { ToolgraphClient } from '../../src/client/index.js';
import { fileTools, orderOf } from '../helpers/file-tools.js';
import { closeAll, startApi } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

afterEach(closeAll);

const hasClientTools = typeof (ToolgraphClient.prototype as { open?: unknown }).open === 'function';

const YAML = `
tools:
  - name: write_file
    writes: ["file:{path}"]
    executor: { kind: client }
  - name: read_file
    reads: ["file:{path}"]
    writes: []
    risk: read
    idempotent: true
    executor: { kind: client }
defaults: { timeoutMs: 20000 }
`;

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

describe('options.client', () => {
  it.skipIf(!hasClientTools)('a step is a run of the server; the tools run here in its order', async () => {
    const api = await startApi({ yaml: YAML });
    const client = new ToolgraphClient({ baseUrl: api.url }) as unknown as RemoteClient;
    const files = fileTools();
    const tools = withToolgraph(
      {
        write_file: tool({
          inputSchema: jsonSchema<{ path: string; content: string }>({ type: 'object' }),
          execute: (args) => files.write_file(args),
        }),
        read_file: tool({ inputSchema: jsonSchema<{ path: string }>({ type: 'object' }), execute: (args) => files.read_file(args) }),
      },
      { client },
    );
    const model = new MockLanguageModelV3({
      doGenerate: async ({ prompt }) =>
        prompt.some((m) => m.role === 'tool')
          ? { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }
          : {
              content: [
                {
                  type: 'tool-call',
                  toolCallId: 'call_w',
                  toolName: 'write_file',
                  input: JSON.stringify({ path: '/x', content: 'hello' }),
                },
                { type: 'tool-call', toolCallId: 'call_rx', toolName: 'read_file', input: JSON.stringify({ path: '/x' }) },
                { type: 'tool-call', toolCallId: 'call_ry', toolName: 'read_file', input: JSON.stringify({ path: '/y' }) },
              ],
              finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
              usage,
              warnings: [],
            },
    });
    const result = await generateText({ model, tools, prompt: 'x', stopWhen: stepCountIs(3) });
    expect(result.text).toBe('done');
    const byId = Object.fromEntries((result.steps[0]?.toolResults ?? []).map((r) => [r.toolCallId, r.output]));
    expect(byId).toEqual({
      call_w: { written: '/x', bytes: 5 },
      call_rx: { path: '/x', content: 'hello' },
      call_ry: { path: '/y', content: 'why' },
    });
    expect(orderOf(files.log)).toEqual({ readXAfterWrite: true, readYBesideWrite: true });
    // The server has the run, under the model's call ids.
    // The framework has every answer once the last result is posted; the run ends when the server has
    // applied that result and sealed it, a moment later on a loaded machine.
    const run = await until('the step run ended', async () => {
      const runs = await api.get('/v1/runs');
      expect(runs.status).toBe(200);
      const [r] = runs.body.items as { id: string; status: string }[];
      return r && r.status !== 'running' && r.status !== 'queued' ? r : undefined;
    });
    expect(run.status).toBe('succeeded');
    const view = await api.get(`/v1/runs/${run.id}`);
    expect((view.body.calls as { id: string }[]).map((c) => c.id)).toEqual(['call_w', 'call_rx', 'call_ry']);
  });

  it.skipIf(!hasClientTools)(
    'options.priority: the step run has it; one more urgent than the key may ask fails the step priority_not_allowed',
    async () => {
      const api = await startApi({
        yaml: `${YAML}auth:\n  keys:\n    - { key: capped-agent-key, tenant: acme, role: agent, maxPriority: 2 }\n    - { key: ops-key-12345678, tenant: ops, role: operator }\n`,
      });
      const client = new ToolgraphClient({ baseUrl: api.url, apiKey: 'capped-agent-key' }) as unknown as RemoteClient;
      const files = fileTools();
      const step = async (priority: number) => {
        const tools = withToolgraph(
          { read_file: tool({ inputSchema: jsonSchema<{ path: string }>({ type: 'object' }), execute: (args) => files.read_file(args) }) },
          { client, priority, tenant: 'acme' },
        );
        const model = new MockLanguageModelV3({
          doGenerate: async ({ prompt }) =>
            prompt.some((m) => m.role === 'tool')
              ? { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }
              : {
                  content: [{ type: 'tool-call', toolCallId: 'call_ry', toolName: 'read_file', input: JSON.stringify({ path: '/y' }) }],
                  finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
                  usage,
                  warnings: [],
                },
        });
        return generateText({ model, tools, prompt: 'x', stopWhen: stepCountIs(3) });
      };
      const denied = await step(1);
      const error = denied.steps[0]?.content.find((p) => p.type === 'tool-error');
      expect(String((error as { error?: unknown } | undefined)?.error)).toMatch(/priority_not_allowed/);
      const ok = await step(2);
      expect(ok.steps[0]?.toolResults.map((r) => r.output)).toEqual([{ path: '/y', content: 'why' }]);
      const run = await until('the step run ended', async () => {
        const [r] = (await api.get('/v1/runs', { token: 'ops-key-12345678' })).body.items as {
          id: string;
          status: string;
          priority?: number;
        }[];
        return r && r.status !== 'running' && r.status !== 'queued' ? r : undefined;
      });
      expect(run.status).toBe('succeeded');
      expect((await api.get(`/v1/runs/${run.id}`, { token: 'ops-key-12345678' })).body).toMatchObject({ priority: 2 });
    },
  );
});
