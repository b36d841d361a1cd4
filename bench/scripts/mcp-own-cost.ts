/**
 * The mcp executor's own CPU per call, with nothing else in it: the executor (through the executors'
 * dispatch, as the engine calls it) and the McpConnection's fast path over a stand-in for the SDK's
 * Client whose `callTool` answers at once, against calling that stand-in directly. Blocks alternate;
 * medians of 8 blocks each.
 *
 * Two ways: with one signal shared by every call (only our code differs between the sides), and with
 * a fresh AbortController per call on both sides, as the engine and the SDK make them (the signal
 * itself is then most of either side: Node 20 makes an AbortController slowly).
 *
 * Run: `npx tsx bench/scripts/mcp-own-cost.ts [--calls N]` (N calls per side and way; default 400000).
 */
import { parseArgs } from 'node:util';
import type { ToolManifest } from '../../src/core/tool.js';
import { createExecutors } from '../../src/executors/index.js';
import { McpConnection } from '../../src/mcp/connection.js';
import { median } from '../../src/bench/stats.js';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '400000' } } });
const N = Number(values.calls);
const ARGS = { text: 'hello' };
const RESULT = { content: [{ type: 'text', text: '{"text":"hello"}' }], structuredContent: { text: 'hello' } };
const standIn = { callTool: async (_params: unknown, _schema: unknown, _opts: unknown) => RESULT };

const connection = new McpConnection({
  name: 'b',
  command: 'none',
  args: [],
  prefix: 'b__',
  trustAnnotations: true,
  scope: 'tenant',
  tools: {},
});
// The stand-in in place of a connected SDK Client, so that only our code is measured.
Object.assign(connection, { state: 'up', client: standIn });
const executor = createExecutors({ mcp: new Map([['b', connection]]) });
const tool: ToolManifest = {
  name: 'b__echo',
  scope: 'tenant',
  risk: 'read',
  idempotent: true,
  timeoutMs: 60_000,
  after: [],
  requires: [],
  executor: { kind: 'mcp', server: 'b', tool: 'echo' },
};

async function cpuPerCall(f: () => Promise<void>, n: number): Promise<number> {
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) await f();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}

const shared = new AbortController().signal;
const out: string[] = [];
for (const [way, signal] of [
  ['one shared signal', () => shared],
  ['a fresh AbortController per call', () => new AbortController().signal],
] as const) {
  const direct = async () => {
    const r = await standIn.callTool({ name: 'echo', arguments: ARGS }, undefined, { signal: signal(), timeout: 60_000 });
    if (!r) throw new Error('no answer');
  };
  const viaExecutor = async () => {
    const r = await executor.execute({ runId: 'r', callId: 'c', tool, args: ARGS, attempt: 1, timeoutMs: 60_000, signal: signal() });
    if (!r.ok) throw new Error(r.error.message);
  };
  await cpuPerCall(direct, 20_000);
  await cpuPerCall(viaExecutor, 20_000);
  const d: number[] = [];
  const e: number[] = [];
  for (let r = 0; r < 8; r++) {
    d.push(await cpuPerCall(direct, N / 8));
    e.push(await cpuPerCall(viaExecutor, N / 8));
  }
  out.push(`| ${way} | ${median(d).toFixed(3)} | ${median(e).toFixed(3)} | ${median(e.map((x, i) => x - (d[i] as number))).toFixed(3)} |`);
}
process.stdout.write(
  "The mcp executor's own cost (CPU µs per call, medians of 8 blocks)\n\n| signal | direct call of the stand-in | mcp executor | executor − direct (median of pairs) |\n|---|---|---|---|\n" +
    `${out.join('\n')}\n`,
);
