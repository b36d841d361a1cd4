// Eager dispatch from the models' own streaming wire formats (DESIGN §10, §11).
//
// The fixtures in tests/fixtures/streams are `text/event-stream` bodies in each vendor's documented
// shape: OpenAI Chat Completions `chat.completion.chunk` events whose `tool_calls` deltas carry the
// arguments split mid-JSON (then a `finish_reason` chunk, a `usage` chunk and `data: [DONE]`), and
// Anthropic Messages events (`message_start`, a text block, `ping`, then `tool_use` blocks whose
// `input_json_delta.partial_json` is split mid-JSON, `message_delta`, `message_stop`).
//
// The bodies are fed to `parseSseEvents` in small pieces (random byte sizes, so multi-byte characters
// and `\n\n` separators are cut too), and `feedOpenAiStream` / `feedAnthropicStream` hand each call to
// a sink. The body records, each time the next piece is asked for, how many calls the sink has seen:
// everything before that piece has been parsed and handled by then, and nothing after it. So the count
// must be exactly the number of calls whose deciding event (the one that completes the call's JSON, or
// the one that shows it can get no more) ends before that piece.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { CallInput } from '../../src/core/calls.js';
import type { RunEvent } from '../../src/core/events.js';
import { Engine } from '../../src/engine/engine.js';
import { feedAnthropicStream, feedOpenAiStream, parseSseEvents, type CallSink } from '../../src/engine/model-stream.js';

const fixture = (name: string) => readFileSync(fileURLToPath(new URL(`../fixtures/streams/${name}`, import.meta.url)), 'utf8');

// ---- the oracle: the fixture's SSE blocks, read naively ----------------------------------------------

interface Block {
  /** Byte offsets of the block in the body, `end` just after its blank line. */
  start: number;
  end: number;
  raw: string;
  /** The parsed `data:` JSON, or 'DONE'. */
  data: unknown;
}

function blocksOf(text: string): Block[] {
  const out: Block[] = [];
  const enc = new TextEncoder();
  let at = 0;
  for (const raw of text.split('\n\n')) {
    if (raw === '') continue;
    const start = enc.encode(text.slice(0, text.indexOf(raw, at))).length;
    at = text.indexOf(raw, at) + raw.length + 2;
    const end = enc.encode(text.slice(0, at)).length;
    const line = raw.split('\n').find((l) => l.startsWith('data: ')) as string;
    const body = line.slice('data: '.length);
    out.push({ start, end, raw, data: body === '[DONE]' ? 'DONE' : JSON.parse(body) });
  }
  return out;
}

/** The index of the last (or first) block whose raw text satisfies `pred`. */
function lastBlock(blocks: Block[], pred: (raw: string) => boolean): number {
  for (let i = blocks.length - 1; i >= 0; i--) if (pred((blocks[i] as Block).raw)) return i;
  throw new Error('no such block');
}
function firstBlock(blocks: Block[], pred: (raw: string) => boolean): number {
  const i = blocks.findIndex((b) => pred(b.raw));
  if (i < 0) throw new Error('no such block');
  return i;
}
const openAiArgs = (k: number) => (raw: string) => raw.includes(`"tool_calls":[{"index":${k},"function":{"arguments":`);
const openAiStart = (k: number) => (raw: string) => raw.includes(`"tool_calls":[{"index":${k},"id":`);
const anthropicStop = (index: number) => (raw: string) => raw.includes(`"type":"content_block_stop","index":${index}}`);
const anthropicStart = (index: number) => (raw: string) => raw.includes(`"type":"content_block_start","index":${index},`);

// ---- feeding a body in pieces --------------------------------------------------------------------------

interface Fed {
  calls: CallInput[];
  /** Per piece: its byte offset, and how many calls the sink had seen when it was asked for. */
  pieces: { start: number; seen: number }[];
  returned: CallInput[];
}

type Feeder = (events: AsyncIterable<unknown>, sink: CallSink) => Promise<CallInput[]>;

