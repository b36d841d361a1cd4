/**
 * MCP executor overhead: a `tools/call` through toolgraph's `mcp` executor (the attempt's deadline and
 * cancel, result mapping, the shared connection) against a direct call of the same tool with the SDK's
 * Client, on the tests' own stdio server (tests/fixtures/mcp/test-server.mjs, tool `echo`).
 *
 * Like with like: the direct call is made as the executor makes it, `callTool(params, undefined,
 * { signal, timeout })`, with a fresh AbortController per call on both sides (the engine gives each
 * attempt its own signal, and the SDK never removes its abort listener, so a signal cannot be shared
 * by calls). A call with no signal at all is shown too ("bare"), for what cancel itself costs. Each
 * side has its own server process, started the same way; their CPU per call is shown, to check that
 * they are equal.
 *
 * Rounds alternate between the two sides (which goes first alternates too) so that drift of a busy
 * machine hits both. Reported per concurrency (1 and 16): wall µs per call (medians of blocks) and
 * the overhead as the median of the paired ratios (executor block / the direct block next to it),
 * with their middle half; CPU µs per call of this process (every thread) and of each side's server
 * (Linux's /proc/<pid>/task/<tid>/schedstat), over all the blocks of a side, and the ratio of those.
 * Also shown, for scale: a whole run of one call through the Engine (planning, events, scheduling).
 *
 * And in process, where a busy machine matters least: each side talks to its own SDK Server (the same
 * `echo`) over the SDK's InMemoryTransport, no pipe, no second process. This process's CPU per call is
 * then the whole call, client and server, and the executor's share of it is bigger than over stdio.
 *
 * Target (issue #18): the executor at most 10% over the direct call.
 *
 * Run: `npx tsx bench/scripts/mcp-overhead.ts [--calls N] [--rounds R] [--profile]` (N calls per
 * block, R pairs of blocks; defaults 200 and 60; in process, 5R pairs), or `npm run bench:mcp`. `--profile` also profiles
 * every block (src/bench/block-profile.ts) and prints, per concurrency, the functions whose CPU self
 * time per call differs most between the two sides.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { parseConfig } from '../../src/config/load.js';
import { Engine } from '../../src/engine/engine.js';
import { createExecutors, type Executor } from '../../src/executors/index.js';
import type { ExecuteRequest } from '../../src/executors/types.js';
import { McpConnection } from '../../src/mcp/connection.js';
import { startMcp } from '../../src/mcp/runtime.js';
import type { ToolManifest } from '../../src/core/tool.js';
import { blockProfiler, type BlockProfiler } from '../../src/bench/block-profile.js';
import { median, quantile } from '../../src/bench/stats.js';

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '60' },
    profile: { type: 'boolean', default: false },
  },
});
const CALLS = Number(values.calls);
const ROUNDS = Number(values.rounds);
const SERVER = fileURLToPath(new URL('../../tests/fixtures/mcp/test-server.mjs', import.meta.url));
const ARGS = { text: 'hello' };
const TIMEOUT_MS = 60_000;

interface Block {
  /** µs per call, wall. */
  wall: number;
  /** µs per call, this process's CPU. */
  cpu: number;
  /** µs per call, the CPU of the server that answered. */
  server: number;
}

