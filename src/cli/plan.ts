/** `toolgraph plan BATCH.json [--config FILE] [--format json|mermaid|dot]`: the graph, nothing run. */
import { buildPlan } from '../core/plan.js';
import { planView } from '../engine/plan-view.js';
import { toDot, toMermaid } from '../core/render.js';
import { readBatch, readConfig, UsageError } from './input.js';
import { parseOptions, type Io } from './options.js';
import { startCliMcp } from './mcp.js';

export async function planCommand(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseOptions(args, {
    config: { type: 'string' },
    format: { type: 'string', default: 'json' },
  });
  const format = values.format as string;
  if (!['json', 'mermaid', 'dot'].includes(format)) throw new UsageError(`--format must be json, mermaid or dot, got "${format}"`);
  if (positionals.length !== 1) throw new UsageError('plan takes exactly one BATCH.json');
  const fileConfig = readConfig(values.config as string | undefined);
  const batch = readBatch(positionals[0] as string);
  const mcp = await startCliMcp(fileConfig);
  const config = mcp.config;
  await mcp.close();
  const plan = buildPlan({ calls: batch.calls, tenant: batch.tenant ?? 'default', catalog: config.catalog, policy: config.policy });
  const view = planView(plan);
  if (format === 'json') {
    const { nodes, edges, generations, diagnostics } = view;
    io.out(`${JSON.stringify({ nodes, edges, generations, diagnostics }, null, 2)}\n`);
  } else io.out(format === 'mermaid' ? toMermaid(view.graph) : toDot(view.graph));
  if (format !== 'json' && view.diagnostics.length > 0) {
    for (const d of view.diagnostics) io.err(`${d.code}: ${d.message}\n`);
  }
  return view.diagnostics.length > 0 ? 1 : 0;
}
