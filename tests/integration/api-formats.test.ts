/**
 * Model formats (DESIGN §11) against a real server: the assistant message goes in as the vendor sends
 * it, and the messages to append come back in call order, checked field by field. The shapes are those
 * of the vendors' documentation: OpenAI chat completions with parallel `tool_calls` (arguments as JSON
 * strings), Anthropic messages with a text block before the `tool_use` blocks.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, startApi } from '../helpers/server.js';

const YAML = `
tools:
  - name: get_weather
    input: { type: object, properties: { location: { type: string } }, required: [location] }
    reads: ["weather:{location}"]
    writes: []
    executor: { kind: builtin, name: echo }
  - name: sleep
    reads: []
    writes: []
    executor: { kind: builtin, name: sleep }
  - name: fail
    reads: []
    writes: []
    executor: { kind: builtin, name: fail }
`;

afterEach(closeAll);

describe('OpenAI', () => {
  it('runs parallel tool_calls and answers with one tool message per call, in call order', async () => {
    const api = await startApi({ yaml: YAML });
    const message = {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'call_slow', type: 'function', function: { name: 'sleep', arguments: '{"ms":120}' } },
        { id: 'call_paris', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Paris, France"}' } },
        { id: 'call_bad', type: 'function', function: { name: 'get_weather', arguments: '{"location": "Oslo"' } },
        { id: 'call_fail', type: 'function', function: { name: 'fail', arguments: '{"message":"upstream down"}' } },
      ],
    };
    const run = await api.post('/v1/runs', { openai: message, waitMs: 10_000 });
    expect(run.status).toBe(201);
    expect(run.body.calls.map((c: { id: string }) => c.id)).toEqual(['call_slow', 'call_paris', 'call_bad', 'call_fail']);
    expect(run.body.calls[2].error.code).toBe('invalid_args');

    const res = await api.get(`/v1/runs/${run.body.id}/messages?format=openai`);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(4);
    expect(res.body[0]).toEqual({ role: 'tool', tool_call_id: 'call_slow', content: '{"ms":120}' });
    expect(res.body[1]).toEqual({ role: 'tool', tool_call_id: 'call_paris', content: '{"location":"Paris, France"}' });
    expect(Object.keys(res.body[2]).sort()).toEqual(['content', 'role', 'tool_call_id']);
    expect(res.body[2].tool_call_id).toBe('call_bad');
    expect(res.body[2].content).toMatch(/^Error: get_weather failed: invalid_args: .*not valid JSON/);
    expect(res.body[3].tool_call_id).toBe('call_fail');
    expect(res.body[3].content).toMatch(/^Error: fail failed: tool_error: .*upstream down/);
  });

  it('refuses a message without tool_calls, and duplicate call ids, with a 400', async () => {
    const api = await startApi({ yaml: YAML });
    expect((await api.post('/v1/runs', { openai: { role: 'assistant', content: 'hi' } })).status).toBe(400);
    const dup = {
      role: 'assistant',
      tool_calls: [1, 2].map(() => ({ id: 'x', type: 'function', function: { name: 'sleep', arguments: '{}' } })),
    };
    const res = await api.post('/v1/runs', { openai: dup });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/duplicate call id x/);
  });
});

describe('Anthropic', () => {
  it('ignores the text block, runs the tool_use blocks, and answers with one user message of tool_results', async () => {
    const api = await startApi({ yaml: YAML });
    const message = {
      id: 'msg_01Aq9w938a90dw8q',
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4',
      content: [
        { type: 'text', text: "I'll check the weather in both cities." },
        { type: 'tool_use', id: 'toolu_01A09q90qw90lq917835lq9', name: 'get_weather', input: { location: 'San Francisco, CA' } },
        { type: 'tool_use', id: 'toolu_01B', name: 'get_weather', input: { location: 'New York, NY' } },
        { type: 'tool_use', id: 'toolu_01C', name: 'fail', input: { message: 'no' } },
      ],
      stop_reason: 'tool_use',
    };
    const run = await api.post('/v1/runs', { anthropic: message, waitMs: 10_000 });
    expect(run.status).toBe(201);
    expect(run.body.calls.map((c: { id: string }) => c.id)).toEqual(['toolu_01A09q90qw90lq917835lq9', 'toolu_01B', 'toolu_01C']);

    const res = await api.get(`/v1/runs/${run.body.id}/messages?format=anthropic`);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(1);
    expect(res.body[0].role).toBe('user');
    expect(res.body[0].content).toEqual([
      { type: 'tool_result', tool_use_id: 'toolu_01A09q90qw90lq917835lq9', content: '{"location":"San Francisco, CA"}' },
      { type: 'tool_result', tool_use_id: 'toolu_01B', content: '{"location":"New York, NY"}' },
      { type: 'tool_result', tool_use_id: 'toolu_01C', content: expect.stringMatching(/^Error: fail failed: tool_error/), is_error: true },
    ]);
  });

  it('a blocked call is an error result that says why', async () => {
    const api = await startApi({ yaml: YAML });
    const message = {
      role: 'assistant',
      content: [
        { type: 'tool_use', id: 'toolu_a', name: 'fail', input: {} },
        { type: 'tool_use', id: 'toolu_b', name: 'get_weather', input: { location: '${toolu_a.output.city}' } },
      ],
    };
    const run = await api.post('/v1/runs', { anthropic: message, waitMs: 10_000 });
    const res = await api.get(`/v1/runs/${run.body.id}/messages?format=anthropic`);
    expect(res.body[0].content[1]).toEqual({
      type: 'tool_result',
      tool_use_id: 'toolu_b',
      content: expect.stringMatching(/^Error: get_weather was blocked: dependency_failed: toolu_a failed/),
      is_error: true,
    });
  });

  it('a bad format is a 400', async () => {
    const api = await startApi({ yaml: YAML });
    const run = await api.post('/v1/runs', { calls: [{ id: 'a', tool: 'sleep', args: { ms: 1 } }], waitMs: 5000 });
    expect((await api.get(`/v1/runs/${run.body.id}/messages?format=gemini`)).status).toBe(400);
    expect((await api.get(`/v1/runs/${run.body.id}/messages`)).status).toBe(400);
  });
});
