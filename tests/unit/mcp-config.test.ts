/**
 * The pure parts of MCP support: the `mcp:` config section, server tools → manifests (hints, trust,
 * overrides, include, schemas, output caps), the merged-catalog checks, and the model tool lists.
 */
import { describe, expect, it } from 'vitest';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { createAjv } from '../../src/config/catalog.js';
import { ConfigError, parseConfig } from '../../src/config/load.js';
import type { McpServerConfig } from '../../src/config/mcp-schema.js';
import { modelTools, toolSource } from '../../src/api/tool-list.js';
import { checkMerged } from '../../src/mcp/checks.js';
import { globMatch, manifestsOf } from '../../src/mcp/manifests.js';

const parse = (yaml: string, env: Record<string, string> = {}) => parseConfig(yaml, 'test.yaml', { env, baseDir: '/base' });
const problems = (yaml: string, env: Record<string, string> = {}) => {
  try {
    parse(yaml, env);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  return [];
};

describe('the mcp: section', () => {
  it('fills the defaults: prefix <name>__, untrusted, tenant scope', () => {
    const c = parse('mcp: { servers: [ { name: fs, command: node, args: [a.js], cwd: work } ] }');
    expect(c.mcp?.servers).toEqual([
      {
        name: 'fs',
        command: 'node',
        args: ['a.js'],
        cwd: '/base/work',
        prefix: 'fs__',
        trustAnnotations: false,
        scope: 'tenant',
        tools: {},
      },
    ]);
    expect(parse('{}').mcp).toEqual({ servers: [] });
  });

  it('reads env:NAME in headers and env, and never shows a value', () => {
    const c = parse('mcp: { servers: [ { name: r, url: "https://x.test/mcp", headers: { Authorization: "env:KEY" } } ] }', {
      KEY: 'Bearer s3cret',
    });
    expect(c.mcp?.servers[0]?.headers).toEqual({ Authorization: 'Bearer s3cret' });
    const p = problems('mcp: { servers: [ { name: r, url: "https://x.test/mcp", headers: { Authorization: "env:KEY" } } ] }');
    expect(p).toEqual(['mcp.servers[0].headers.Authorization: expected environment variable KEY to be set (env:KEY), got nothing']);
  });

  it.each([
    [
      'both transports',
      '{ name: a, command: node, url: "http://x/mcp" }',
      'mcp.servers[0]: expected either command (stdio) or url (Streamable HTTP), not both or neither',
    ],
    ['no transport', '{ name: a }', 'mcp.servers[0]: expected either command (stdio) or url (Streamable HTTP), not both or neither'],
    [
      'bad name',
      '{ name: "a b", command: node }',
      'mcp.servers[0].name: expected a server name of 1–32 characters [A-Za-z0-9_-], got "a b"',
    ],
    ['bad url', '{ name: a, url: "ftp://x" }', 'mcp.servers[0].url: expected an http:// or https:// URL, got "ftp://x"'],
    [
      'headers on stdio',
      '{ name: a, command: node, headers: { A: b } }',
      'mcp.servers[0].headers: expected headers only with url (Streamable HTTP)',
    ],
    ['override of input', '{ name: a, command: node, tools: { t: { input: {} } } }', 'mcp.servers[0].tools.t.input: unknown key'],
    [
      'override retry, not idempotent',
      '{ name: a, command: node, tools: { t: { idempotent: false, retry: { attempts: 2 } } } }',
      'mcp.servers[0].tools.t.retry: retry needs idempotent: true',
    ],
    [
      'override bad writes',
      '{ name: a, command: node, tools: { t: { writes: ["file:{x"] } } }',
      'mcp.servers[0].tools.t.writes[0]: expected a non-empty resource template like "file:{path}", got "file:{x"',
    ],
    [
      'bad maxOutputBytes',
      '{ name: a, command: node, maxOutputBytes: 0 }',
      'mcp.servers[0].maxOutputBytes: expected an integer ≥ 1, got 0',
    ],
  ])('%s is a config error naming the path', (_name, server, expected) => {
    expect(problems(`mcp: { servers: [ ${server} ] }`).join('\n')).toContain(expected);
  });

  it('two servers with one name is a config error', () => {
    expect(problems('mcp: { servers: [ { name: a, command: x }, { name: a, command: y } ] }')).toEqual([
      'mcp.servers[1].name: expected a name not used by mcp.servers[0], got "a"',
    ]);
  });

  it('with servers, names the config cannot know yet are left to the merged check', () => {
    expect(
      problems(
        'tools: [ { name: t, executor: { kind: builtin, name: echo }, after: [fs__write_file] } ]\nmcp: { servers: [ { name: fs, command: x } ] }',
      ),
    ).toEqual([]);
  });
});

const server = (over: Partial<McpServerConfig> = {}): McpServerConfig => ({
  name: 's',
  args: [],
  prefix: 's__',
  trustAnnotations: true,
  scope: 'tenant',
  tools: {},
  command: 'x',
  ...over,
});
const tool = (
  name: string,
  annotations?: Tool['annotations'],
  inputSchema: Tool['inputSchema'] = { type: 'object', properties: {} },
): Tool => ({ name, inputSchema, ...(annotations ? { annotations } : {}) });
const limits = { maxCallsPerRun: 1000, maxOutputBytes: 5000, tenant: {}, tool: {}, resource: {}, rate: { tenant: {} } };
const ctx = { index: 0, defaults: { timeoutMs: 1234, failure: 'partial' as const, openRunTimeoutMs: 1 }, limits, ajv: createAjv() };

describe('server tools as manifests', () => {
  it('trusted hints become defaults; untrusted tools are opaque', () => {
    const tools = [tool('r', { readOnlyHint: true, idempotentHint: true }), tool('w', { destructiveHint: true }), tool('plain')];
    const trusted = manifestsOf(server(), tools, ctx).manifests;
    expect(trusted.map((m) => [m.name, m.reads, m.writes, m.risk, m.idempotent])).toEqual([
      ['s__r', ['mcp:s'], [], 'read', true],
      ['s__w', [], ['mcp:s'], 'write', false],
      ['s__plain', [], ['mcp:s'], 'write', false],
    ]);
    const opaque = manifestsOf(server({ trustAnnotations: false }), tools, ctx).manifests;
    expect(opaque.map((m) => [m.reads, m.writes, m.risk, m.idempotent])).toEqual([
      [[], ['*'], 'write', false],
      [[], ['*'], 'write', false],
      [[], ['*'], 'write', false],
    ]);
    expect(trusted[0]).toMatchObject({ timeoutMs: 1234, scope: 'tenant' });
    expect(trusted[0]?.executor).toEqual({ kind: 'mcp', server: 's', tool: 'r' });
    // No cap of its own: the engine holds the output to limits.maxOutputBytes.
    expect(trusted[0]?.maxOutputBytes).toBeUndefined();
  });

  it('an override wins; declaring reads or writes declares the effects', () => {
    const s = server({
      trustAnnotations: false,
      maxOutputBytes: 300,
      tools: { a: { reads: ['file:{path}'], idempotent: true, risk: 'read', maxOutputBytes: 10 }, b: { scope: 'global' } },
    });
    const [a, b] = manifestsOf(s, [tool('a'), tool('b')], ctx).manifests;
    expect(a).toMatchObject({ reads: ['file:{path}'], writes: [], risk: 'read', idempotent: true, maxOutputBytes: 10 });
    expect(b).toMatchObject({ writes: ['*'], scope: 'global', maxOutputBytes: 300 });
    expect([a?.executor, b?.executor]).toEqual([
      { kind: 'mcp', server: 's', tool: 'a' },
      { kind: 'mcp', server: 's', tool: 'b' },
    ]);
  });

  it('include globs, unusable names and schemas that do not compile', () => {
    const s = server({ include: ['read_*', 'write_file', 'bad*', 'we?rd'] });
    const out = manifestsOf(
      s,
      [
        tool('read_a'),
        tool('read_b'),
        tool('write_file'),
        tool('delete'),
        tool('bad', undefined, { type: 'object', properties: { x: { type: 'nope' } } } as Tool['inputSchema']),
        tool('we/rd'),
      ],
      ctx,
    );
    expect(out.manifests.map((m) => m.name)).toEqual(['s__read_a', 's__read_b', 's__write_file']);
    expect(out.warnings).toEqual([
      expect.stringMatching(/^mcp server "s": tool "bad" skipped: its input schema does not compile: /),
      'mcp server "s": tool "we/rd" skipped: its catalog name "s__we/rd" is not 1–64 characters [A-Za-z0-9_.-]',
    ]);
    expect(globMatch('read_*', 'read_x.y')).toBe(true);
    expect(globMatch('a.b', 'axb')).toBe(false);
  });

  it('an override of a tool the server does not list, and retry on a tool that is not idempotent, are problems', () => {
    const out = manifestsOf(
      server({ trustAnnotations: false, tools: { ghost: {}, t: { retry: { attempts: 2, backoffMs: 1, maxBackoffMs: 1 } } } }),
      [tool('t')],
      ctx,
    );
    expect(out.problems).toEqual([
      'mcp.servers[0].tools.ghost: expected the name of a tool the server lists, got "ghost" (it lists t)',
      'mcp.servers[0].tools.t.retry: retry needs idempotent: true (set idempotent: true, or trust a server that marks the tool idempotentHint)',
    ]);
  });

  it('the merged check finds clashes and unknown names', () => {
    const cfg = parse(
      'tools: [ { name: s__a, executor: { kind: builtin, name: echo } } ]\npolicy: { rules: [ { match: {}, after: [s__b, s__nope] } ] }\nmcp: { servers: [ { name: s, command: x } ] }',
    );
    const mine = manifestsOf(server(), [tool('a'), tool('b')], ctx).manifests;
    expect(checkMerged(cfg, [{ server: 's', index: 0, manifests: mine }])).toEqual([
      'mcp.servers[0]: the tool "a" becomes "s__a", a name already used by tools[0]; expected names that do not clash (set a prefix)',
      'policy.rules[0].after[1]: expected the name of a tool of the catalog, or a glob, got "s__nope"',
    ]);
  });
});

describe('tool lists for the model', () => {
  const m = (name: string, input?: Record<string, unknown>) => ({
    name,
    description: `does ${name}`,
    ...(input ? { input } : {}),
    scope: 'tenant' as const,
    risk: 'read' as const,
    idempotent: true,
    timeoutMs: 1,
    after: [],
    requires: [],
    executor: { kind: 'builtin' as const, name: 'echo' as const },
  });
  const schema = { type: 'object', properties: { p: { type: 'string' } } };

  it('OpenAI function tools and Anthropic tools; names the vendor refuses are exported renamed', () => {
    const tools = [m('read_file', schema), m('OpenWeatherMap.get'), m('bare')];
    expect(modelTools(tools, 'openai')).toEqual({
      tools: [
        { type: 'function', function: { name: 'read_file', description: 'does read_file', parameters: schema } },
        {
          type: 'function',
          function: { name: 'OpenWeatherMap_get', description: 'does OpenWeatherMap.get', parameters: { type: 'object', properties: {} } },
        },
        { type: 'function', function: { name: 'bare', description: 'does bare', parameters: { type: 'object', properties: {} } } },
      ],
      skipped: [],
      renamed: [{ name: 'OpenWeatherMap.get', exported: 'OpenWeatherMap_get' }],
    });
    expect(modelTools(tools, 'anthropic').tools[0]).toEqual({ name: 'read_file', description: 'does read_file', input_schema: schema });
  });

  it('source: mcp:<server>, builtin for the demo catalog, config otherwise', () => {
    expect(toolSource({ ...m('x'), executor: { kind: 'mcp', server: 'fs', tool: 'x' } }, 'a.yaml')).toBe('mcp:fs');
    expect(toolSource(m('x'), 'builtin:demo')).toBe('builtin');
    expect(toolSource(m('x'), 'a.yaml')).toBe('config');
  });
});
