/**
 * Eager dispatch from a model's streaming response (DESIGN §10): each tool call goes to an open run
 * the moment its JSON is complete, while the model is still writing the next ones.
 *
 * - OpenAI Chat Completions streams `choices[0].delta.tool_calls[{ index, id?, function: { name?,
 *   arguments? } }]` chunks; a call's arguments are complete when they parse as a JSON object (a prefix
 *   of an object never does), or at the latest when the next call begins or the choice finishes.
 * - Anthropic Messages streams `content_block_start` (a `tool_use` block with id and name),
 *   `content_block_delta` (`input_json_delta.partial_json`) and `content_block_stop`.
 *
 * Both take parsed events (what the vendors' SDKs yield); `parseSseEvents` turns a raw
 * `text/event-stream` body into them. With `{ names }` (contract/model-names.ts), a call of the name a
 * tool was exported under (`spotify_play`) goes to the sink as a call of the tool (`spotify.play`).
 */
import type { CallInput } from '../core/calls.js';
import { toolOfModelName, type ModelNames } from '../contract/model-names.js';

/** Options of the feeders. */
export interface FeedOptions {
  /** The names a model sees (`modelNames(catalog names)`): its calls are mapped back to the tools. */
  names?: Pick<ModelNames, 'tool'>;
}

/** Where complete calls go: `OpenRun.add` from the engine, or an HTTP append. */
export type CallSink = (call: CallInput) => unknown;

interface PendingCall {
  id?: string;
  name?: string;
  text: string;
  sent: boolean;
}

function toCall(p: PendingCall, names: FeedOptions['names']): CallInput {
  const id = p.id as string;
  const tool = toolOfModelName(names, p.name as string);
  const text = p.text.trim() === '' ? '{}' : p.text;
  try {
    const args: unknown = JSON.parse(text);
    if (args !== null && typeof args === 'object' && !Array.isArray(args)) return { id, tool, args: args as Record<string, unknown> };
    return { id, tool, args: {}, invalid: `arguments must be a JSON object, got ${text.slice(0, 200)}` };
  } catch (e) {
    return { id, tool, args: {}, invalid: `arguments are not valid JSON (${(e as Error).message}): ${text.slice(0, 200)}` };
  }
}

/** Hands a pending call to the sink once (when it has an id and a name), and keeps what it handed. */
function handOff(sink: CallSink, names: FeedOptions['names']): { flush: (p: PendingCall) => void; settled: () => Promise<CallInput[]> } {
  const sent: CallInput[] = [];
  // A sink may answer with a promise (an engine's `add`): each is awaited before the feed resolves, so
  // a refused call rejects the feed instead of going unhandled.
  const pending: PromiseLike<unknown>[] = [];
  const flush = (p: PendingCall) => {
    if (p.sent || p.id === undefined || p.name === undefined) return;
    p.sent = true;
    const call = toCall(p, names);
    sent.push(call);
    const answer = sink(call);
    if (answer !== null && typeof answer === 'object' && typeof (answer as PromiseLike<unknown>).then === 'function') {
      const promise = Promise.resolve(answer as PromiseLike<unknown>);
      promise.catch(() => {});
      pending.push(promise);
    }
  };
  const settled = async () => {
    await Promise.all(pending);
    return sent;
  };
  return { flush, settled };
}

function isCompleteObject(text: string): boolean {
  const t = text.trim();
  if (!t.startsWith('{') || !t.endsWith('}')) return false;
  try {
    JSON.parse(t);
    return true;
  } catch {
    return false;
  }
}

/** Feeds an OpenAI chat-completions stream; resolves with every call, in order, once the stream ends. */
export async function feedOpenAiStream(
  chunks: AsyncIterable<unknown> | Iterable<unknown>,
  sink: CallSink,
  opts: FeedOptions = {},
): Promise<CallInput[]> {
  const calls = new Map<number, PendingCall>();
  const { flush, settled } = handOff(sink, opts.names);
  for await (const chunk of chunks as AsyncIterable<unknown>) {
    const choice = (chunk as { choices?: { delta?: { tool_calls?: unknown[] }; finish_reason?: string | null }[] }).choices?.[0];
    for (const d of (choice?.delta?.tool_calls ?? []) as {
      index: number;
      id?: string;
      function?: { name?: string; arguments?: string };
    }[]) {
      let p = calls.get(d.index);
      if (!p) {
        // A new call begins: every earlier one is as complete as it will get.
        for (const [i, q] of calls) if (i < d.index) flush(q);
        p = { text: '', sent: false };
        calls.set(d.index, p);
      }
      if (d.id) p.id = d.id;
      if (d.function?.name) p.name = (p.name ?? '') + d.function.name;
      if (d.function?.arguments) p.text += d.function.arguments;
      if (isCompleteObject(p.text)) flush(p);
    }
    if (choice?.finish_reason) for (const p of calls.values()) flush(p);
  }
  for (const p of calls.values()) flush(p);
  return settled();
}

/** Feeds an Anthropic messages stream; resolves with every call, in order, once the stream ends. */
export async function feedAnthropicStream(
  events: AsyncIterable<unknown> | Iterable<unknown>,
  sink: CallSink,
  opts: FeedOptions = {},
): Promise<CallInput[]> {
  const blocks = new Map<number, PendingCall>();
  const { flush, settled } = handOff(sink, opts.names);
  for await (const raw of events as AsyncIterable<unknown>) {
    const e = raw as {
      type?: string;
      index?: number;
      content_block?: { type?: string; id?: string; name?: string; input?: unknown };
      delta?: { type?: string; partial_json?: string };
    };
    if (e.type === 'content_block_start' && e.content_block?.type === 'tool_use' && e.index !== undefined) {
      const input = e.content_block.input;
      const preset = input && typeof input === 'object' && Object.keys(input).length > 0 ? JSON.stringify(input) : '';
      blocks.set(e.index, { id: e.content_block.id as string, name: e.content_block.name as string, text: preset, sent: false });
    } else if (e.type === 'content_block_delta' && e.delta?.type === 'input_json_delta' && e.index !== undefined) {
      const p = blocks.get(e.index);
      if (p) p.text += e.delta.partial_json ?? '';
    } else if (e.type === 'content_block_stop' && e.index !== undefined) {
      const p = blocks.get(e.index);
      if (p) flush(p);
    }
  }
  for (const p of blocks.values()) flush(p);
  return settled();
}

/** Parses a raw `text/event-stream` body (string chunks) into the JSON of each `data:` line; `[DONE]` ends it. */
export async function* parseSseEvents(body: AsyncIterable<string | Uint8Array> | Iterable<string | Uint8Array>): AsyncGenerator<unknown> {
  const decoder = new TextDecoder();
  let buffer = '';
  const take = function* (final: boolean): Generator<unknown | typeof DONE> {
    for (;;) {
      const m = /\r?\n\r?\n/.exec(buffer);
      if (!m && !(final && buffer.trim())) return;
      const block = m ? buffer.slice(0, m.index) : buffer;
      buffer = m ? buffer.slice(m.index + m[0].length) : '';
      const data = block
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (!data) continue;
      if (data === '[DONE]') {
        yield DONE;
        return;
      }
      yield JSON.parse(data);
    }
  };
  for await (const chunk of body as AsyncIterable<string | Uint8Array>) {
    buffer += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    for (const e of take(false)) {
      if (e === DONE) return;
      yield e;
    }
  }
  for (const e of take(true)) {
    if (e === DONE) return;
    yield e;
  }
}

const DONE = Symbol('done');
