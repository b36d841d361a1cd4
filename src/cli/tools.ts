/**
 * `toolgraph tools [--config FILE] [--format table|json|openai|anthropic]`: the merged catalog (config
 * tools and the tools of the config's MCP servers, which it connects to), as a table, as `GET /v1/tools`
 * shows it (json), or as the tool definitions a model API takes (`{ tools, skipped }`).
 */
import { listedTool, modelTools, toolSource } from '../api/tool-list.js';
import type { ToolManifest } from '../core/tool.js';
import { readConfig, UsageError } from './input.js';
import { parseOptions, type Io } from './options.js';
import { startCliMcp } from './mcp.js';

const FORMATS = ['table', 'json', 'openai', 'anthropic'];

function effects(t: ToolManifest): string {
  const r = t.reads?.length ? `reads ${t.reads.join(' ')}` : '';
  const w = t.writes?.length ? `writes ${t.writes.join(' ')}` : '';
  return [r, w].filter(Boolean).join('; ') || (t.reads === undefined && t.writes === undefined ? 'unknown (writes *)' : 'none');
}

function table(tools: readonly ToolManifest[], source: string): string {
  const rows = tools.map((t) => [t.name, toolSource(t, source), t.risk, t.idempotent ? 'yes' : 'no', effects(t)]);
  const head = ['NAME', 'SOURCE', 'RISK', 'IDEMPOTENT', 'EFFECTS'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] as number))).join('  ');
  return `${[head, ...rows].map(line).join('\n')}\n`;
}

export async function toolsCommand(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseOptions(args, {
    config: { type: 'string' },
    format: { type: 'string', default: 'table' },
  });
  const format = values.format as string;
  if (!FORMATS.includes(format)) throw new UsageError(`--format must be table, json, openai or anthropic, got "${format}"`);
  if (positionals.length > 0) throw new UsageError(`tools takes no positional arguments, got "${positionals.join(' ')}"`);
  const mcp = await startCliMcp(readConfig(values.config as string | undefined));
  try {
    const { catalog, source } = mcp.config;
    const tools = catalog.list();
    if (format === 'table') io.out(table(tools, source));
    else if (format === 'json') io.out(`${JSON.stringify({ items: tools.map((t) => listedTool(t, source)) }, null, 2)}\n`);
    else io.out(`${JSON.stringify(modelTools(tools, format as 'openai' | 'anthropic'), null, 2)}\n`);
    return 0;
  } finally {
    await mcp.close();
  }
}
