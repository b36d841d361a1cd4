/**
 * A workload for replay tests under real load (DESIGN §8): http tools and hooks served by this process,
 * a config with tenant, tool and resource limits, cross-run locks, retries and hooks, and seeded
 * batches of calls that use them. Tools answer after `args.ms` milliseconds, with a 503 (retryable) for
 * the first `args.fails` attempts; hooks answer after a random 10–40 ms (allow, or replace an output).
 * Nothing here is simulated: the runs go through a real server and their recordings are fetched over
 * HTTP, as a user would.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Tools, hooks and the config that names them. */
export class LoadServer {
  private server!: Server;
  url = '';
  /** Hook requests answered. */
  hooks = 0;
  /** Tool attempts answered. */
  attempts = 0;

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      let text = '';
      req.on('data', (c) => {
        text += String(c);
      });
      req.on('end', () => {
        const body = JSON.parse(text || '{}') as { attempt?: number; args?: Record<string, unknown>; on?: string; callId?: string };
        const reply = (status: number, json: unknown, afterMs: number) =>
          setTimeout(() => {
            if (res.destroyed) return;
            res.writeHead(status, { 'content-type': 'application/json' });
            res.end(JSON.stringify(json));
          }, afterMs);
        if (req.url?.startsWith('/hook/')) {
          this.hooks++;
          const delay = 10 + Math.floor(Math.random() * 31);
          // An after_call hook replaces one output in three: replay must apply the same decision.
          const replace = body.on === 'after_call' && Math.random() < 1 / 3;
          reply(200, replace ? { output: { n: -1, redacted: body.callId } } : {}, delay);
          return;
        }
        this.attempts++;
        const args = body.args ?? {};
        const ms = typeof args.ms === 'number' ? args.ms : 5;
        const fails = typeof args.fails === 'number' ? args.fails : 0;
        if ((body.attempt ?? 1) <= fails) reply(503, { error: 'busy' }, ms);
        else reply(200, { id: args.id, n: args.n }, ms);
      });
    });
    this.server.keepAliveTimeout = 60_000;
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/**
 * The config of the workload: `fetch` reads a document (tenant-wide lock), `store` writes one (tool
 * limit 3, resource limit), `index` reads an index under a rate-free tool limit, `note` runs free;
 * tenants `acme` and `globex` have their own limits; `store` asks a before_call hook and `fetch` an
 * after_call one.
 */
export function loadYaml(url: string, extra = ''): string {
  const tool = (name: string, body: string) => `
  - name: ${name}
    idempotent: true
    retry: { attempts: 3, backoffMs: 5, maxBackoffMs: 20 }
    executor: { kind: http, url: "${url}/tool/${name}" }${body}`;
  return `
tools:${tool('fetch', '\n    reads: ["doc:{id}"]\n    writes: []\n    scope: tenant')}${tool(
    'store',
    '\n    reads: []\n    writes: ["doc:{id}"]\n    scope: tenant',
  )}${tool('index', '\n    reads: ["index:{id}"]\n    writes: []\n    scope: global')}${tool('note', '\n    reads: []\n    writes: []')}
limits:
  tenant: { acme: 4, globex: 3 }
  tool: { store: 3, index: 2 }
  resource: { "doc:*": 3 }
hooks:
  - { on: before_call, name: guard, match: { tool: store }, url: "${url}/hook/before" }
  - { on: after_call, name: audit, match: { tool: fetch }, url: "${url}/hook/after" }
defaults:
  failure: partial
${extra}`;
}

/** A small deterministic random source (mulberry32). */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface LoadBatch {
  tenant: string;
  calls: { id: string; tool: string; args: Record<string, unknown> }[];
}

/**
 * Run `i`'s batch: 3–6 calls on a few shared documents, some reading an earlier call's output, one in
 * three failing its first attempt (retried), durations 2–25 ms.
 */
export function loadBatch(rand: () => number, i: number): LoadBatch {
  const n = 3 + Math.floor(rand() * 4);
  const tools = ['fetch', 'store', 'index', 'note'] as const;
  const calls: LoadBatch['calls'] = [];
  for (let k = 0; k < n; k++) {
    const tool = tools[Math.floor(rand() * tools.length)] as string;
    const args: Record<string, unknown> = { id: `d${Math.floor(rand() * 4)}`, n: k, ms: 2 + Math.floor(rand() * 24) };
    if (rand() < 1 / 3) args.fails = 1;
    if (k > 0 && rand() < 0.3) args.from = `\${c${Math.floor(rand() * k)}.output.n}`;
    calls.push({ id: `c${k}`, tool, args });
  }
  return { tenant: i % 3 === 2 ? 'globex' : 'acme', calls };
}