async function feed(
  text: string,
  sizes: readonly number[],
  feeder: Feeder,
  sink?: CallSink,
  onPiece?: (start: number) => void,
): Promise<Fed> {
  const bytes = new TextEncoder().encode(text);
  const calls: CallInput[] = [];
  const pieces: Fed['pieces'] = [];
  async function* body(): AsyncGenerator<Uint8Array> {
    let off = 0;
    for (let k = 0; off < bytes.length; k++) {
      const n = Math.max(1, sizes[k % sizes.length] as number);
      pieces.push({ start: off, seen: calls.length });
      onPiece?.(off);
      yield bytes.subarray(off, off + n);
      off += n;
    }
  }
  const returned = await feeder(parseSseEvents(body()), (c) => {
    calls.push(c);
    return sink?.(c);
  });
  return { calls, pieces, returned };
}

/** Pieces that are exactly the SSE blocks, one each. */
function blockSizes(text: string): number[] {
  return blocksOf(text).map((b) => b.end - b.start);
}

/** The check described at the top: the sink's count at each piece equals the calls decided before it. */
function expectHandedAsDecided(fed: Fed, decidedAt: readonly number[]): void {
  const got = fed.pieces.map((p) => p.seen);
  const want = fed.pieces.map((p) => decidedAt.filter((end) => end <= p.start).length);
  expect(got).toEqual(want);
}

const sizesArb = fc.array(fc.integer({ min: 1, max: 24 }), { minLength: 1, maxLength: 40 });

// ---- parseSseEvents -------------------------------------------------------------------------------------

describe('parseSseEvents', () => {
  const text = fixture('openai-parallel.sse');
  const expected = blocksOf(text)
    .map((b) => b.data)
    .filter((d) => d !== 'DONE');

  it('yields the JSON of every data line in order and stops at [DONE], however the body is cut', async () => {
    await fc.assert(
      fc.asyncProperty(sizesArb, async (sizes) => {
        const bytes = new TextEncoder().encode(`${text}data: {"after":"done"}\n\n`);
        async function* body() {
          for (let off = 0, k = 0; off < bytes.length; k++) {
            const n = sizes[k % sizes.length] as number;
            yield bytes.subarray(off, off + n);
            off += n;
          }
        }
        const got: unknown[] = [];
        for await (const e of parseSseEvents(body())) got.push(e);
        expect(got).toEqual(expected);
      }),
      { numRuns: 100 },
    );
  });

  it('reads CRLF line ends, string chunks, comments and event names, and a last block without a blank line', async () => {
    const crlf = `: keep-alive\r\n\r\n${text.replace(/\n/g, '\r\n').replace(/data: \[DONE\]\r\n\r\n$/, '')}`;
    const chunks = crlf.match(/[\s\S]{1,7}/g) as string[];
    const got: unknown[] = [];
    for await (const e of parseSseEvents(chunks)) got.push(e);
    expect(got).toEqual(expected);
    const anthropic = fixture('anthropic-tool-use.sse').trimEnd();
    const types: string[] = [];
    for await (const e of parseSseEvents([anthropic])) types.push((e as { type: string }).type);
    expect(types.slice(0, 3)).toEqual(['message_start', 'content_block_start', 'ping']);
    expect(types.at(-1)).toBe('message_stop');
  });
});

// ---- OpenAI ------------------------------------------------------------------------------------------------

const OPENAI_CALLS: CallInput[] = [
  { id: 'call_Kq3vXJ8bN2mLh5Tr0aYw9Dze', tool: 'read_file', args: { path: '/repo/README.md' } },
  { id: 'call_7HcPz1uVfQeR4sGk2WnJ6tLb', tool: 'sleep', args: { ms: 40 } },
  { id: 'call_b9YtE3oMx5NdC8aQ1iUg7ZrS', tool: 'echo', args: { message: 'héllo ✓ wörld', tags: ['a', 'b'], n: 3 } },
];

