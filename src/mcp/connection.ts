/**
 * One MCP server, as toolgraph talks to it (DESIGN §13): one connection (a child process on stdio, or
 * a Streamable HTTP session) shared by every call of the server, made with the official SDK.
 *
 * States: `idle` (never connected) → `connecting` → `up` | `down`; `up` → `down` when the process
 * exits or the connection drops (in-flight calls then fail, retryably); `down` → `connecting` on the
 * next call, no sooner than the backoff allows (200 ms doubling to 10 s, reset by a success); any →
 * `closed` by `close()`, which is final.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, McpError, ToolListChangedNotificationSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { McpServerConfig } from '../config/mcp-schema.js';
import { installFrameReader } from './frames.js';

/** The server cannot be reached now: the call may be retried (the next one reconnects). */
export class McpUnavailableError extends Error {
  override readonly name = 'McpUnavailableError';
  /** The call had been sent when the connection dropped: no answer came (DESIGN §4 `outcome_unknown`). */
  sent = false;
}

export interface ConnectionOptions {
  /** How long a connect (start, initialize) may take. @default 8000 */
  connectTimeoutMs?: number;
  /** Called after the server says its tool list changed (`notifications/tools/list_changed`). */
  onToolsChanged?: () => void;
  /** Where a dropped connection is told (a log line). */
  onDown?: (why: string) => void;
  /**
   * The longest line a stdio server may send (frames.ts): a longer answer fails its call with
   * `output_too_large` and leaves the connection as it is. @default the SDK's 10 MiB
   */
  maxFrameBytes?: number;
  /** Where an answer dropped for its size is told (a log line). */
  onDropped?: (bytes: number) => void;
  /** Makes the transport instead of the server's `command` or `url`: for an in-process server
   * (the SDK's InMemoryTransport) in benchmarks and tests. */
  transport?: () => Transport;
}

/** How many lines of a stdio server's stderr are kept for messages. */
const STDERR_LINES = 10;
const BACKOFF_MS = 200;
const MAX_BACKOFF_MS = 10_000;
/** The longest page walk of tools/list, as a guard against a server whose cursors never end. */
const MAX_PAGES = 1000;

type State = 'idle' | 'connecting' | 'up' | 'down' | 'closed';

export class McpConnection {
  private state: State = 'idle';
  private client: Client | undefined;
  private connecting: Promise<Client> | undefined;
  private failures = 0;
  private retryAt = 0;
  private stderrTail: string[] = [];
  private lastDown = '';
  private readonly connectTimeoutMs: number;

  constructor(
    readonly server: McpServerConfig,
    private readonly opts: ConnectionOptions = {},
  ) {
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 8000;
  }

  /** Connects (at start): throws an Error that names the server and what happened. */
  async start(): Promise<void> {
    await this.connect();
  }

