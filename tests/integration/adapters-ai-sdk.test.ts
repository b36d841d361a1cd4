/**
 * toolgraph/ai-sdk with the real `ai` package and its own mock model (MockLanguageModelV3): one step
 * with write_file(/x), read_file(/x), read_file(/y). Through the adapter the read of /x waits for the
 * write and sees its content while /y runs beside it; without it the read of /x misses the write.
 */
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { MockLanguageModelV3, simulateReadableStream } from 'ai/test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { toolgraphOf, ToolgraphCallError, withToolgraph } from '../../src/adapters/ai-sdk.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { FILE_TOOL_FIELDS, fileTools, orderOf, type FileTools } from '../helpers/file-tools.js';

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

const STEP = [
  { toolCallId: 'call_w', toolName: 'write_file', input: { path: '/x', content: 'hello' } },
  { toolCallId: 'call_rx', toolName: 'read_file', input: { path: '/x' } },
  { toolCallId: 'call_ry', toolName: 'read_file', input: { path: '/y' } },
];

/** A model that asks for the three calls, then answers in text once it has their results. */
function model(calls = STEP) {
  return new MockLanguageModelV3({
    doGenerate: async (options) => {
      const answered = options.prompt.some((m) => m.role === 'tool');
      if (answered)
        return { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
      return {
        content: calls.map((c) => ({
          type: 'tool-call' as const,
          toolCallId: c.toolCallId,
          toolName: c.toolName,
          input: JSON.stringify(c.input),
        })),
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage,
        warnings: [],
      };
    },
  });
}

function aiTools(files: FileTools) {
  return {
    write_file: tool({
      description: 'Write a file',
      inputSchema: jsonSchema<{ path: string; content: string }>({
        type: 'object',
        properties: { path: { type: 'string' }, content: { type: 'string' } },
        required: ['path', 'content'],
      }),
      execute: (args) => files.write_file(args),
    }),
    read_file: tool({
      description: 'Read a file',
      inputSchema: jsonSchema<{ path: string }>({ type: 'object', properties: { path: { type: 'string' } }, required: ['path'] }),
      execute: (args) => files.read_file(args),
    }),
  };
}

/** The call ids each run of the adapter's engine took, in the order they were added. */
function callsByRun(tools: object, arrivals: string[][] = []): Map<string, string[]> {
  const byRun = new Map<string, string[]>();
  toolgraphOf(tools)?.onEvent((e) => {
    if (e.type === 'run.created' || e.type === 'run.calls_added') {
      const ids = e.data.calls.map((c) => c.id);
      if (ids.length > 0) arrivals.push(ids);
      byRun.set(e.runId, [...(byRun.get(e.runId) ?? []), ...ids]);
    }
  });
  return byRun;
}

function resultsById(results: readonly { toolCallId: string; output: unknown }[]) {
  return Object.fromEntries(results.map((r) => [r.toolCallId, r.output]));
}

describe('toolgraph/ai-sdk', () => {
  it('runs the read of /x after the write and /y beside it, results under the model call ids', async () => {
    const files = fileTools();
    const tools = withToolgraph(aiTools(files), { tools: FILE_TOOL_FIELDS });
    const added = callsByRun(tools);
    const result = await generateText({ model: model(), tools, prompt: 'write then read', stopWhen: stepCountIs(3) });
    expect(result.text).toBe('done');
    const step = result.steps[0];
    expect(step?.toolResults.map((r) => r.toolCallId)).toEqual(['call_w', 'call_rx', 'call_ry']);
    expect(resultsById(step?.toolResults ?? [])).toEqual({
      call_w: { written: '/x', bytes: 5 },
      call_rx: { path: '/x', content: 'hello' },
      call_ry: { path: '/y', content: 'why' },
    });
    expect(orderOf(files.log)).toEqual({ readXAfterWrite: true, readYBesideWrite: true });
    // One run for the step, under the model's call ids, in model order.
    expect([...added.values()]).toEqual([['call_w', 'call_rx', 'call_ry']]);
    await toolgraphOf(tools)?.close();
  });

  it('without the adapter, the same step races: the read of /x misses the write', async () => {
    const files = fileTools();
    const result = await generateText({ model: model(), tools: aiTools(files), prompt: 'write then read', stopWhen: stepCountIs(3) });
    expect(resultsById(result.steps[0]?.toolResults ?? []).call_rx).toEqual({ path: '/x', content: null });
    expect(orderOf(files.log).readXAfterWrite).toBe(false);
  });

  it('streamText: the step is one run', async () => {
    const files = fileTools();
    const tools = withToolgraph(aiTools(files), { tools: FILE_TOOL_FIELDS });
    const chunks = [
      ...STEP.map((c) => ({ type: 'tool-call' as const, toolCallId: c.toolCallId, toolName: c.toolName, input: JSON.stringify(c.input) })),
      { type: 'finish' as const, finishReason: { unified: 'tool-calls' as const, raw: 'tool_calls' }, usage },
    ];
    const streaming = new MockLanguageModelV3({
      // A few ms between chunks (ai 6 starts a streamed step's tools once its stream has finished).
      doStream: async () => ({ stream: simulateReadableStream({ chunks, chunkDelayInMs: 2 }) }),
    });
    const added = callsByRun(tools);
    const result = streamText({ model: streaming, tools, prompt: 'write then read' });
    const toolResults = await result.toolResults;
    expect(resultsById(toolResults)).toEqual({
      call_w: { written: '/x', bytes: 5 },
      call_rx: { path: '/x', content: 'hello' },
      call_ry: { path: '/y', content: 'why' },
    });
    expect(orderOf(files.log)).toEqual({ readXAfterWrite: true, readYBesideWrite: true });
    expect([...added.values()]).toEqual([['call_w', 'call_rx', 'call_ry']]);
    await toolgraphOf(tools)?.close();
  });

  it('calls that arrive one by one while the step is open join its run in arrival order', async () => {
    const files = fileTools();
    const tools = withToolgraph(aiTools(files), { tools: FILE_TOOL_FIELDS });
    const arrivals: string[][] = [];
    const runs = callsByRun(tools, arrivals);
    const started = (callId: string) =>
      new Promise<void>((resolve) => toolgraphOf(tools)?.onEvent((e) => e.type === 'call.started' && e.callId === callId && resolve()));
    const added = (callId: string) =>
      new Promise<void>((resolve) =>
        toolgraphOf(tools)?.onEvent((e) => e.type === 'run.calls_added' && e.data.calls.some((c) => c.id === callId) && resolve()),
      );
    const options = (toolCallId: string) => ({ toolCallId, messages: [] });
    // As a framework that starts each call as the model streams it: the next once the last is in the run.
    const write = tools.write_file.execute?.({ path: '/x', content: 'hello' }, options('call_w'));
    await started('call_w');
    const readX = tools.read_file.execute?.({ path: '/x' }, options('call_rx'));
    await added('call_rx');
    const readY = tools.read_file.execute?.({ path: '/y' }, options('call_ry'));
    expect(await Promise.all([write, readX, readY])).toEqual([
      { written: '/x', bytes: 5 },
      { path: '/x', content: 'hello' },
      { path: '/y', content: 'why' },
    ]);
    expect(arrivals).toEqual([['call_w'], ['call_rx'], ['call_ry']]);
    expect([...runs.values()]).toEqual([['call_w', 'call_rx', 'call_ry']]);
    expect(orderOf(files.log)).toEqual({ readXAfterWrite: true, readYBesideWrite: true });
    // Once every call was answered the run is sealed: the next call opens a run of its own.
    await tools.read_file.execute?.({ path: '/x' }, options('call_next'));
    expect(runs.size).toBe(2);
    await toolgraphOf(tools)?.close();
  });

  it('a tool error is the AI SDK tool-error with the thrown error; a denied call a ToolgraphCallError', async () => {
    const thrown = new Error('disk full');
    const tools = withToolgraph(
      {
        write_file: tool({
          inputSchema: jsonSchema<{ path: string; content: string }>({ type: 'object' }),
          execute: async (): Promise<{ written: string }> => {
            throw thrown;
          },
        }),
        read_file: tool({ inputSchema: jsonSchema<{ path: string }>({ type: 'object' }), execute: async ({ path }) => ({ path }) }),
      },
      { tools: FILE_TOOL_FIELDS, policy: { rules: [{ match: { tool: 'read_file' }, deny: 'no reads today' }] } },
    );
    const result = await generateText({ model: model(), tools, prompt: 'x', stopWhen: stepCountIs(3) });
    const content = result.steps[0]?.content ?? [];
    const errors = content.filter((p) => p.type === 'tool-error');
    expect(errors.map((e) => e.toolCallId)).toEqual(['call_w', 'call_rx', 'call_ry']);
    expect(errors[0]?.error).toBe(thrown);
    expect(errors[1]?.error).toBeInstanceOf(ToolgraphCallError);
    expect(errors[1]?.error).toMatchObject({ code: 'policy_denied' });
    await toolgraphOf(tools)?.close();
  });

  it('an output that is not JSON reaches the framework as the very value the tool returned', async () => {
    class Handle {
      constructor(readonly path: string) {}
    }
    const handle = new Handle('/x');
    const seen: unknown[] = [];
    const tools = withToolgraph({
      write_file: tool({ inputSchema: jsonSchema<{ path: string }>({ type: 'object' }), execute: async () => handle }),
      read_file: tool({ inputSchema: jsonSchema<{ path: string }>({ type: 'object' }), execute: async () => new Handle('/y') }),
    });
    const result = await generateText({
      model: model(),
      tools,
      prompt: 'x',
      onStepFinish: (s) => void seen.push(...s.toolResults.map((r) => r.output)),
    });
    expect(seen[0]).toBe(handle);
    expect(seen[1]).toBeInstanceOf(Handle);
    expect(result.steps[0]?.toolResults).toHaveLength(3);
    await toolgraphOf(tools)?.close();
  });

  it('a tool missing from options.tools declares nothing: it conflicts with every call, so the step runs in model order', async () => {
    const files = fileTools();
    const tools = withToolgraph(aiTools(files));
    await generateText({ model: model(), tools, prompt: 'x', stopWhen: stepCountIs(3) });
    expect(files.log).toEqual(['start write /x', 'end write /x', 'start read /x', 'end read /x', 'start read /y', 'end read /y']);
    await toolgraphOf(tools)?.close();
  });

  it('limits apply: read_file at most 1 at a time (reached, never exceeded)', async () => {
    const files = fileTools(15, { '/x': 'x', '/y': 'why' });
    const tools = withToolgraph(aiTools(files), { tools: FILE_TOOL_FIELDS, limits: { tool: { read_file: 1 } } });
    const reads = [
      { toolCallId: 'r1', toolName: 'read_file', input: { path: '/x' } },
      { toolCallId: 'r2', toolName: 'read_file', input: { path: '/y' } },
      { toolCallId: 'r3', toolName: 'read_file', input: { path: '/z' } },
    ];
    await generateText({ model: model(reads), tools, prompt: 'x', stopWhen: stepCountIs(3) });
    let running = 0;
    let most = 0;
    for (const line of files.log) {
      running += line.startsWith('start') ? 1 : -1;
      most = Math.max(most, running);
    }
    expect(most).toBe(1);
    expect(files.log.filter((l) => l.startsWith('start read'))).toEqual(['start read /x', 'start read /y', 'start read /z']);
    await toolgraphOf(tools)?.close();
  });

  it('options.store records each step as a run in SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'toolgraph-adapter-'));
    const file = join(dir, 'runs.db');
    try {
      const tools = withToolgraph(aiTools(fileTools()), { tools: FILE_TOOL_FIELDS, store: file, tags: { agent: 'test' } });
      const runIds = new Set<string>();
      toolgraphOf(tools)?.onEvent((e) => runIds.add(e.runId));
      await generateText({ model: model(), tools, prompt: 'x', stopWhen: stepCountIs(3) });
      await toolgraphOf(tools)?.close();
      expect(runIds.size).toBe(1);
      const store = openSqliteStore(file);
      const [runId] = [...runIds];
      const run = await store.run(runId as string);
      expect(run?.status).toBe('succeeded');
      const events = await store.events(runId as string);
      expect(events.filter((e) => e.type === 'call.succeeded').map((e) => e.callId)).toEqual(['call_w', 'call_ry', 'call_rx']);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('options.priority: each step run has it (run.created); a priority outside 1..5 is refused when wrapping', async () => {
    const tools = withToolgraph(aiTools(fileTools()), { tools: FILE_TOOL_FIELDS, priority: 1 });
    const created: unknown[] = [];
    toolgraphOf(tools)?.onEvent((e) => {
      if (e.type === 'run.created') created.push(e.data.priority);
    });
    await generateText({ model: model(), tools, prompt: 'x', stopWhen: stepCountIs(3) });
    await toolgraphOf(tools)?.close();
    expect(created).toEqual([1]);
    expect(() => withToolgraph(aiTools(fileTools()), { priority: 9 })).toThrow(/options\.priority: 9 is not an integer from 1/);
  });
});
