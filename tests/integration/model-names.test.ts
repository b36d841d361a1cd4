/**
 * Names every model takes (DESIGN §11): a catalog with dotted names (`spotify.play`, `math.gcd`) is
 * exported to OpenAI and Anthropic under vendor-safe names, and a model's calls of those names run the
 * real tools, over HTTP (`POST /v1/runs` with `openai` or `anthropic`, the results in `/messages`) and
 * in the stream feeders.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { modelNames } from '../../src/contract/model-names.js';
import { feedAnthropicStream, feedOpenAiStream } from '../../src/engine/model-stream.js';
import type { CallInput } from '../../src/core/calls.js';
import { closeAll, startApi } from '../helpers/server.js';

const YAML = `
tools:
  - name: spotify.play
    input: { type: object, properties: { song: { type: string } } }
    reads: []
    writes: []
    executor: { kind: builtin, name: echo }
  - name: spotify_play
    reads: []
    writes: []
    executor: { kind: builtin, name: echo }
  - name: math.gcd
    reads: []
    writes: []
    executor: { kind: builtin, name: fail }
`;

afterEach(closeAll);

describe('model names over HTTP', () => {
  it('exports dotted names under vendor-safe names (a collision gets a suffix)', async () => {
    const api = await startApi({ yaml: YAML });
    const openai = (await api.get('/v1/tools?format=openai')).body;
    expect(openai.tools.map((t: any) => t.function.name)).toEqual(['spotify_play_2', 'spotify_play', 'math_gcd']);
    expect(openai.skipped).toEqual([]);
    expect(openai.renamed).toEqual([
      { name: 'spotify.play', exported: 'spotify_play_2' },
      { name: 'math.gcd', exported: 'math_gcd' },
    ]);
    const anthropic = (await api.get('/v1/tools?format=anthropic')).body;
    expect(anthropic.tools.map((t: any) => t.name)).toEqual(['spotify_play_2', 'spotify_play', 'math_gcd']);
  });

  it('an OpenAI message calling the exported names runs the real tools; /messages names them as the model does', async () => {
    const api = await startApi({ yaml: YAML });
    const run = await api.post('/v1/runs', {
      waitMs: 10_000,
      openai: {
        role: 'assistant',
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'spotify_play_2', arguments: '{"song":"a"}' } },
          { id: 'c2', type: 'function', function: { name: 'spotify_play', arguments: '{"song":"b"}' } },
          { id: 'c3', type: 'function', function: { name: 'math_gcd', arguments: '{"message":"no"}' } },
          { id: 'c4', type: 'function', function: { name: 'spotify.play', arguments: '{"song":"c"}' } },
        ],
      },
    });
    expect(run.status).toBe(201);
    expect(run.body.calls.map((c: any) => [c.id, c.tool, c.status])).toEqual([
      ['c1', 'spotify.play', 'succeeded'],
      ['c2', 'spotify_play', 'succeeded'],
      ['c3', 'math.gcd', 'failed'],
      ['c4', 'spotify.play', 'succeeded'],
    ]);
    const messages = (await api.get(`/v1/runs/${run.body.id}/messages?format=openai`)).body;
    expect(messages[0]).toEqual({ role: 'tool', tool_call_id: 'c1', content: '{"song":"a"}' });
    expect(messages[2].content).toMatch(/^Error: math_gcd failed: tool_error: /);
  });

  it('an Anthropic message calling the exported names runs the real tools', async () => {
    const api = await startApi({ yaml: YAML });
    const run = await api.post('/v1/runs', {
      waitMs: 10_000,
      anthropic: {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Playing.' },
          { type: 'tool_use', id: 'tu1', name: 'spotify_play_2', input: { song: 'x' } },
          { type: 'tool_use', id: 'tu2', name: 'math_gcd', input: {} },
        ],
      },
    });
    expect(run.body.calls.map((c: any) => [c.id, c.tool, c.status])).toEqual([
      ['tu1', 'spotify.play', 'succeeded'],
      ['tu2', 'math.gcd', 'failed'],
    ]);
    const messages = (await api.get(`/v1/runs/${run.body.id}/messages?format=anthropic`)).body;
    expect(messages[0].content[1]).toMatchObject({
      tool_use_id: 'tu2',
      is_error: true,
      content: expect.stringMatching(/^Error: math_gcd failed/),
    });
  });
});

describe('model names in the stream feeders', () => {
  const names = modelNames(['spotify.play', 'spotify_play', 'math.gcd']);

  it('feedOpenAiStream hands the sink calls of the real tools', async () => {
    const got: CallInput[] = [];
    const chunks = [
      { choices: [{ delta: { tool_calls: [{ index: 0, id: 'a', function: { name: 'spotify_play_2', arguments: '{"song":' } }] } }] },
      { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '"x"}' } }] } }] },
      { choices: [{ delta: { tool_calls: [{ index: 1, id: 'b', function: { name: 'math_gcd', arguments: '{}' } }] } }] },
      { choices: [{ delta: {}, finish_reason: 'tool_calls' }] },
    ];
    await feedOpenAiStream(chunks, (c) => void got.push(c), { names });
    expect(got).toEqual([
      { id: 'a', tool: 'spotify.play', args: { song: 'x' } },
      { id: 'b', tool: 'math.gcd', args: {} },
    ]);
  });

  it('feedAnthropicStream hands the sink calls of the real tools', async () => {
    const got: CallInput[] = [];
    const events = [
      { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 't', name: 'spotify_play', input: {} } },
      { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"song":"y"}' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'u', name: 'spotify_play_2', input: {} } },
      { type: 'content_block_stop', index: 1 },
    ];
    await feedAnthropicStream(events, (c) => void got.push(c), { names });
    expect(got).toEqual([
      { id: 't', tool: 'spotify_play', args: { song: 'y' } },
      { id: 'u', tool: 'spotify.play', args: {} },
    ]);
  });
});
