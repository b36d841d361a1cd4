/**
 * One PostgreSQL layer (DESIGN §12, Principles): every SQL statement lives under src/store/. No module
 * of src/ outside src/store/ imports the driver (`pg`, type-only imports too) or calls `.query(`,
 * except the benchmark tooling listed below, each with its reason. The scan reads every module of src/
 * with its comments left out.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../../src');
const MODULE = /\.(ts|mts|js|mjs|cjs)$/;

/**
 * Browser modules (the dashboard's pages): they cannot reach a database, and `this.query(` there builds
 * a URL's query string. Their imports are still checked.
 */
const BROWSER = 'dashboard/static/';

/** Tooling that talks to a PostgreSQL of its own, outside the product's path, and why. */
const ALLOWED: Record<string, string> = {
  'bench/postgres-cluster.ts': 'starts a throwaway PostgreSQL server for tests and benchmarks (CREATE DATABASE as its superuser)',
  'bench/chaos-check.ts': "the chaos script's checker reads the raw tables itself, so that it does not trust the store it checks",
  'bench/chaos.ts': 'the chaos script counts unfinished runs in the raw tables, independently of the replicas under test',
  'bench/replica-bench.ts': "reads PostgreSQL's own statistics (pg_stat_database) and opens a pool for a permit probe",
};

function modulesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return modulesUnder(path);
    return MODULE.test(name) && !/\.d\.m?ts$/.test(name) ? [path] : [];
  });
}

/** What in a module's text touches the database directly: imports of `pg`, and `.query(` calls. */
function touchesOf(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const found: string[] = [];
  const imports = [
    /\b(?:import|export)\s+(?:type\s+)?[\w*{}\s,$]*?\bfrom\s*['"](pg(?:\/[^'"]*)?)['"]/g,
    /\bimport\s*['"](pg(?:\/[^'"]*)?)['"]/g,
    /\bimport\s*\(\s*['"](pg(?:\/[^'"]*)?)['"]\s*\)/g,
    /\brequire\s*\(\s*['"](pg(?:\/[^'"]*)?)['"]\s*\)/g,
  ];
  for (const re of imports) for (const m of code.matchAll(re)) found.push(`imports ${m[1]}`);
  // `x.query(`, `x?.query(`, `(await y).query(`, but not a spread `...query(`.
  for (const m of code.matchAll(/(?<!\.\.)(?:\?\.|\.)\s*query\s*(?:<[^()]*?>)?\s*\(/g)) found.push(`calls ${m[0].replace(/\s+/g, '')}`);
  return found;
}

describe('every SQL statement lives under src/store/', () => {
  it('the scanner finds what it looks for (and no spread of a helper named query)', () => {
    expect(touchesOf(`import pg from 'pg';\nimport type { Pool } from "pg";\nconst p = await import('pg');`)).toEqual([
      'imports pg',
      'imports pg',
      'imports pg',
    ]);
    expect(touchesOf('await this.pool.query<{ n: number }>("SELECT 1"); c?.query(`x`); (await a).query (s)')).toHaveLength(3);
    expect(touchesOf('const x = [...query(Schema)]; req.query ?? {};\n  // pool.query(\n/* c.query( */')).toEqual([]);
  });

  it('no module of src/ outside src/store/ imports pg or calls .query(, but the listed tooling', () => {
    const offenders: string[] = [];
    const used = new Set<string>();
    for (const file of modulesUnder(SRC)) {
      const rel = relative(SRC, file).split(sep).join('/');
      if (rel.startsWith('store/')) continue;
      const touches = touchesOf(readFileSync(file, 'utf8')).filter((t) => !(rel.startsWith(BROWSER) && t.startsWith('calls')));
      if (touches.length === 0) continue;
      if (ALLOWED[rel]) {
        used.add(rel);
        continue;
      }
      offenders.push(`src/${rel}: ${[...new Set(touches)].join(', ')}`);
    }
    expect(offenders).toEqual([]);
    // An entry that no longer touches the database comes off the list.
    expect([...used].sort()).toEqual(Object.keys(ALLOWED).sort());
  });
});
