/**
 * toolgraph's MCP server over stdio (DESIGN §16), for one local client: one session for the life of
 * the process, its id minted at start. stdout carries the protocol and nothing else. The SDK's own
 * handling of `notifications/cancelled` aborts the call's handler, which cancels its run.
 */
import { randomUUID } from 'node:crypto';
import type { Readable, Writable } from 'node:stream';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Principal } from '../api/auth.js';
import type { Service } from '../api/service.js';
import type { McpSession } from './calls.js';
import { createMcpServer } from './server.js';

export interface StdioOptions {
  service: Service;
  principal: Principal;
  logger?: McpSession['logger'];
  /** @default process.stdin */
  input?: Readable;
  /** @default process.stdout */
  output?: Writable;
}

export interface StdioServer {
  /** The session id: every run of this process's calls is tagged `mcp.session: <it>`. */
  session: string;
  /** Resolves when the client goes away (stdin ends) or `close` is called. */
  closed: Promise<void>;
  close(): Promise<void>;
}

export async function serveStdio(o: StdioOptions): Promise<StdioServer> {
  const session = randomUUID();
  const input = o.input ?? process.stdin;
  const server = createMcpServer({ service: o.service, principal: o.principal, id: session, ...(o.logger ? { logger: o.logger } : {}) });
  const transport = new StdioServerTransport(input, o.output ?? process.stdout);
  let done!: () => void;
  const closed = new Promise<void>((resolve) => {
    done = resolve;
  });
  transport.onclose = () => done();
  input.once('end', () => void server.close());
  input.once('close', () => void server.close());
  await server.connect(transport);
  return {
    session,
    closed,
    close: async () => {
      await server.close();
      done();
    },
  };
}
