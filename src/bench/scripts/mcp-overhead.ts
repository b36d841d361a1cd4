/**
 * MCP executor overhead: a `tools/call` through toolgraph's `mcp` executor (deadline, result mapping,
 * output size check, the shared connection) against a direct call of the same tool with the SDK's
 * Client, on the tests' own stdio server (tests/fixtures/mcp/test-server.mjs, tool `echo`). Each side
 * has its own server process; rounds alternate between the two sides so that drift of a busy machine
 * hits both. Reported: µs per call at concurrency 1 and 16 (medians), and the overhead as the median
 * of the paired ratios (executor block / the direct block next to it).
 * Also shown, for scale: a whole run of one call through the Engine (planning, events, scheduling).
 *
 * Target (issue #18): the executor at most 10% over the direct call.
 *
 * Run: `npx tsx src/bench/scripts/mcp-overhead.ts [--calls N] [--rounds R]` (N calls per block, R pairs of blocks; defaults 200 and 30), or `npm run bench:mcp`.
 */
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { parseConfig } from '../../config/load.js';
import { Engine } from '../../engine/engine.js';
import { createExecutors } from '../../executors/index.js';
import type { ExecuteRequest } from '../../executors/types.js';
import { startMcp } from '../../mcp/runtime.js';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '200' }, rounds: { type: 'string', default: '30' } } });
const CALLS = Number(values.calls);
const ROUNDS = Number(values.rounds);
const SERVER = fileURLToPath(new URL('../../../tests/fixtures/mcp/test-server.mjs', import.meta.url));
const ARGS = { text: 'hello' };

/** µs per call for `calls` calls made by `concurrency` workers, each waiting for its previous call. */
async function measure(call: () => Promise<unknown>, calls: number, concurrency: number): Promise<number> {
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < calls) await call();
    }),
  );
  return Number(process.hrtime.bigint() - t0) / 1000 / calls;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

async function main(): Promise<void> {
  const direct = new Client({ name: 'bench', version: '1' });
  await direct.connect(new StdioClientTransport({ command: process.execPath, args: [SERVER] }));
  await direct.listTools();

  const yaml = `mcp: { servers: [ { name: b, command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(SERVER)}], trustAnnotations: true } ] }`;
  const mcp = await startMcp(parseConfig(yaml, 'bench.yaml', { env: {} }));
  const executor = createExecutors({ mcp: mcp.servers });
  const tool = mcp.config.catalog.get('b__echo')!;
  // A fresh signal per call, as the engine gives each attempt its own.
  const request = (): ExecuteRequest => ({ runId: 'bench', callId: 'c', tool, args: ARGS, attempt: 1, timeoutMs: 60_000, signal: new AbortController().signal });
  const engine = new Engine({ config: mcp.config, executor });

  const viaSdk = () => direct.callTool({ name: 'echo', arguments: ARGS });
  const viaExecutor = async () => {
    const r = await executor.execute(request());
    if (!r.ok) throw new Error(r.error.message);
  };
  const viaEngine = async () => {
    const run = await engine.submit({ calls: [{ id: 'c', tool: 'b__echo', args: ARGS }] });
    const v = await engine.wait(run.id);
    if (v?.status !== 'succeeded') throw new Error(`run ${v?.status}`);
  };

  // Warm up both paths (JIT, the connections).
  await measure(viaSdk, 500, 4);
  await measure(viaExecutor, 500, 4);
  await measure(viaEngine, 200, 4);

  // Paired blocks: each block of calls through the executor is compared with the block of direct
  // calls right next to it (alternating which goes first), and the median of those paired ratios is
  // the overhead. On a busy machine the load drifts; a pair sees nearly the same load.
  const rows: string[] = [];
  for (const concurrency of [1, 16]) {
    const sdk: number[] = [];
    const exe: number[] = [];
    const ratios: number[] = [];
    const eng: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      let s: number;
      let e: number;
      if (r % 2 === 0) {
        s = await measure(viaSdk, CALLS, concurrency);
        e = await measure(viaExecutor, CALLS, concurrency);
      } else {
        e = await measure(viaExecutor, CALLS, concurrency);
        s = await measure(viaSdk, CALLS, concurrency);
      }
      sdk.push(s);
      exe.push(e);
      ratios.push(e / s);
      if (r % 4 === 0) eng.push(await measure(viaEngine, CALLS, concurrency));
    }
    rows.push(
      `| ${concurrency} | ${median(sdk).toFixed(1)} | ${median(exe).toFixed(1)} | ${((median(ratios) - 1) * 100).toFixed(1)}% | ${median(eng).toFixed(1)} |`,
    );
  }
  process.stdout.write(
    `MCP call overhead (${ROUNDS} paired blocks of ${CALLS} calls, medians, µs per call)\n\n` +
      '| concurrency | direct SDK call | mcp executor | overhead (median of paired ratios) | whole run through the Engine |\n|---|---|---|---|---|\n' +
      `${rows.join('\n')}\n`,
  );
  await engine.close();
  await executor.close();
  await mcp.close();
  await direct.close();
}

await main();
