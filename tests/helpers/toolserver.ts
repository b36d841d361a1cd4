/**
 * A real tool backend for `http` executor tools: a node:http server on 127.0.0.1:0 that records every
 * request and answers under the test's control.
 *
 * Each request is a `ToolRequest` (path, headers, the executor's JSON body). How it is answered is
 * decided by `behave(req)` (per path via `on`, else the default), which returns either a reply
 * (`{ status, body, headers }`) or `'hold'`: the request then waits until the test calls
 * `req.respond(...)` (or `release(...)`). Tests await arrivals with `next(pred)`, never with sleeps.
 *
 * The default behaviour reads the call's args: `hold: true` holds it; `status: N` answers that status
 * (with `{ error }`); otherwise 200 with `args.out` if given, else `{ callId, args }`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ToolBody {
  runId: string;
  callId: string;
  tool: string;
  args: Record<string, unknown>;
  attempt: number;
}

export interface Reply {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface ToolRequest {
  path: string;
  headers: IncomingMessage['headers'];
  body: ToolBody;
  /** Whether the request has been answered (or its client went away). */
  answered: boolean;
  /** Resolves when the client aborts the request before an answer (cancel, timeout). */
  aborted: Promise<void>;
  /** Answers a held request (default: 200 with `{ callId, args }`). */
  respond(reply?: Reply): void;
}

export type Behaviour = (req: ToolRequest) => Reply | 'hold';

export const defaultBehaviour: Behaviour = (req) => {
  const a = req.body.args;
  if (a.hold === true) return 'hold';
  if (typeof a.status === 'number') return { status: a.status, body: { error: `status ${a.status} as asked` } };
  return { status: 200, body: a.out !== undefined ? a.out : { callId: req.body.callId, args: a } };
};

interface Waiter {
  pred: (r: ToolRequest) => boolean;
  resolve: (r: ToolRequest) => void;
}

export class ToolServer {
  readonly requests: ToolRequest[] = [];
  private readonly routes = new Map<string, Behaviour>();
  private waiters: Waiter[] = [];
  private fallback: Behaviour = defaultBehaviour;

  private constructor(
    private readonly server: Server,
    readonly base: string,
  ) {}

  static async start(): Promise<ToolServer> {
    let self: ToolServer | undefined;
    const server = createServer((req, res) => void self?.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    self = new ToolServer(server, `http://127.0.0.1:${port}`);
    return self;
  }

  url(path: string): string {
    return `${this.base}${path.startsWith('/') ? path : `/${path}`}`;
  }

  /** Sets how requests to `path` are answered; `'*'` replaces the default for every path. */
  on(path: string, behaviour: Behaviour): void {
    if (path === '*') this.fallback = behaviour;
    else this.routes.set(path, behaviour);
  }

  /** The first request (already arrived, or the next to arrive) that matches `pred`. */
  next(pred: (r: ToolRequest) => boolean = () => true, timeoutMs = 10_000): Promise<ToolRequest> {
    const found = this.requests.find(pred);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(
          new Error(
            `no matching tool request within ${timeoutMs} ms (seen: ${this.requests.map((r) => r.body.callId).join(', ') || 'none'})`,
          ),
        );
      }, timeoutMs);
      const waiter: Waiter = {
        pred,
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
      };
      this.waiters.push(waiter);
    });
  }

  /** The request for a call id (of any run, or of `runId`), awaiting it if needed. */
  call(callId: string, runId?: string): Promise<ToolRequest> {
    return this.next((r) => r.body.callId === callId && (runId === undefined || r.body.runId === runId));
  }

  /** Requests seen for a call id. */
  seen(callId: string, runId?: string): ToolRequest[] {
    return this.requests.filter((r) => r.body.callId === callId && (runId === undefined || r.body.runId === runId));
  }

  held(): ToolRequest[] {
    return this.requests.filter((r) => !r.answered);
  }

  /** Answers every held request. */
  release(reply?: Reply): void {
    for (const r of this.held()) r.respond(reply);
  }

  async close(): Promise<void> {
    this.release({ status: 503, body: { error: 'tool server closing' } });
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let body: ToolBody;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ToolBody;
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"not json"}');
      return;
    }
    let onAbort!: () => void;
    const aborted = new Promise<void>((resolve) => (onAbort = resolve));
    const path = (req.url ?? '/').split('?')[0] as string;
    const tr: ToolRequest = {
      path,
      headers: req.headers,
      body,
      answered: false,
      aborted,
      respond: (reply = { status: 200, body: { callId: body.callId, args: body.args } }) => {
        if (tr.answered) return;
        tr.answered = true;
        if (res.destroyed || res.writableEnded) return;
        res.writeHead(reply.status ?? 200, { 'content-type': 'application/json', ...(reply.headers ?? {}) });
        res.end(reply.body === undefined ? '' : JSON.stringify(reply.body));
      },
    };
    res.on('close', () => {
      if (!res.writableFinished) {
        tr.answered = true;
        onAbort();
      }
    });
    this.requests.push(tr);
    const behaviour = this.routes.get(path) ?? this.fallback;
    const decision = behaviour(tr);
    if (decision !== 'hold') tr.respond(decision);
    // Waiters learn of the request after its fate is decided, so a held request is held when seen.
    const ready = this.waiters.filter((w) => w.pred(tr));
    this.waiters = this.waiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.resolve(tr);
  }
}
