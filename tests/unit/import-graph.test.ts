/**
 * The import graph of src/: no cycle between files, no cycle between folders (src/<folder>), and
 * src/core imports nothing from the other folders (DESIGN §18). A small scanner
 * reads the import specifiers of every module (`import … from`, `export … from`, side-effect
 * `import '…'`, dynamic `import('…')`, type-only imports too: a type cycle is still a tangle) and
 * resolves the relative ones; packages are not followed.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../../src');
const MODULE = /\.(ts|mts|js|mjs)$/;

function modulesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return modulesUnder(path);
    return MODULE.test(name) && !/\.d\.m?ts$/.test(name) ? [path] : [];
  });
}

/** The specifiers a module imports, comments left out. */
function specifiersOf(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const found: string[] = [];
  const patterns = [
    /\b(?:import|export)\s+(?:type\s+)?[\w*{}\s,$]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const re of patterns) for (const m of code.matchAll(re)) found.push(m[1] as string);
  return found;
}

/** The file a relative specifier names (`./x.js` is `./x.ts` in the sources), if it is one of ours. */
function resolveSpecifier(from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const base = resolve(dirname(from), spec);
  const candidates = [base.replace(/\.js$/, '.ts'), base.replace(/\.mjs$/, '.mts'), base, `${base}.ts`, join(base, 'index.ts')];
  return candidates.find((c) => MODULE.test(c) && existsSync(c) && statSync(c).isFile());
}

type Graph = Map<string, Set<string>>;

function importGraph(root = SRC): Graph {
  const graph: Graph = new Map();
  for (const file of modulesUnder(root)) {
    const to = new Set<string>();
    for (const spec of specifiersOf(readFileSync(file, 'utf8'))) {
      const target = resolveSpecifier(file, spec);
      if (target !== undefined && target !== file) to.add(relative(root, target).split(sep).join('/'));
    }
    graph.set(relative(root, file).split(sep).join('/'), to);
  }
  return graph;
}

/** Strongly connected components with more than one member (Tarjan), each sorted: the cycles. */
function cyclesOf(graph: Graph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    let w: string;
    do {
      w = stack.pop() as string;
      onStack.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1) out.push(scc.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return out;
}

/** `api/routes/runs.ts` → `api`; a file directly in src/ is its own folder (`index.ts`). */
const folderOf = (file: string) => file.split('/')[0] as string;

function folderGraph(files: Graph): Graph {
  const graph: Graph = new Map();
  for (const [from, tos] of files) {
    const edges = graph.get(folderOf(from)) ?? new Set<string>();
    for (const to of tos) if (folderOf(to) !== folderOf(from)) edges.add(folderOf(to));
    graph.set(folderOf(from), edges);
  }
  return graph;
}

/**
 * The direction of dependencies: a folder imports only from folders of a lower layer, so they point
 * inward to core. `contract` holds the shapes the shell shares (requests, responses, recordings,
 * config); the engine and what it drives sit on it; replay, telemetry and the cluster (several replicas)
 * on the engine; api, client, the framework adapters and dashboard on those; the
 * CLI and the library's entry (`index.ts`) on everything.
 */
const LAYERS: Record<string, number> = {
  core: 0,
  config: 1,
  contract: 2,
  executors: 3,
  hooks: 3,
  store: 3,
  mcp: 3,
  engine: 4,
  replay: 5,
  telemetry: 5,
  cluster: 5,
  api: 6,
  adapters: 6,
  client: 6,
  dashboard: 6,
  bench: 7,
  'mcp-server': 7,
  cli: 8,
  'index.ts': 8,
};

describe('import graph of src/', () => {
  const files = importGraph();

  it('scans import, export-from, side-effect and dynamic imports, skipping comments', () => {
    const text = [
      "import type { A } from './a.js';",
      "import {\n  b,\n  c,\n} from '../b.js';",
      "export { d } from './d.js';",
      "export * from './e.js';",
      "import './f.js';",
      "const g = await import('./g.js');",
      "/* import { h } from './h.js'; */",
      "// import { i } from './i.js';",
      "import { z } from 'zod';",
    ].join('\n');
    expect(specifiersOf(text)).toEqual(['./a.js', '../b.js', './d.js', './e.js', 'zod', './f.js', './g.js']);
    expect(
      cyclesOf(
        new Map([
          ['a', new Set(['b'])],
          ['b', new Set(['c'])],
          ['c', new Set(['a'])],
          ['d', new Set(['a'])],
        ]),
      ),
    ).toEqual([['a', 'b', 'c']]);
  });

  it('finds the modules and their imports', () => {
    expect(files.size).toBeGreaterThan(50);
    expect(files.get('api/server.ts')?.size).toBeGreaterThan(3);
  });

  it('has no cycle between files', () => {
    expect(cyclesOf(files)).toEqual([]);
  });

  it('has no cycle between folders', () => {
    expect(cyclesOf(folderGraph(files))).toEqual([]);
  });

  it('every folder has a layer, and imports only from lower layers', () => {
    const folders = [...new Set([...files.keys()].map(folderOf))];
    expect(
      folders.filter((f) => LAYERS[f] === undefined),
      'a new folder of src/: give it a layer in LAYERS',
    ).toEqual([]);
    const upward = [...files].flatMap(([from, tos]) =>
      [...tos]
        .filter((t) => folderOf(t) !== folderOf(from) && (LAYERS[folderOf(t)] as number) >= (LAYERS[folderOf(from)] as number))
        .map((t) => `${from} → ${t}`),
    );
    expect(upward).toEqual([]);
  });

  it('outside core, the scheduler is imported through its public surface (core/scheduler.ts), never a module of its folder', () => {
    const inner = [...files].flatMap(([from, tos]) =>
      folderOf(from) === 'core' ? [] : [...tos].filter((t) => t.startsWith('core/scheduler/')).map((t) => `${from} → ${t}`),
    );
    expect(inner).toEqual([]);
  });

  it('src/core imports nothing from the other folders', () => {
    const outward = [...files].flatMap(([from, tos]) =>
      folderOf(from) === 'core' ? [...tos].filter((t) => folderOf(t) !== 'core').map((t) => `${from} → ${t}`) : [],
    );
    expect(outward).toEqual([]);
  });
});