describe('feedOpenAiStream on a recorded chat.completion.chunk stream', () => {
  const text = fixture('openai-parallel.sse');
  const blocks = blocksOf(text);
  // Each call's arguments become a complete JSON object with its last `arguments` delta.
  const decidedAt = [0, 1, 2].map((k) => (blocks[lastBlock(blocks, openAiArgs(k))] as Block).end);

  it('is a real stream: three parallel calls, arguments split mid-JSON, finish_reason, usage, [DONE]', () => {
    expect(blocks.filter((b) => b.raw.includes('"delta":{"tool_calls"')).length).toBe(3 + 7 + 5 + 15);
    expect(blocks.some((b) => b.raw.includes('"arguments":"{\\""'))).toBe(true);
    expect(blocks.at(-3)?.raw).toContain('"finish_reason":"tool_calls"');
    expect(blocks.at(-2)?.raw).toContain('"choices":[],"usage"');
    expect(blocks.at(-1)?.data).toBe('DONE');
  });

  it('hands each call over, with its id and exact args, as soon as its JSON is complete', async () => {
    await fc.assert(
      fc.asyncProperty(sizesArb, async (sizes) => {
        const fed = await feed(text, sizes, feedOpenAiStream);
        expect(fed.calls).toEqual(OPENAI_CALLS);
        expect(fed.returned).toEqual(OPENAI_CALLS);
        expectHandedAsDecided(fed, decidedAt);
      }),
      { numRuns: 150 },
    );
  });

  it('hands call k over before the first byte of call k+1 is fed', async () => {
    const fed = await feed(text, blockSizes(text), feedOpenAiStream);
    for (const k of [1, 2]) {
      const piece = fed.pieces.find((p) => p.start === (blocks[firstBlock(blocks, openAiStart(k))] as Block).start);
      expect(piece?.seen).toBe(k);
    }
  });

  it('fails malformed arguments as `invalid`, decided when the next call begins', async () => {
    const bad = fixture('openai-malformed.sse');
    const bb = blocksOf(bad);
    const decided = [lastBlock(bb, openAiArgs(0)), firstBlock(bb, openAiStart(2)), lastBlock(bb, openAiArgs(2))].map(
      (i) => (bb[i] as Block).end,
    );
    await fc.assert(
      fc.asyncProperty(sizesArb, async (sizes) => {
        const fed = await feed(bad, sizes, feedOpenAiStream);
        expect(fed.calls.map((c) => [c.id, c.tool, c.args, c.invalid !== undefined])).toEqual([
          ['call_Kq3vXJ8bN2mLh5Tr0aYw9Dze', 'read_file', { path: '/repo/a.txt' }, false],
          ['call_7HcPz1uVfQeR4sGk2WnJ6tLb', 'sleep', {}, true],
          ['call_b9YtE3oMx5NdC8aQ1iUg7ZrS', 'echo', { message: 'ok' }, false],
        ]);
        expect(fed.calls[1]?.invalid).toMatch(/not valid JSON.*\{"ms": 5O\}/);
        expectHandedAsDecided(fed, decided);
      }),
      { numRuns: 60 },
    );
  });

  it('fails arguments cut off by finish_reason "length" as `invalid`, decided at the finish', async () => {
    const cut = fixture('openai-length.sse');
    const cb = blocksOf(cut);
    const decided = [lastBlock(cb, openAiArgs(0)), firstBlock(cb, (r) => r.includes('"finish_reason":"length"'))].map(
      (i) => (cb[i] as Block).end,
    );
    const fed = await feed(cut, [5, 3, 11], feedOpenAiStream);
    expect(fed.calls.map((c) => [c.id, c.tool, c.invalid !== undefined])).toEqual([
      ['call_Kq3vXJ8bN2mLh5Tr0aYw9Dze', 'read_file', false],
      ['call_7HcPz1uVfQeR4sGk2WnJ6tLb', 'write_file', true],
    ]);
    expectHandedAsDecided(fed, decided);
  });
});

// ---- Anthropic -----------------------------------------------------------------------------------------------