  /** Every tool the server lists, walking all pages. */
  async listTools(): Promise<Tool[]> {
    const client = await this.ready();
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const res = await client.listTools(cursor === undefined ? {} : { cursor });
      tools.push(...res.tools);
      cursor = res.nextCursor;
      if (cursor === undefined || cursor === '') return tools;
    }
    throw new Error(`mcp server "${this.server.name}": tools/list gave more than ${MAX_PAGES} pages`);
  }

  /**
   * `tools/call` on the shared connection. An abort of `signal`, or `timeoutMs` passing, sends
   * `notifications/cancelled`.
   * Rejects with `McpUnavailableError` when the server is down or the connection dropped during the call.
   *
   * While the connection is up, this is the SDK's call and one reaction to it: no `await` of `ready()`
   * and no async wrapper, each of which would add a promise and a turn of the microtask queue to every
   * call (issue #18).
   */
  call(tool: string, args: Record<string, unknown>, signal: AbortSignal, timeoutMs: number): Promise<CallToolResult> {
    const client = this.state === 'up' ? this.client : undefined;
    if (client) return this.send(client, tool, args, signal, timeoutMs);
    return this.ready(signal).then((c) => this.send(c, tool, args, signal, timeoutMs));
  }

  private send(
    client: Client,
    tool: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
    timeoutMs: number,
  ): Promise<CallToolResult> {
    // The SDK's timeout sends notifications/cancelled and fails with RequestTimeout (-32001).
    const timeout = Number.isFinite(timeoutMs) ? Math.min(timeoutMs, 2 ** 31 - 1) : 2 ** 31 - 1;
    return (client.callTool({ name: tool, arguments: args }, undefined, { signal, timeout }) as Promise<CallToolResult>).catch(
      (err: unknown) => {
        if (signal.aborted) throw err;
        if (isConnectionError(err) || this.client !== client) {
          this.markDown(client, `the connection dropped during the call: ${messageOf(err)}`);
          const lost = new McpUnavailableError(`mcp server "${this.server.name}" ${this.lastDown}`);
          lost.sent = true;
          throw lost;
        }
        throw err;
      },
    );
  }

  async close(): Promise<void> {
    const client = this.client;
    this.state = 'closed';
    this.client = undefined;
    await client?.close().catch(() => {});
  }

  /** The last lines a stdio server wrote to stderr. */
  stderr(): string[] {
    return [...this.stderrTail];
  }

  // ---- connecting --------------------------------------------------------------------------------

  /** The live client, connecting again when it is down (after the backoff). */
  private async ready(signal?: AbortSignal): Promise<Client> {
    if (this.state === 'up' && this.client) return this.client;
    if (this.state === 'closed') throw new McpUnavailableError(`mcp server "${this.server.name}" is closed`);
    if (this.connecting) return this.connecting;
    const wait = this.retryAt - Date.now();
    if (wait > 0) {
      throw new McpUnavailableError(`mcp server "${this.server.name}" is down (${this.lastDown}); the next try is in ${wait} ms`);
    }
    if (signal?.aborted) throw signal.reason;
    try {
      return await this.connect();
    } catch (err) {
      throw new McpUnavailableError(messageOf(err));
    }
  }

  private connect(): Promise<Client> {
    this.state = 'connecting';
    this.connecting = this.open().then(
      (client) => {
        this.connecting = undefined;
        if (this.state === 'closed') {
          void client.close().catch(() => {});
          throw new Error(`mcp server "${this.server.name}" is closed`);
        }
        this.state = 'up';
        this.failures = 0;
        this.client = client;
        return client;
      },
      (err: unknown) => {
        this.connecting = undefined;
        if (this.state !== 'closed') this.state = 'down';
        this.failures++;
        this.retryAt = Date.now() + Math.min(MAX_BACKOFF_MS, BACKOFF_MS * 2 ** (this.failures - 1));
        this.lastDown = messageOf(err);
        throw err;
      },
    );
    return this.connecting;
  }

  private async open(): Promise<Client> {
    const s = this.server;
    const transport = this.opts.transport?.() ?? this.transport();
    const client = new Client({ name: 'toolgraph', version: '1' });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.opts.onToolsChanged?.());
    client.onclose = () => this.markDown(client, this.exitDescription('the connection closed'));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer to initialize within ${this.connectTimeoutMs} ms`)), this.connectTimeoutMs);
    });
    try {
      await Promise.race([client.connect(transport), timeout]);
      return client;
    } catch (err) {
      // A child that did not answer is killed outright: the SDK's polite close could take 4 s more.
      if (transport instanceof StdioClientTransport && transport.pid !== null) {
        try {
          process.kill(transport.pid, 'SIGKILL');
        } catch {
          // it is gone already
        }
      }
      await client.close().catch(() => {});
      await transport.close().catch(() => {});
      // Give the child's last stderr a moment to arrive: it usually says why.
      await new Promise((r) => setTimeout(r, 50));
      const where = s.command !== undefined ? `could not start (${[s.command, ...s.args].join(' ')})` : `could not be reached at ${s.url}`;
      throw new Error(`mcp server "${s.name}" ${where}: ${messageOf(err)}${this.stderrSuffix()}`);
    } finally {
      clearTimeout(timer);
    }
  }

  private transport(): Transport {
    const s = this.server;
    if (s.url !== undefined) {
      return new StreamableHTTPClientTransport(new URL(s.url), s.headers ? { requestInit: { headers: s.headers } } : {});
    }
    this.stderrTail = [];
    const t = new StdioClientTransport({
      command: s.command as string,
      args: s.args,
      // Without env the SDK passes a safe few variables (HOME, PATH, …); env adds to them.
      ...(s.env ? { env: s.env } : {}),
      ...(s.cwd ? { cwd: s.cwd } : {}),
      stderr: 'pipe',
      ...(this.opts.maxFrameBytes !== undefined ? { maxBufferSize: this.opts.maxFrameBytes } : {}),
    });
    if (this.opts.maxFrameBytes !== undefined) {
      const onDropped = this.opts.onDropped;
      installFrameReader(t, { maxFrameBytes: this.opts.maxFrameBytes, ...(onDropped ? { onDropped: (bytes) => onDropped(bytes) } : {}) });
    }
    let partial = '';
    t.stderr?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) if (line.trim() !== '') this.stderrTail.push(line);
      if (this.stderrTail.length > STDERR_LINES) this.stderrTail.splice(0, this.stderrTail.length - STDERR_LINES);
    });
    return t;
  }

  private markDown(client: Client, why: string): void {
    if (this.client !== client || this.state !== 'up') return;
    this.client = undefined;
    this.state = 'down';
    this.lastDown = why;
    this.failures++;
    // The first reconnect is at once (a crash is usually a one-off); repeated ones back off.
    this.retryAt = Date.now() + (this.failures <= 1 ? 0 : Math.min(MAX_BACKOFF_MS, BACKOFF_MS * 2 ** (this.failures - 2)));
    void client.close().catch(() => {});
    this.opts.onDown?.(why);
  }

  private exitDescription(what: string): string {
    return `${what}${this.stderrSuffix()}`;
  }

  private stderrSuffix(): string {
    return this.stderrTail.length > 0 ? `; its stderr ended with:\n    ${this.stderrTail.join('\n    ')}` : '';
  }
}

/** The SDK's "connection closed" (-32000), or a transport failure (fetch, a pipe): not the tool's fault. */
function isConnectionError(err: unknown): boolean {
  if (err instanceof McpError) return err.code === ErrorCode.ConnectionClosed;
  if (err instanceof StreamableHTTPError || err instanceof TypeError) return true; // an HTTP status, or fetch failed
  return typeof (err as { code?: unknown } | null)?.code === 'string'; // EPIPE, ECONNRESET, …
}

export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return typeof err === 'string' ? err : String(err);
}