/** CPU time of a process so far, in µs (every thread), or NaN where /proc does not say. */
function processCpuUs(pid: number): number {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`))
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    return ns / 1000;
  } catch {
    return NaN;
  }
}

/** This process's CPU time so far, in µs (every thread). */
function hereCpuUs(): number {
  const c = process.cpuUsage();
  return c.user + c.system;
}

/** `calls` calls made by `concurrency` workers, each waiting for its previous call. */
async function measure(call: () => Promise<unknown>, calls: number, concurrency: number, serverPid: number): Promise<Block> {
  let next = 0;
  const s0 = processCpuUs(serverPid);
  const c0 = hereCpuUs();
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < calls) await call();
    }),
  );
  const wall = Number(process.hrtime.bigint() - t0) / 1000 / calls;
  const c = hereCpuUs() - c0;
  return { wall, cpu: c / calls, server: (processCpuUs(serverPid) - s0) / calls };
}

/** The tests' server's `echo`, in this process: an SDK Server on one end of a linked pair of
 * InMemoryTransports; returns the other end, for a client. */
async function inProcessServer(): Promise<Transport> {
  const [client, server] = InMemoryTransport.createLinkedPair();
  const s = new Server({ name: 'echo', version: '1' }, { capabilities: { tools: {} } });
  s.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: 'echo',
        inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
        annotations: { readOnlyHint: true, idempotentHint: true },
      },
    ],
  }));
  s.setRequestHandler(CallToolRequestSchema, async (req) => {
    const args = req.params.arguments ?? {};
    return { content: [{ type: 'text', text: JSON.stringify(args) }], structuredContent: args };
  });
  await s.connect(server);
  return client;
}

/** The two sides, each an async function that awaits its call and checks its answer. */
function sides(direct: Client, executor: Executor, tool: ToolManifest) {
  const viaSdk = async () => {
    const r = (await direct.callTool({ name: 'echo', arguments: ARGS }, undefined, {
      signal: new AbortController().signal,
      timeout: TIMEOUT_MS,
    })) as CallToolResult;
    if (r.isError === true) throw new Error('isError');
  };
  const viaBareSdk = async () => {
    const r = (await direct.callTool({ name: 'echo', arguments: ARGS })) as CallToolResult;
    if (r.isError === true) throw new Error('isError');
  };
  // A fresh signal per call, as the engine gives each attempt its own.
  const viaExecutor = async () => {
    const r = await executor.execute({
      runId: 'bench',
      callId: 'c',
      tool,
      args: ARGS,
      attempt: 1,
      timeoutMs: TIMEOUT_MS,
      signal: new AbortController().signal,
    });
    if (!r.ok) throw new Error(r.error.message);
  };
  return { viaSdk, viaBareSdk, viaExecutor };
}

/** In process: CPU per call (client and server) of each side, paired blocks. */
async function inProcess(concurrency: number): Promise<string> {
  const direct = new Client({ name: 'bench', version: '1' });
  await direct.connect(await inProcessServer());
  await direct.listTools();
  const transport = await inProcessServer();
  const server = { name: 'p', args: [], prefix: 'p__', trustAnnotations: true, scope: 'tenant' as const, tools: {} };
  const connection = new McpConnection(server, { transport: () => transport });
  await connection.start();
  await connection.listTools();
  const executor = createExecutors({ mcp: new Map([['p', connection]]) });
  const tool: ToolManifest = {
    name: 'p__echo',
    scope: 'tenant',
    risk: 'read',
    idempotent: true,
    timeoutMs: TIMEOUT_MS,
    after: [],
    requires: [],
    executor: { kind: 'mcp', server: 'p', tool: 'echo' },
  };
  const { viaSdk, viaBareSdk, viaExecutor } = sides(direct, executor, tool);
  for (const f of [viaSdk, viaBareSdk, viaExecutor]) await measure(f, 2000, 4, NaN);
  const sdk: Block[] = [];
  const exe: Block[] = [];
  const bare: Block[] = [];
  for (let r = 0; r < ROUNDS * 5; r++) {
    if (r % 2 === 0) {
      sdk.push(await measure(viaSdk, CALLS, concurrency, NaN));
      exe.push(await measure(viaExecutor, CALLS, concurrency, NaN));
    } else {
      exe.push(await measure(viaExecutor, CALLS, concurrency, NaN));
      sdk.push(await measure(viaSdk, CALLS, concurrency, NaN));
    }
    if (r % 4 === 0) bare.push(await measure(viaBareSdk, CALLS, concurrency, NaN));
  }
  await executor.close();
  await connection.close();
  await direct.close();
  const [d, e, b] = [total(sdk, 'cpu'), total(exe, 'cpu'), total(bare, 'cpu')];
  return `| ${concurrency} | ${d.toFixed(2)} | ${e.toFixed(2)} | ${pc(e / d)} | ${(e - d).toFixed(2)} | ${b.toFixed(2)} |`;
}

const f1 = (x: number) => (Number.isNaN(x) ? '–' : x.toFixed(1));
const pc = (r: number) => `${((r - 1) * 100).toFixed(1)}%`;
/** The median of paired ratios as an overhead, with the middle half of them (the spread of the pairs). */
/** CPU per call of a side over all its blocks (the sum over the sum: CPU time of a block of a few
 * ms is not to be trusted on a VM, where a 3 ms busy loop has read anywhere from 1.5 to 10 ms). */
const total = (bs: Block[], k: 'cpu' | 'server') => bs.reduce((a, b) => a + b[k], 0) / bs.length;
const pct = (ratios: number[]) => `${pc(median(ratios))} (${pc(quantile(ratios, 0.25))} … ${pc(quantile(ratios, 0.75))})`;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  const loadBefore = load();
  // Started as McpConnection starts a stdio server: stderr piped (and read), the SDK's default env.
  const transport = new StdioClientTransport({ command: process.execPath, args: [SERVER], stderr: 'pipe' });
  transport.stderr?.on('data', () => {});
  const direct = new Client({ name: 'bench', version: '1' });
  await direct.connect(transport);
  await direct.listTools();
  const directPid = transport.pid as number;

  const yaml = `mcp: { servers: [ { name: b, command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(SERVER)}], trustAnnotations: true } ] }`;
  const mcp = await startMcp(parseConfig(yaml, 'bench.yaml', { env: {} }));
  const executor = createExecutors({ mcp: mcp.servers });
  const tool = mcp.config.catalog.get('b__echo')!;
  const pidRequest: ExecuteRequest = {
    runId: 'bench',
    callId: 'pid',
    tool: mcp.config.catalog.get('b__pid')!,
    args: {},
    attempt: 1,
    timeoutMs: TIMEOUT_MS,
    signal: new AbortController().signal,
  };
  const pidOut = await executor.execute(pidRequest);
  const executorPid = pidOut.ok ? (pidOut.output as { pid: number }).pid : NaN;
  const engine = new Engine({ config: mcp.config, executor });

  const { viaSdk, viaBareSdk, viaExecutor } = sides(direct, executor, tool);
  const viaEngine = async () => {
    const run = await engine.submit({ calls: [{ id: 'c', tool: 'b__echo', args: ARGS }] });
    const v = await engine.wait(run.id);
    if (v?.status !== 'succeeded') throw new Error(`run ${v?.status}`);
  };

  // Warm up every path (JIT, the connections).
  await measure(viaSdk, 500, 4, directPid);
  await measure(viaBareSdk, 500, 4, directPid);
  await measure(viaExecutor, 500, 4, executorPid);
  await measure(viaEngine, 200, 4, executorPid);

  const profiler: BlockProfiler | undefined = values.profile ? await blockProfiler() : undefined;
  const profiles: string[] = [];
  const wallRows: string[] = [];
  const cpuRows: string[] = [];
  for (const concurrency of [1, 16]) {
    const sdk: Block[] = [];
    const exe: Block[] = [];
    const bare: number[] = [];
    const eng: number[] = [];
    const block = (side: string, call: () => Promise<unknown>, pid: number) =>
      profiler
        ? profiler.profile(`${side}@${concurrency}`, CALLS, () => measure(call, CALLS, concurrency, pid))
        : measure(call, CALLS, concurrency, pid);
    for (let r = 0; r < ROUNDS; r++) {
      if (r % 2 === 0) {
        sdk.push(await block('sdk', viaSdk, directPid));
        exe.push(await block('executor', viaExecutor, executorPid));
      } else {
        exe.push(await block('executor', viaExecutor, executorPid));
        sdk.push(await block('sdk', viaSdk, directPid));
      }
      if (r % 4 === 0) {
        bare.push((await measure(viaBareSdk, CALLS, concurrency, directPid)).wall);
        eng.push((await measure(viaEngine, CALLS, concurrency, executorPid)).wall);
      }
    }
    const m = (bs: Block[], k: keyof Block) => median(bs.map((b) => b[k]));
    const ratios = (k: keyof Block) => exe.map((e, i) => e[k] / (sdk[i] as Block)[k]);
    wallRows.push(
      `| ${concurrency} | ${f1(m(sdk, 'wall'))} | ${f1(m(exe, 'wall'))} | ${pct(ratios('wall'))} | ${f1(median(bare))} | ${f1(median(eng))} |`,
    );
    cpuRows.push(
      `| ${concurrency} | ${f1(total(sdk, 'cpu'))} | ${f1(total(exe, 'cpu'))} | ${pc(total(exe, 'cpu') / total(sdk, 'cpu'))} | ${f1(total(sdk, 'server'))} | ${f1(total(exe, 'server'))} |`,
    );
    if (profiler) profiles.push(`c=${concurrency}: ${profiler.summary(`sdk@${concurrency}`, `executor@${concurrency}`, 25)}`);
  }
  const inProcessRows = [await inProcess(1), await inProcess(16)];
  process.stdout.write(
    `MCP call overhead (${ROUNDS} paired blocks of ${CALLS} calls, medians, µs per call; load average ${loadBefore} before, ${load()} after)\n\n` +
      '| concurrency | direct SDK call | mcp executor | overhead, wall (median of paired ratios, and their middle half) | bare SDK call (no signal) | whole run through the Engine |\n|---|---|---|---|---|---|\n' +
      `${wallRows.join('\n')}\n\n` +
      "| concurrency | CPU here, direct SDK call | CPU here, mcp executor | overhead, CPU (ratio of the totals) | its server's CPU, direct | its server's CPU, executor |\n|---|---|---|---|---|---|\n" +
      `${cpuRows.join('\n')}\n\n` +
      `In process (the SDK's InMemoryTransport; ${ROUNDS * 5} paired blocks of ${CALLS} calls), CPU µs per call (every block of a side together), client and server:\n\n` +
      '| concurrency | direct SDK call | mcp executor | overhead (ratio of the totals) | executor − direct | bare SDK call (no signal) |\n|---|---|---|---|---|---|\n' +
      `${inProcessRows.join('\n')}\n` +
      (profiles.length > 0 ? `\n${profiles.join('\n')}` : ''),
  );
  profiler?.close();
  await engine.close();
  await executor.close();
  await mcp.close();
  await direct.close();
}

await main();
