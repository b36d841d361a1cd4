/**
 * The bounded read side of an MCP stdio connection (src/mcp/frames.ts): lines up to the bound are
 * messages, however the chunks cut them; a longer line is dropped as it comes and becomes an error
 * answer for the request it answers (its id read from its first or last bytes); the lines after it
 * are read as before.
 */
import { describe, expect, it } from 'vitest';
import { FrameReader, idOf, OUTPUT_TOO_LARGE_RPC } from '../../src/mcp/frames.js';

const line = (o: unknown) => `${JSON.stringify(o)}\n`;

function readAll(r: FrameReader): unknown[] {
  const out: unknown[] = [];
  for (let m = r.readMessage(); m !== null; m = r.readMessage()) out.push(m);
  return out;
}

/** Feeds `text` in chunks of `size` bytes. */
function feed(r: FrameReader, text: string, size: number): void {
  const b = Buffer.from(text);
  for (let i = 0; i < b.length; i += size) r.append(b.subarray(i, i + size));
}

describe('FrameReader', () => {
  const small = { result: { content: [] }, jsonrpc: '2.0', id: 1 };
  const big = { result: { content: [{ type: 'text', text: 'x'.repeat(5000) }] }, jsonrpc: '2.0', id: 2 };
  const after = { result: { ok: true }, jsonrpc: '2.0', id: 3 };

  for (const size of [1, 7, 100, 100_000]) {
    it(`drops a line past the bound as an error answer for its id, and reads on (chunks of ${size})`, () => {
      const dropped: [number, unknown][] = [];
      const r = new FrameReader({ maxFrameBytes: 1000, onDropped: (bytes, id) => dropped.push([bytes, id]) });
      feed(r, line(small) + line(big) + line(after), size);
      const [a, b, c, ...rest] = readAll(r);
      expect(rest).toEqual([]);
      expect(a).toEqual(small);
      expect(b).toMatchObject({ jsonrpc: '2.0', id: 2, error: { code: OUTPUT_TOO_LARGE_RPC } });
      expect(c).toEqual(after);
      expect(dropped).toEqual([[JSON.stringify(big).length, 2]]);
    });
  }

  it('a line exactly at the bound is a message; one byte more is dropped', () => {
    const msg = JSON.stringify(small);
    const exact = new FrameReader({ maxFrameBytes: msg.length });
    exact.append(Buffer.from(`${msg}\n`));
    expect(readAll(exact)).toEqual([small]);
    const under = new FrameReader({ maxFrameBytes: msg.length - 1 });
    under.append(Buffer.from(`${msg}\n`));
    expect(readAll(under)).toMatchObject([{ id: 1, error: { code: OUTPUT_TOO_LARGE_RPC } }]);
  });

  it('a dropped notification (no id) answers nothing', () => {
    const r = new FrameReader({ maxFrameBytes: 100 });
    r.append(Buffer.from(line({ jsonrpc: '2.0', method: 'notifications/message', params: { data: 'y'.repeat(500) } }) + line(after)));
    expect(readAll(r)).toEqual([after]);
  });

  it('reads the id first (jsonrpc, id, result) or last (result, jsonrpc, id), never a nested one', () => {
    expect(idOf('{"jsonrpc":"2.0","id":"a\\"b","result":{', '')).toBe('a"b');
    expect(idOf('{"result":{"id":9,', ',"jsonrpc":"2.0","id":17}')).toBe(17);
    expect(idOf('{"result":{"id":9,', '"text":"x","id":4}}')).toBeUndefined();
  });
});
