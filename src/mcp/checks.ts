/**
 * The config checks that name tools, run on the merged catalog (config tools and MCP tools, after hints
 * and overrides; DESIGN §13): names are unique across the config and every server, and the names in
 * `after`, `requires`, `compensate`, `limits.tool` and policy rules are tools of the catalog (or globs).
 * Problems read like the config loader's: `path: expected …, got …`.
 */
import type { Limits, Policy, ToolManifest } from '../core/tool.js';
import { formatPath } from '../config/load.js';
import { isGlob } from '../config/schema.js';

/** One server's tools, with where the server sits in `mcp.servers`. */
export interface ServerTools {
  server: string;
  index: number;
  manifests: readonly ToolManifest[];
}

/** `mcp.servers[0]`, or with a tool: `mcp.servers[0].tools["get-sum"]`. */
export function serverPath(index: number, tool?: string): string {
  return formatPath(tool === undefined ? ['mcp', 'servers', index] : ['mcp', 'servers', index, 'tools', tool]);
}

export interface MergeInput {
  tools: readonly ToolManifest[];
  policy: Policy;
  limits: Limits;
}

export function checkMerged(file: MergeInput, servers: readonly ServerTools[]): string[] {
  const problems: string[] = [];
  /** Where each name was declared first. */
  const owner = new Map<string, string>();
  file.tools.forEach((t, i) => {
    owner.set(t.name, `tools[${i}]`);
  });
  for (const s of servers) {
    for (const m of s.manifests) {
      const first = owner.get(m.name);
      const own = m.executor.kind === 'mcp' ? m.executor.tool : m.name;
      if (first !== undefined) {
        problems.push(
          `${serverPath(s.index)}: the tool ${JSON.stringify(own)} becomes ${JSON.stringify(m.name)}, a name already used by ${first}; expected names that do not clash (set a prefix)`,
        );
      } else owner.set(m.name, `the tool ${JSON.stringify(own)} of mcp server "${s.server}"`);
    }
  }
  const known = (name: string) => isGlob(name) || owner.has(name);
  const checkList = (where: string, values: readonly string[] | undefined) =>
    values?.forEach((v, j) => {
      if (!known(v)) problems.push(`${where}[${j}]: expected the name of a tool of the catalog, or a glob, got ${JSON.stringify(v)}`);
    });
  const checkTool = (where: string, t: ToolManifest) => {
    checkList(`${where}.after`, t.after);
    checkList(`${where}.requires`, t.requires);
    if (t.compensate && !owner.has(t.compensate.tool)) {
      problems.push(`${where}.compensate.tool: expected the name of a tool of the catalog, got ${JSON.stringify(t.compensate.tool)}`);
    }
  };
  file.tools.forEach((t, i) => {
    checkTool(`tools[${i}]`, t);
  });
  for (const s of servers) {
    for (const m of s.manifests) checkTool(serverPath(s.index, m.executor.kind === 'mcp' ? m.executor.tool : m.name), m);
  }
  file.policy.rules.forEach((r, i) => {
    checkList(`policy.rules[${i}].after`, r.after);
    checkList(`policy.rules[${i}].requires`, r.requires);
  });
  for (const name of Object.keys(file.limits.tool)) {
    if (!owner.has(name))
      problems.push(
        `${formatPath(['limits', 'tool', name])}: expected the name of a tool of the catalog as the key, got ${JSON.stringify(name)}`,
      );
  }
  return problems;
}
