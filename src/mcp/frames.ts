/**
 * The read side of an MCP stdio connection, bounded by the server's output caps (DESIGN §4, §13).
 *
 * A stdio server sends one JSON-RPC message per line. The SDK's own reader stops at 10 MiB: past it,
 * it closes the transport, which fails every call in flight on the server and restarts it. This one
 * takes its place (`installFrameReader`): a line up to `maxFrameBytes` is a message as before; a longer
 * one is read through and dropped as it comes (never held whole), and becomes, for the request it
 * answers, a JSON-RPC error `OUTPUT_TOO_LARGE_RPC` (the executor makes it `output_too_large`). The
 * connection, the server and the other calls in flight on it go on as they were.
 *
 * Which request a dropped line answers is read from its first and last bytes: a response's `id` is
 * its first key after `jsonrpc` or its last (the SDK writes `{ result, jsonrpc, id }`). A dropped line
 * with no id there (a notification) is only told to `onDropped`.
 */
import { deserializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

import { OUTPUT_TOO_LARGE_RPC } from '../contract/mcp-codes.js';

export { OUTPUT_TOO_LARGE_RPC };

/** How much of a dropped line's start and end is kept to find its id. */
const EDGE = 512;

export interface FrameReaderOptions {
  maxFrameBytes: number;
  /** Told of each line dropped for its size: its bytes and the id it answered, if one was found. */
  onDropped?: (bytes: number, id: string | number | undefined) => void;
}

/** The SDK's `ReadBuffer` interface (append, readMessage, clear), bounded (see the top of the file). */
export class FrameReader {
  private chunks: Buffer[] = [];
  private size = 0;
  /** Set while a line past the bound is read through. */
  private dropping: { head: Buffer; tail: Buffer; bytes: number } | undefined;
  /** Complete lines, or the error answers of dropped ones, in order. */
  private readonly ready: (string | JSONRPCMessage)[] = [];

  constructor(private readonly opts: FrameReaderOptions) {}

  append(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(10, start);
      const piece = chunk.subarray(start, nl === -1 ? chunk.length : nl);
      if (this.dropping) this.dropMore(piece);
      else if (this.size + piece.length > this.opts.maxFrameBytes) this.startDropping(piece);
      else if (piece.length > 0) {
        this.chunks.push(piece);
        this.size += piece.length;
      }
      if (nl === -1) return;
      this.endLine();
      start = nl + 1;
    }
  }

  readMessage(): JSONRPCMessage | null {
    const next = this.ready.shift();
    if (next === undefined) return null;
    return typeof next === 'string' ? deserializeMessage(next) : next;
  }

  clear(): void {
    this.chunks = [];
    this.size = 0;
    this.dropping = undefined;
    this.ready.length = 0;
  }

  private startDropping(piece: Buffer): void {
    const all = Buffer.concat([...this.chunks, piece]);
    this.chunks = [];
    this.size = 0;
    this.dropping = {
      head: Buffer.from(all.subarray(0, EDGE)),
      tail: Buffer.from(all.subarray(Math.max(0, all.length - EDGE))),
      bytes: all.length,
    };
  }

  private dropMore(piece: Buffer): void {
    const d = this.dropping as NonNullable<FrameReader['dropping']>;
    d.bytes += piece.length;
    const joined = piece.length >= EDGE ? piece : Buffer.concat([d.tail, piece]);
    d.tail = Buffer.from(joined.subarray(Math.max(0, joined.length - EDGE)));
  }

  private endLine(): void {
    const d = this.dropping;
    if (d) {
      this.dropping = undefined;
      const id = idOf(d.head.toString('utf8'), d.tail.toString('utf8').replace(/\r$/, ''));
      this.opts.onDropped?.(d.bytes, id);
      if (id !== undefined) {
        this.ready.push({
          jsonrpc: '2.0',
          id,
          error: {
            code: OUTPUT_TOO_LARGE_RPC,
            message: `the answer is ${d.bytes} bytes, past the ${this.opts.maxFrameBytes} this server's tools may send (maxOutputBytes)`,
            data: { bytes: d.bytes, maxFrameBytes: this.opts.maxFrameBytes },
          },
        });
      }
      return;
    }
    if (this.size === 0) return;
    const line = (this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks)).toString('utf8').replace(/\r$/, '');
    this.chunks = [];
    this.size = 0;
    this.ready.push(line);
  }
}

const ID = String.raw`(-?\d+|"(?:[^"\\]|\\.)*")`;
const HEAD_ID = new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*${ID}`);
const TAIL_ID = new RegExp(String.raw`"id"\s*:\s*${ID}\s*\}\s*$`);

/** The id of a JSON-RPC message from its first and last bytes, if one is there at the top level. */
export function idOf(head: string, tail: string): string | number | undefined {
  const m = HEAD_ID.exec(head) ?? TAIL_ID.exec(tail);
  if (!m) return undefined;
  return JSON.parse(m[1] as string) as string | number;
}

/**
 * The frame bound of a server whose tools may output `maxOutputBytes` at most: a result may carry its
 * output twice (`structuredContent` and its text in `content`), and the envelope.
 */
export function maxFrameBytesFor(maxOutputBytes: number): number {
  return 2 * maxOutputBytes + 64 * 1024;
}

/**
 * Puts a `FrameReader` in the place of the SDK stdio transport's read buffer (its `_readBuffer`, read
 * by its stdout handler); returns false when the SDK has none under that name (then its own 10 MiB
 * bound stays, with `maxBufferSize` set from the same bound).
 */
export function installFrameReader(transport: object, opts: FrameReaderOptions): boolean {
  const t = transport as { _readBuffer?: unknown };
  if (t._readBuffer === undefined || typeof (t._readBuffer as { append?: unknown }).append !== 'function') return false;
  t._readBuffer = new FrameReader(opts);
  return true;
}