const ANTHROPIC_CALLS: CallInput[] = [
  { id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6', tool: 'read_file', args: { path: '/repo/README.md' } },
  {
    id: 'toolu_01VzJ4ZGEv7HGMAhsdG1mGjb',
    tool: 'write_file',
    args: { path: '/repo/NOTES.md', content: '${toolu_01T1x1fJ34qAmk2tNTrN7Up6.output.path}' },
  },
  { id: 'toolu_01Aq9bWSvLPeYbT5i5NzM3hZ', tool: 'sleep', args: { ms: 30 } },
];

describe('feedAnthropicStream on a recorded Messages stream', () => {
  const text = fixture('anthropic-tool-use.sse');
  const blocks = blocksOf(text);
  // A tool_use block is decided by its content_block_stop (index 0 is the text block).
  const decidedAt = [1, 2, 3].map((index) => (blocks[firstBlock(blocks, anthropicStop(index))] as Block).end);

  it('is a real stream: message_start, a text block, ping, tool_use blocks with partial_json, message_delta, message_stop', () => {
    const types = blocks.map((b) => (b.data as { type: string }).type);
    expect(types.slice(0, 3)).toEqual(['message_start', 'content_block_start', 'ping']);
    expect((blocks[1]?.data as { content_block: { type: string } } | undefined)?.content_block.type).toBe('text');
    expect(types.slice(-2)).toEqual(['message_delta', 'message_stop']);
    expect(blocks.every((b) => b.raw.startsWith(`event: ${(b.data as { type: string }).type}\ndata: `))).toBe(true);
    expect(blocks.some((b) => b.raw.includes('"partial_json":"{\\"path\\": \\"/re"'))).toBe(true);
  });

  it('hands each tool_use block over, with its id and exact input, when the block stops', async () => {
    await fc.assert(
      fc.asyncProperty(sizesArb, async (sizes) => {
        const fed = await feed(text, sizes, feedAnthropicStream);
        expect(fed.calls).toEqual(ANTHROPIC_CALLS);
        expect(fed.returned).toEqual(ANTHROPIC_CALLS);
        expectHandedAsDecided(fed, decidedAt);
      }),
      { numRuns: 150 },
    );
  });

  it('hands call k over before the first byte of call k+1 is fed', async () => {
    const fed = await feed(text, blockSizes(text), feedAnthropicStream);
    for (const k of [1, 2]) {
      const piece = fed.pieces.find((p) => p.start === (blocks[firstBlock(blocks, anthropicStart(k + 1))] as Block).start);
      expect(piece?.seen).toBe(k);
    }
  });

  it('fails input cut off by max_tokens as `invalid`', async () => {
    const cut = fixture('anthropic-max-tokens.sse');
    const fed = await feed(cut, [9, 2, 30], feedAnthropicStream);
    expect(fed.calls.map((c) => [c.id, c.tool, c.args, c.invalid !== undefined])).toEqual([
      ['toolu_01T1x1fJ34qAmk2tNTrN7Up6', 'read_file', { path: '/repo/a.txt' }, false],
      ['toolu_01VzJ4ZGEv7HGMAhsdG1mGjb', 'read_file', {}, true],
    ]);
    expect(fed.calls[1]?.invalid).toMatch(/not valid JSON/);
  });
});

// ---- end to end: a real engine, the demo config, builtin tools ---------------------------------------------

describe('a model stream fed into engine.open()', () => {
  let engine: Engine | undefined;
  afterEach(async () => {
    await engine?.close();
    engine = undefined;
  });

  /**
   * Feeds a fixture, one SSE block at a time, into an open run of a fresh engine. Returns the ended run,
   * the run's event log, and the call statuses the run showed as each block's first byte was fed.
   */
  async function run(name: string, feeder: Feeder) {
    engine = new Engine({ config: loadConfig() });
    const e = engine;
    const log: RunEvent[] = [];
    e.onEvent((ev) => log.push(ev));
    const open = e.open({ tenant: 'acme' });
    const text = fixture(name);
    const statusAt = new Map<number, Record<string, string>>();
    const onPiece = (start: number) => statusAt.set(start, Object.fromEntries((e.get(open.id)?.calls ?? []).map((c) => [c.id, c.status])));
    await feed(text, blockSizes(text), feeder, (c) => open.add(c), onPiece);
    open.seal();
    const view = await open.done();
    return { view, log: log.filter((ev) => ev.runId === open.id), blocks: blocksOf(text), statusAt };
  }
  const RUNNING_OR_DONE = ['running', 'succeeded'];

  const addedAt = (log: RunEvent[], id: string) =>
    log.findIndex((e) => e.type === 'run.calls_added' && (e.data.calls as CallInput[]).some((c) => c.id === id));
  const startedAt = (log: RunEvent[], id: string) => log.findIndex((e) => e.type === 'call.started' && e.callId === id);

  it('runs OpenAI parallel calls, each started before the model had written the next', async () => {
    const got = await run('openai-parallel.sse', feedOpenAiStream);
    const { view, log } = got;
    expect(view.status).toBe('succeeded');
    expect(view.stream).toBe('sealed');
    expect(view.calls.map((c) => [c.id, c.tool, c.status, c.output])).toEqual([
      ['call_Kq3vXJ8bN2mLh5Tr0aYw9Dze', 'read_file', 'succeeded', { path: '/repo/README.md' }],
      ['call_7HcPz1uVfQeR4sGk2WnJ6tLb', 'sleep', 'succeeded', { ms: 40 }],
      ['call_b9YtE3oMx5NdC8aQ1iUg7ZrS', 'echo', 'succeeded', { message: 'héllo ✓ wörld', tags: ['a', 'b'], n: 3 }],
    ]);
    // Call k was running (or done) before the model had written the first byte of call k+1.
    const { blocks, statusAt } = got;
    for (const k of [0, 1]) {
      const before = statusAt.get((blocks[firstBlock(blocks, openAiStart(k + 1))] as Block).start);
      expect(RUNNING_OR_DONE).toContain(before?.[OPENAI_CALLS[k]?.id as string]);
      expect(before?.[OPENAI_CALLS[k + 1]?.id as string]).toBeUndefined();
      expect(startedAt(log, OPENAI_CALLS[k]?.id as string)).toBeLessThan(addedAt(log, OPENAI_CALLS[k + 1]?.id as string));
    }
    // The seal comes after every call has started: nothing waited for the end of the stream.
    const sealed = log.findIndex((e) => e.type === 'run.sealed');
    for (const c of OPENAI_CALLS) expect(startedAt(log, c.id)).toBeLessThan(sealed);
  });

  it('runs Anthropic tool_use blocks, resolving a reference to an earlier block', async () => {
    const { view, log, blocks, statusAt } = await run('anthropic-tool-use.sse', feedAnthropicStream);
    expect(view.status).toBe('succeeded');
    const [read, write, sleep] = view.calls;
    expect(read?.output).toEqual({ path: '/repo/README.md' });
    expect(write?.dependsOn).toEqual(['toolu_01T1x1fJ34qAmk2tNTrN7Up6']);
    expect(write?.resolvedArgs).toEqual({ path: '/repo/NOTES.md', content: '/repo/README.md' });
    expect(write?.output).toEqual({ path: '/repo/NOTES.md', content: '/repo/README.md' });
    expect(sleep?.output).toEqual({ ms: 30 });
    // The read ran before the model had begun the next block.
    const before = statusAt.get((blocks[firstBlock(blocks, anthropicStart(2))] as Block).start);
    expect(RUNNING_OR_DONE).toContain(before?.toolu_01T1x1fJ34qAmk2tNTrN7Up6);
    expect(startedAt(log, 'toolu_01T1x1fJ34qAmk2tNTrN7Up6')).toBeLessThan(addedAt(log, 'toolu_01VzJ4ZGEv7HGMAhsdG1mGjb'));
  });

  it('fails malformed OpenAI arguments with invalid_args and runs the rest', async () => {
    const { view } = await run('openai-malformed.sse', feedOpenAiStream);
    expect(view.status).toBe('partial');
    expect(view.calls.map((c) => [c.id, c.status, c.error?.code ?? null])).toEqual([
      ['call_Kq3vXJ8bN2mLh5Tr0aYw9Dze', 'succeeded', null],
      ['call_7HcPz1uVfQeR4sGk2WnJ6tLb', 'failed', 'invalid_args'],
      ['call_b9YtE3oMx5NdC8aQ1iUg7ZrS', 'succeeded', null],
    ]);
    expect(view.calls[1]?.attempts).toBe(0);
  });

  it('fails a tool_use block cut off by max_tokens with invalid_args', async () => {
    const { view } = await run('anthropic-max-tokens.sse', feedAnthropicStream);
    expect(view.status).toBe('partial');
    expect(view.calls.map((c) => [c.status, c.error?.code ?? null])).toEqual([
      ['succeeded', null],
      ['failed', 'invalid_args'],
    ]);
  });
});
