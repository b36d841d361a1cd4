/**
 * What toolgraph as an MCP server (DESIGN §16) adds to a `tools/call` round trip: the same tool of the
 * same MCP server (`echo` of the tests' stdio server, tests/fixtures/mcp/test-server.mjs, which does
 * next to nothing, so the difference is toolgraph's) called by the official SDK client
 *
 * - directly: Client → the server over stdio;
 * - through `/mcp`: Client → toolgraph's Streamable HTTP endpoint (an in-process API on a SQLite file,
 *   as `toolgraph serve` builds it) → a run of one call → the `mcp` executor → the server over stdio;
 * - through `toolgraph mcp`: Client → toolgraph over stdio (a child process) → the same path.
 *
 * One call at a time (the latency a model's single tool call sees). Rounds alternate the sides in
 * blocks, so that drift of a busy machine hits each alike. Printed per side: p50 and p99 of the round
 * trip in ms, and what toolgraph adds at p50 and p99 (its percentile minus the direct one).
 *
 * Run: `npm run bench:mcp-server [-- --calls N --rounds R]` (N calls per block, R blocks per side;
 * defaults 50 and 20).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { buildServer } from '../src/api/server.js';
import { openService } from '../src/api/service.js';
import { parseConfig } from '../src/config/load.js';
import { createExecutors } from '../src/executors/index.js';
import { startMcp } from '../src/mcp/runtime.js';
import { mcpRoutes } from '../src/mcp-server/http.js';
import { openStore, parseStoreValue } from '../src/store/select.js';
import { quantile } from '../src/bench/stats.js';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '50' }, rounds: { type: 'string', default: '20' } } });
const CALLS = Number(values.calls);
const ROUNDS = Number(values.rounds);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SERVER = path.join(ROOT, 'tests/fixtures/mcp/test-server.mjs');
const BIN = path.join(ROOT, 'bin/toolgraph.mjs');

const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-bench-mcp-server-'));
const yaml = `
mcp:
  servers:
    - name: t
      command: ${JSON.stringify(process.execPath)}
      args: [${JSON.stringify(SERVER)}]
      trustAnnotations: true
`;
const configFile = path.join(dir, 'toolgraph.yaml');
writeFileSync(configFile, yaml);

async function connect(transport: Transport): Promise<Client> {
  const client = new Client({ name: 'bench', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

// toolgraph in process, as `toolgraph serve` builds it, with /mcp.
const silent = { warn: () => {}, info: () => {} };
const mcp = await startMcp(parseConfig(yaml, configFile, { env: {}, baseDir: dir }), { logger: silent });
const executor = createExecutors({ mcp: mcp.servers });
const store = await openStore(parseStoreValue(path.join(dir, 'http.db'), 'db'));
const service = await openService({ config: mcp.config, store, executor });
await service.recover();
const app = buildServer({ service, plugins: [mcpRoutes()] });
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
const port = typeof address === 'object' && address ? address.port : 0;

const sides: { name: string; tool: string; client: Client }[] = [
  { name: 'direct (stdio)', tool: 'echo', client: await connect(new StdioClientTransport({ command: process.execPath, args: [SERVER] })) },
  {
    name: 'toolgraph /mcp (HTTP)',
    tool: 't__echo',
    client: await connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`))),
  },
  {
    name: 'toolgraph mcp (stdio)',
    tool: 't__echo',
    client: await connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [BIN, 'mcp', '--config', configFile, '--db', path.join(dir, 'stdio.db'), '--drain-ms', '0'],
        env: { ...(process.env as Record<string, string>), LOG_LEVEL: 'error' },
        stderr: 'ignore',
      }),
    ),
  },
];

const samples = new Map<string, number[]>(sides.map((s) => [s.name, []]));
async function block(side: (typeof sides)[number], record: boolean): Promise<void> {
  for (let i = 0; i < CALLS; i++) {
    const t0 = performance.now();
    const r = await side.client.callTool({ name: side.tool, arguments: { text: 'hello' } });
    const ms = performance.now() - t0;
    if (r.isError) throw new Error(`${side.name}: ${JSON.stringify(r.content)}`);
    if (record) samples.get(side.name)?.push(ms);
  }
}

for (const side of sides) await block(side, false); // warm up
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? sides : [...sides].reverse();
  for (const side of order) await block(side, true);
}

const fmt = (ms: number) => ms.toFixed(3).padStart(8);
const direct = samples.get(sides[0]!.name) as number[];
const d50 = quantile(direct, 0.5);
const d99 = quantile(direct, 0.99);
console.log(`tools/call round trip, one at a time: ${CALLS * ROUNDS} calls per side (load average ${loadavg()[0]!.toFixed(2)})`);
console.log(`${'side'.padEnd(24)}   p50 ms   p99 ms   added p50   added p99`);
for (const side of sides) {
  const xs = samples.get(side.name) as number[];
  const p50 = quantile(xs, 0.5);
  const p99 = quantile(xs, 0.99);
  const added = side === sides[0] ? '' : `${fmt(p50 - d50)}    ${fmt(p99 - d99)}`;
  console.log(`${side.name.padEnd(24)} ${fmt(p50)} ${fmt(p99)}  ${added}`);
}

for (const side of sides) await side.client.close();
await app.close();
await service.close();
await executor.close();
await mcp.close();
await store.close();
rmSync(dir, { recursive: true, force: true });
