/**
 * toolgraph's MCP server (DESIGN §16), on the official SDK's low-level `Server`: `tools/list` is the
 * catalog plus `toolgraph_batch` (./tools.ts), `tools/call` a run through the service (./calls.ts).
 * The transports (./http.ts for Streamable HTTP on `/mcp`, ./stdio.ts) make one per session or per
 * request; this module knows neither.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  CancelledNotificationSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { runToolCall, type McpSession } from './calls.js';
import { BadCursorError, DEFAULT_PAGE_SIZE, toolPage } from './tools.js';

/** The name and version toolgraph gives in `initialize`. */
export const SERVER_INFO = { name: 'toolgraph', version: '0.1.0' } as const;

const INSTRUCTIONS =
  'Every tool call runs through toolgraph: calls that touch the same thing run one after the other in the order ' +
  'they arrive, the others in parallel, under limits, policy and human review. Calls may be sent at once. ' +
  'toolgraph_batch runs several calls as one run, in which a call can use an earlier call\'s output ("${ID.output}").';

export interface McpServerOptions extends McpSession {
  /** Tools per page of `tools/list`. @default 100 */
  pageSize?: number;
  /**
   * For transports that make a Server per request (./http.ts): each `tools/call`'s turn in the
   * session's arrival order, a signal for a cancel that reaches another Server, and the handler of
   * `notifications/cancelled` (which the SDK would otherwise apply only to this Server's requests).
   */
  perRequest?: {
    turn?: Promise<void>;
    submitted?: () => void;
    track(requestId: string | number): { signal: AbortSignal; end(): void };
    cancelled(requestId: string | number): Promise<void>;
  };
}

/** Both signals in one: aborted when either is. */
function eitherSignal(a: AbortSignal, b: AbortSignal | undefined): AbortSignal {
  return b ? AbortSignal.any([a, b]) : a;
}

export function createMcpServer(o: McpServerOptions): Server {
  const server = new Server(SERVER_INFO, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });
  const pageSize = o.pageSize ?? DEFAULT_PAGE_SIZE;

  server.setRequestHandler(ListToolsRequestSchema, async (req) => {
    try {
      const cursor = req.params?.cursor;
      return toolPage(o.service.config.catalog.list(), {
        ...(cursor !== undefined ? { cursor } : {}),
        pageSize,
        maxCalls: o.service.config.limits.maxCallsPerRun,
      });
    } catch (err) {
      if (err instanceof BadCursorError) throw new McpError(ErrorCode.InvalidParams, err.message);
      throw err;
    }
  });

  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const tracked = o.perRequest?.track(extra.requestId);
    try {
      const progressToken = extra._meta?.progressToken;
      return await runToolCall(o, {
        requestId: extra.requestId,
        name: req.params.name,
        args: req.params.arguments,
        signal: eitherSignal(extra.signal, tracked?.signal),
        ...(progressToken !== undefined ? { progressToken, sendProgress: (n) => extra.sendNotification(n) } : {}),
        ...(o.perRequest?.turn ? { turn: o.perRequest.turn } : {}),
        ...(o.perRequest?.submitted ? { submitted: o.perRequest.submitted } : {}),
      });
    } finally {
      tracked?.end();
    }
  });

  if (o.perRequest) {
    const cancelled = o.perRequest.cancelled;
    server.setNotificationHandler(CancelledNotificationSchema, async (n) => {
      if (n.params.requestId !== undefined) await cancelled(n.params.requestId);
    });
  }
  return server;
}
