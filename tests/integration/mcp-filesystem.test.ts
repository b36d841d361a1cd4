/**
 * The filesystem MCP server from npm on a temp directory: a batch of writes and reads of the same real
 * files runs in the order the hazards imply (checked on disk and in what each read saw), reads of
 * different files run together, the recording carries the MCP manifests and replays with no server,
 * and the whole user path through `toolgraph serve`: GET /v1/tools?format=openai, then the model's
 * parallel calls.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { recordingOf } from '../../src/replay/recording.js';
import { replayRecording } from '../../src/replay/replay.js';
import { parseRecording } from '../../src/replay/schema.js';
import { startServer, type ServerChild } from '../helpers/child.js';
import { FS_SERVER, startToolgraph, trace, type Toolgraph } from '../helpers/mcp.js';

const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-mcp-fs-'));
const file = (name: string) => path.join(dir, name);
const yaml = `
mcp:
  servers:
    - name: fs
      command: ${JSON.stringify(process.execPath)}
      args: [${JSON.stringify(FS_SERVER)}, ${JSON.stringify(dir)}]
      trustAnnotations: true
      tools:
        write_file: { writes: ["file:{path}"] }
        read_text_file: { reads: ["file:{path}"] }
`;

let tg: Toolgraph;
beforeAll(async () => {
  tg = await startToolgraph(yaml);
});
afterAll(async () => {
  await tg?.close();
});

describe('filesystem MCP server', () => {
  it('lists its tools with the prefix, the hints as defaults and the overrides on top', () => {
    const write = tg.config.catalog.get('fs__write_file');
    expect(write).toMatchObject({
      writes: ['file:{path}'],
      reads: [],
      risk: 'write',
      idempotent: true,
      executor: { kind: 'mcp', server: 'fs', tool: 'write_file' },
    });
    expect(tg.config.catalog.get('fs__list_directory')).toMatchObject({ reads: ['mcp:fs'], writes: [], risk: 'read', idempotent: false });
    expect(tg.config.catalog.get('fs__move_file')).toMatchObject({ writes: ['mcp:fs'], risk: 'write' });
    expect(tg.config.catalog.get('write_file')).toBeUndefined();
  });

  it('orders writes and reads of the same file by the hazards, and runs the other file alongside', async () => {
    const calls = [
      { id: 'w1', tool: 'fs__write_file', args: { path: file('a.txt'), content: 'one' } },
      { id: 'r1', tool: 'fs__read_text_file', args: { path: file('a.txt') } },
      { id: 'w2', tool: 'fs__write_file', args: { path: file('a.txt'), content: 'two' } },
      { id: 'r2', tool: 'fs__read_text_file', args: { path: file('a.txt') } },
      { id: 'wb', tool: 'fs__write_file', args: { path: file('b.txt'), content: 'bee' } },
    ];
    const view = await tg.run(calls);
    expect(view.status).toBe('succeeded');
    const out = Object.fromEntries(view.calls.map((c) => [c.id, c.output]));
    expect(out.r1).toEqual({ content: 'one' });
    expect(out.r2).toEqual({ content: 'two' });
    expect(readFileSync(file('a.txt'), 'utf8')).toBe('two');
    expect(readFileSync(file('b.txt'), 'utf8')).toBe('bee');
    const order = trace(tg.events, view.id, ['call.started', 'call.succeeded']);
    // a.txt: each write and read waits for the one before it; b.txt does not wait for any of them.
    const at = (s: string) => order.indexOf(s);
    for (const [before, after] of [
      ['succeeded w1', 'started r1'],
      ['succeeded r1', 'started w2'],
      ['succeeded w2', 'started r2'],
    ]) {
      expect(at(before as string)).toBeLessThan(at(after as string));
    }
    expect(at('started wb')).toBeLessThan(at('succeeded w1'));
    expect(view.calls.find((c) => c.id === 'wb')?.dependsOn).toEqual([]);
  });

  it('runs reads of different files together: every read starts before the first one ends', async () => {
    for (const n of ['c', 'd', 'e', 'f']) writeFileSync(file(`${n}.txt`), n.repeat(3));
    const calls = ['c', 'd', 'e', 'f'].map((n) => ({ id: `r${n}`, tool: 'fs__read_text_file', args: { path: file(`${n}.txt`) } }));
    const view = await tg.run(calls);
    expect(view.status).toBe('succeeded');
    expect(view.calls.map((c) => c.output)).toEqual(['ccc', 'ddd', 'eee', 'fff'].map((content) => ({ content })));
    const order = trace(tg.events, view.id, ['call.started', 'call.succeeded']);
    expect(order.slice(0, 4)).toEqual(['started rc', 'started rd', 'started re', 'started rf']);
    // Overlap on the clock too: the last start is before the first end.
    const starts = tg.events.filter((e) => e.runId === view.id && e.type === 'call.started').map((e) => e.at);
    const ends = tg.events.filter((e) => e.runId === view.id && e.type === 'call.succeeded').map((e) => e.at);
    expect(Math.max(...starts)).toBeLessThanOrEqual(Math.min(...ends));
  });

  it('records the MCP manifests as they were, and replays with no server', async () => {
    const view = await tg.run([
      { id: 'w', tool: 'fs__write_file', args: { path: file('g.txt'), content: 'gee' } },
      { id: 'r', tool: 'fs__read_text_file', args: { path: file('g.txt') } },
    ]);
    const rec = recordingOf(
      tg.events.filter((e) => e.runId === view.id),
      tg.config,
    );
    expect(rec.config.tools.map((t) => t.name).sort()).toEqual(['fs__read_text_file', 'fs__write_file']);
    expect(rec.config.tools.find((t) => t.name === 'fs__write_file')?.executor).toEqual({ kind: 'mcp', server: 'fs', tool: 'write_file' });
    const parsed = parseRecording(JSON.parse(JSON.stringify(rec)), 'rec.json');
    const replayed = replayRecording(parsed);
    expect(replayed.notes).toEqual([]);
    // And through the CLI, with no config (so no server to start): the recording matches.
    const recFile = path.join(dir, 'rec.json');
    writeFileSync(recFile, JSON.stringify(rec));
    let out = '';
    expect(await main(['replay', recFile], { out: (s) => void (out += s), err: () => {}, isTTY: false })).toBe(0);
    expect(out).toContain('MATCH');
    expect(replayed.replayed.result.calls.map((c) => [c.id, c.status, c.output])).toEqual([
      ['w', 'succeeded', { content: `Successfully wrote to ${file('g.txt')}` }],
      ['r', 'succeeded', { content: 'gee' }],
    ]);
  });
});

describe('toolgraph serve with the filesystem server', () => {
  let child: ServerChild;
  beforeAll(async () => {
    const cfg = path.join(dir, 'toolgraph.yaml');
    writeFileSync(cfg, yaml);
    child = await startServer({ config: cfg, db: path.join(dir, 'serve.db') });
  });
  afterAll(async () => {
    await child?.stop();
  });

  it('hands the model its tool list, then orders the conflicting calls of its answer and runs the rest together', async () => {
    const tools = (await (await fetch(`${child.url}/v1/tools?format=openai`)).json()) as {
      tools: { function: { name: string; parameters: unknown } }[];
      skipped: unknown[];
    };
    expect(tools.skipped).toEqual([]);
    const names = tools.tools.map((t) => t.function.name);
    expect(names).toContain('fs__write_file');
    expect(tools.tools.find((t) => t.function.name === 'fs__write_file')?.function.parameters).toMatchObject({
      required: ['path', 'content'],
    });
    const listed = (await (await fetch(`${child.url}/v1/tools`)).json()) as { items: { name: string; source: string }[] };
    expect(new Set(listed.items.map((t) => t.source))).toEqual(new Set(['mcp:fs']));

    // The model's answer: parallel tool calls, as OpenAI sends them.
    const call = (id: string, name: string, args: object) => ({
      id,
      type: 'function',
      function: { name, arguments: JSON.stringify(args) },
    });
    const message = {
      role: 'assistant',
      tool_calls: [
        call('c1', 'fs__write_file', { path: file('h.txt'), content: 'first' }),
        call('c2', 'fs__read_text_file', { path: file('h.txt') }),
        call('c3', 'fs__write_file', { path: file('h.txt'), content: 'second' }),
        call('c4', 'fs__write_file', { path: file('i.txt'), content: 'other' }),
      ],
    };
    const res = await fetch(`${child.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ openai: message, waitMs: 20_000 }),
    });
    expect(res.status).toBeLessThan(300);
    const run = (await res.json()) as { status: string; calls: { id: string; status: string; output: unknown; dependsOn: string[] }[] };
    expect(run.status).toBe('succeeded');
    expect(run.calls.map((c) => [c.id, c.dependsOn])).toEqual([
      ['c1', []],
      ['c2', ['c1']],
      ['c3', ['c2']],
      ['c4', []],
    ]);
    expect(run.calls[1]?.output).toEqual({ content: 'first' });
    expect(readFileSync(file('h.txt'), 'utf8')).toBe('second');
    expect(readFileSync(file('i.txt'), 'utf8')).toBe('other');
  });
});
