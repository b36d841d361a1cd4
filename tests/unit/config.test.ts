/**
 * The config loader (src/config): defaults and shapes of valid configs, one message per kind of error
 * (path, expectation, found value), env keys, worker module paths, the demo config and checkArgs.
 */
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createCatalog } from '../../src/config/catalog.js';
import { ConfigError, DEMO_SOURCE, formatPath, loadConfig, parseConfig } from '../../src/config/load.js';
import { parseRate } from '../../src/config/schema.js';
import type { ToolManifest } from '../../src/core/tool.js';

const parse = (text: string, env: Record<string, string> = {}) => parseConfig(text, 'test.yaml', { env, baseDir: '/cfg' });

/** The problems of an invalid config (fails the test when the config is valid). */
function problems(text: string, env: Record<string, string> = {}): string[] {
  try {
    parse(text, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message.startsWith('test.yaml: ')).toBe(true);
    return [...(err as ConfigError).problems];
  }
  throw new Error('expected a ConfigError');
}

const echoTool = (extra = '') => `tools:\n  - name: t\n    executor: { kind: builtin, name: echo }\n${extra}`;

describe('valid configs', () => {
  it('fills every default from an empty mapping', () => {
    const c = parse('{}');
    expect(c.tools).toEqual([]);
    expect(c.policy).toEqual({ rules: [] });
    expect(c.limits).toEqual({
      maxCallsPerRun: 1000,
      maxArgsBytes: 1024 * 1024,
      maxOutputBytes: 4 * 1024 * 1024,
      hooksInFlight: 64,
      tenant: {},
      tool: {},
      resource: {},
      rate: { tenant: {} },
    });
    expect(c.defaults).toEqual({ timeoutMs: 60000, failure: 'partial', openRunTimeoutMs: 30000 });
    expect(c.auth).toEqual({ keys: [] });
    expect(c.server).toEqual({ host: '127.0.0.1', port: 8080, db: './data/toolgraph.db' });
    expect(c.store).toEqual({ poolSize: 10, leaseMs: 10000, takeoverConcurrency: 32, permitSlices: true });
    expect(parse('store: { permitSlices: false }').store.permitSlices).toBe(false);
    expect(c.source).toBe('test.yaml');
  });

  it("fills a tool's defaults and keeps undeclared reads/writes absent", () => {
    const [t] = parse(echoTool()).tools;
    expect(t).toEqual({
      name: 't',
      scope: 'tenant',
      risk: 'write',
      idempotent: false,
      timeoutMs: 60000,
      after: [],
      requires: [],
      executor: { kind: 'builtin', name: 'echo' },
    });
    expect(t!.reads).toBeUndefined();
    expect('writes' in t!).toBe(false);
  });

  const cases: Array<{ name: string; yaml: string; check: (tool: ToolManifest, c: ReturnType<typeof parse>) => void }> = [
    {
      name: 'explicit empty reads/writes stay arrays',
      yaml: echoTool('    reads: []\n    writes: ["file:{path}"]\n'),
      check: (t) => {
        expect(t.reads).toEqual([]);
        expect(t.writes).toEqual(['file:{path}']);
      },
    },
    {
      name: 'timeoutMs defaults to defaults.timeoutMs',
      yaml: `${echoTool()}defaults: { timeoutMs: 1234 }\n`,
      check: (t) => expect(t.timeoutMs).toBe(1234),
    },
    {
      name: 'a tool timeoutMs wins',
      yaml: `${echoTool('    timeoutMs: 5\n')}defaults: { timeoutMs: 1234 }\n`,
      check: (t) => expect(t.timeoutMs).toBe(5),
    },
    {
      name: 'retry backoff defaults',
      yaml: echoTool('    idempotent: true\n    retry: { attempts: 3 }\n'),
      check: (t) => expect(t.retry).toEqual({ attempts: 3, backoffMs: 200, maxBackoffMs: 5000 }),
    },
    { name: 'rate string is parsed', yaml: echoTool('    rate: 5/s\n'), check: (t) => expect(t.rate).toEqual({ tokens: 5, perMs: 1000 }) },
    {
      name: 'concurrency folds into limits.tool',
      yaml: echoTool('    concurrency: 3\n'),
      check: (t, c) => {
        expect(t.concurrency).toBe(3);
        expect(c.limits.tool).toEqual({ t: 3 });
      },
    },
    {
      name: 'limits.tool wins over concurrency',
      yaml: `${echoTool('    concurrency: 3\n')}limits: { tool: { t: 1 } }\n`,
      check: (_t, c) => expect(c.limits.tool).toEqual({ t: 1 }),
    },
    {
      name: 'builtin name defaults to the tool name',
      yaml: 'tools:\n  - name: sleep\n    executor: { kind: builtin }\n',
      check: (t) => expect(t.executor).toEqual({ kind: 'builtin', name: 'sleep' }),
    },
    {
      name: 'http executor with headers',
      yaml: 'tools:\n  - name: h\n    executor: { kind: http, url: "https://x.test/a", headers: { X-A: b } }\n',
      check: (t) => expect(t.executor).toEqual({ kind: 'http', url: 'https://x.test/a', headers: { 'X-A': 'b' } }),
    },
    {
      name: 'globs and known names in after/requires, compensate',
      yaml: `tools:
  - name: a
    executor: { kind: builtin, name: echo }
    after: ["b*", b]
    requires: [b]
    compensate: { tool: b, args: { x: "\${self.args.x}" } }
  - name: b
    executor: { kind: builtin, name: echo }
`,
      check: (t) => {
        expect(t.after).toEqual(['b*', 'b']);
        expect(t.compensate).toEqual({ tool: 'b', args: { x: '${self.args.x}' } });
      },
    },
  ];
  it.each(cases)('$name', ({ yaml, check }) => {
    const c = parse(yaml);
    check(c.tools[0]!, c);
  });

  it('accepts JSON and parses policy, limits and server', () => {
    const c = parse(
      JSON.stringify({
        tools: [{ name: 'rm_x', risk: 'dangerous', executor: { kind: 'builtin', name: 'fail' } }],
        policy: {
          rules: [
            { match: { tool: 'rm_*', tenant: 'trial' }, deny: 'no' },
            { match: { risk: 'dangerous' }, review: false, allow: true },
          ],
        },
        limits: { global: 4, perRun: 2, maxActiveRunsPerTenant: 3, resource: { 'service:*': 1 }, rate: { tenant: { acme: '10/min' } } },
        server: { host: '0.0.0.0', port: 0, db: ':memory:' },
      }),
    );
    expect(c.policy.rules).toEqual([
      { match: { tool: 'rm_*', tenant: 'trial' }, deny: 'no' },
      { match: { risk: 'dangerous' }, review: false, allow: true },
    ]);
    expect(c.limits).toMatchObject({
      global: 4,
      perRun: 2,
      maxActiveRunsPerTenant: 3,
      resource: { 'service:*': 1 },
      rate: { tenant: { acme: { tokens: 10, perMs: 60000 } } },
    });
    expect(c.server).toEqual({ host: '0.0.0.0', port: 0, db: ':memory:' });
  });

  it('deep-freezes the result', () => {
    const c = parse(`${echoTool('    input: { type: object, properties: { a: { type: string } } }\n')}limits: { tenant: { a: 1 } }\n`);
    for (const o of [c, c.tools, c.tools[0], c.tools[0]!.executor, c.tools[0]!.input, c.limits.tenant, c.server, c.catalog]) {
      expect(Object.isFrozen(o)).toBe(true);
    }
    expect(() => {
      (c.limits.tenant as Record<string, number>).b = 2;
    }).toThrow(TypeError);
    expect(c.catalog.get('t')).toBe(c.tools[0]);
  });
});

describe('parseRate', () => {
  it.each([
    ['5/s', { tokens: 5, perMs: 1000 }],
    ['30/min', { tokens: 30, perMs: 60000 }],
    ['100/h', { tokens: 100, perMs: 3600000 }],
    ['0/s', undefined],
    ['5/sec', undefined],
    ['x/s', undefined],
    ['5', undefined],
  ])('%s', (text, rate) => expect(parseRate(text)).toEqual(rate));
});

describe('errors name the path, the expectation and what was found', () => {
  const cases: Array<[string, string, string]> = [
    ['limits.global 0', 'limits: { global: 0 }', 'limits.global: expected an integer ≥ 1, got 0'],
    ['a fraction', 'limits: { perRun: 1.5 }', 'limits.perRun: expected an integer ≥ 1, got 1.5'],
    ['a string for an int', 'limits: { maxCallsPerRun: "ten" }', 'limits.maxCallsPerRun: expected an integer ≥ 1, got "ten"'],
    ['a list for a mapping', 'limits: { tenant: [] }', 'limits.tenant: expected a mapping, got a list []'],
    ['a map value', 'limits: { resource: { "file:/a": 0 } }', 'limits.resource["file:/a"]: expected an integer ≥ 1, got 0'],
    [
      'unknown top-level key',
      'toolz: []',
      'toolz: unknown key, expected one of tools, policy, limits, defaults, auth, server, mcp, store, hooks',
    ],
    ['unknown nested key', 'server: { hots: x }', 'server.hots: unknown key, expected one of host, port, db'],
    ['port range', 'server: { port: 70000 }', 'server.port: expected an integer from 0 to 65535, got 70000'],
    [
      'store url scheme',
      'store: { url: "mysql://u:secret@h/db" }',
      'store.url: expected a postgres:// or postgresql:// URL or a SQLite file, got a mysql:// URL',
    ],
    [
      'store url syntax',
      'store: { url: "postgres://u:secret@[bad/db" }',
      'store.url: expected a URL like postgres://USER@HOST:PORT/DB, got one that does not parse',
    ],
    ['store pool size', 'store: { poolSize: 0 }', 'store.poolSize: expected an integer from 1 to 1000, got 0'],
    ['failure mode', 'defaults: { failure: maybe }', 'defaults.failure: expected one of fail_fast, partial, replan, got "maybe"'],
    ['top level list', '- 1', 'config: expected a mapping, got a list [1]'],
    ['retry without idempotent', echoTool('    retry: { attempts: 2 }\n'), 'tools[0].retry: retry needs idempotent: true'],
    [
      'retry attempts 0',
      echoTool('    idempotent: true\n    retry: { attempts: 0 }\n'),
      'tools[0].retry.attempts: expected an integer ≥ 1, got 0',
    ],
    [
      'maxBackoff < backoff',
      echoTool('    idempotent: true\n    retry: { attempts: 2, backoffMs: 300, maxBackoffMs: 100 }\n'),
      'tools[0].retry.maxBackoffMs: expected an integer ≥ backoffMs (300), got 100',
    ],
    [
      'bad tool name',
      'tools:\n  - name: "a b"\n    executor: { kind: http, url: "http://x" }\n',
      'tools[0].name: expected a tool name of 1–64 characters [A-Za-z0-9_.-], got "a b"',
    ],
    ['missing name', 'tools:\n  - executor: { kind: http, url: "http://x" }\n', 'tools[0].name: expected a tool name, got nothing'],
    ['missing executor', 'tools:\n  - name: t\n', 'tools[0].executor: expected a mapping, got nothing'],
    [
      'duplicate names',
      `${echoTool()}  - name: t\n    executor: { kind: builtin, name: echo }\n`,
      'tools[1].name: expected a name not used by tools[0], got "t"',
    ],
    ['bad rate', echoTool('    rate: 5/sec\n'), 'tools[0].rate: expected a rate like 5/s, 30/min or 100/h, got "5/sec"'],
    ['bad scope', echoTool('    scope: world\n'), 'tools[0].scope: expected one of run, tenant, global, got "world"'],
    ['failure other than fail_fast', echoTool('    failure: partial\n'), 'tools[0].failure: expected one of fail_fast, got "partial"'],
    ['concurrency 0', echoTool('    concurrency: 0\n'), 'tools[0].concurrency: expected an integer ≥ 1, got 0'],
    [
      'bad resource template',
      echoTool('    writes: ["file:{path"]\n'),
      'tools[0].writes[0]: expected a non-empty resource template like "file:{path}", got "file:{path"',
    ],
    [
      'unknown after name',
      echoTool('    after: [nope]\n'),
      'tools[0].after[0]: expected the name of a tool of the catalog, or a glob, got "nope"',
    ],
    [
      'unknown compensate tool',
      echoTool('    compensate: { tool: undo }\n'),
      'tools[0].compensate.tool: expected the name of a tool of the catalog, got "undo"',
    ],
    [
      'unknown policy requires',
      'policy: { rules: [ { match: {}, requires: [x] } ] }',
      'policy.rules[0].requires[0]: expected the name of a tool of the catalog, or a glob, got "x"',
    ],
    [
      'policy risk',
      'policy: { rules: [ { match: { risk: high } } ] }',
      'policy.rules[0].match.risk: expected one of read, write, dangerous, got "high"',
    ],
    [
      'limits.tool unknown tool',
      'limits: { tool: { ghost: 1 } }',
      'limits.tool.ghost: expected the name of a tool of the catalog as the key, got "ghost"',
    ],
    [
      'rate.tenant',
      'limits: { rate: { tenant: { a: fast } } }',
      'limits.rate.tenant.a: expected a rate like 5/s, 30/min or 100/h, got "fast"',
    ],
    [
      'executor kind',
      'tools:\n  - name: t\n    executor: { kind: shell }\n',
      'tools[0].executor.kind: expected one of builtin, http, worker, client, got "shell"',
    ],
    [
      'builtin name',
      'tools:\n  - name: t\n    executor: { kind: builtin, name: cat }\n',
      'tools[0].executor.name: expected one of sleep, echo, fail, got "cat"',
    ],
    [
      'builtin name default',
      'tools:\n  - name: t\n    executor: { kind: builtin }\n',
      'tools[0].executor.name: expected one of sleep, echo, fail (the tool\'s name "t" is not a builtin), got nothing',
    ],
    [
      'http url',
      'tools:\n  - name: t\n    executor: { kind: http, url: "ftp://x" }\n',
      'tools[0].executor.url: expected an http:// or https:// URL, got "ftp://x"',
    ],
    [
      'worker extra key',
      'tools:\n  - name: t\n    executor: { kind: worker, module: ./a.js, url: x }\n',
      'tools[0].executor.url: unknown key, expected one of kind, module',
    ],
    [
      'auth role',
      'auth: { keys: [ { key: k1, tenant: t, role: admin } ] }',
      'auth.keys[0].role: expected one of agent, operator, got "admin"',
    ],
  ];
  it.each(cases)('%s', (_name, yaml, line) => {
    expect(problems(yaml)).toContain(line);
  });

  it('names a tool input schema that does not compile', () => {
    // The keyword and value at fault, not the meta-schema validator's list of everything it tried.
    expect(problems(echoTool('    input: { type: strin }\n'))).toEqual([
      'tools[0].input.type: "strin" is not a JSON Schema type (expected one of string, number, integer, boolean, object, array, null)',
    ]);
    expect(problems(echoTool('    input: { type: object, properties: { a: { type: [string, dict] } } }\n'))).toEqual([
      'tools[0].input.properties.a.type[1]: "dict" is not a JSON Schema type (expected one of string, number, integer, boolean, object, array, null)',
    ]);
    expect(problems(echoTool('    input: { type: object, required: name }\n'))).toEqual([
      'tools[0].input.required: "name" is not valid for required: expected an array',
    ]);
    expect(problems(echoTool('    input: [1]\n'))).toContain('tools[0].input: expected a JSON Schema (a mapping), got a list [1]');
  });

  it('lists every problem at once, never a raw zod dump', () => {
    const text = `tools:
  - name: t
    executor: { kind: builtin, name: echo }
    retry: { attempts: 2 }
  - name: u
    executor: { kind: nope }
limits: { global: 0 }
`;
    const list = problems(text);
    expect(list).toEqual(
      expect.arrayContaining([
        'tools[0].retry: retry needs idempotent: true',
        'tools[1].executor.kind: expected one of builtin, http, worker, client, got "nope"',
        'limits.global: expected an integer ≥ 1, got 0',
      ]),
    );
    try {
      parse(text);
    } catch (err) {
      const msg = (err as Error).message;
      expect(msg).toMatch(/^test\.yaml: 3 problems in the configuration:\n {2}- /);
      expect(msg).not.toMatch(/invalid_type|"code"|Invalid input/);
    }
  });
});

describe('auth keys', () => {
  it('reads env:NAME keys and keeps literal ones', () => {
    const c = parse('auth: { keys: [ { key: env:TG_KEY, tenant: acme, role: agent }, { key: lit-1, tenant: ops, role: operator } ] }', {
      TG_KEY: 's3cret-value',
    });
    expect(c.auth.keys).toEqual([
      { key: 's3cret-value', tenant: 'acme', role: 'agent' },
      { key: 'lit-1', tenant: 'ops', role: 'operator' },
    ]);
  });

  it('a missing variable names the path and the variable', () => {
    expect(problems('auth: { keys: [ { key: env:TG_MISSING, tenant: a, role: agent } ] }')).toEqual([
      'auth.keys[0].key: expected environment variable TG_MISSING to be set (key: env:TG_MISSING), got nothing',
    ]);
  });

  it('never prints a key value', () => {
    const yaml =
      'auth: { keys: [ { key: env:A, tenant: a, role: agent }, { key: env:B, tenant: b, role: agent }, { key: 12345, tenant: c, role: agent } ] }';
    let message = '';
    try {
      parse(yaml, { A: 'topsecret', B: 'topsecret' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('auth.keys[1].key: expected a key not already given to auth.keys[0], got the same key');
    expect(message).toContain('auth.keys[2].key: expected a string, got a number');
    expect(message).not.toMatch(/topsecret|12345/);
  });
});

describe('loadConfig', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-config-'));
  const file = (name: string, text: string) => {
    const p = path.join(dir, name);
    writeFileSync(p, text);
    return p;
  };

  it('resolves worker modules against the config file directory', () => {
    mkdirSync(path.join(dir, 'sub'), { recursive: true });
    const p = file(
      'sub/worker.yaml',
      'tools:\n  - name: w\n    executor: { kind: worker, module: ./tools/hash.js }\n  - name: v\n    executor: { kind: worker, module: /abs/v.js }\n',
    );
    const c = loadConfig(p, {});
    expect(c.source).toBe(p);
    expect(c.tools.map((t) => t.executor)).toEqual([
      { kind: 'worker', module: path.join(dir, 'sub', 'tools', 'hash.js') },
      { kind: 'worker', module: path.resolve('/abs/v.js') },
    ]);
  });

  it('parseConfig resolves against baseDir', () => {
    const c = parse('tools:\n  - name: w\n    executor: { kind: worker, module: lib/w.js }\n');
    expect(c.tools[0]!.executor).toEqual({ kind: 'worker', module: path.resolve('/cfg', 'lib/w.js') });
  });

  const failures: Array<[string, () => string, RegExp]> = [
    ['a missing file', () => path.join(dir, 'nope.yaml'), /nope\.yaml: cannot read the config file: no such file$/],
    ['a directory', () => dir, /cannot read the config file: it is a directory$/],
    ['an empty file', () => file('empty.yaml', '  \n'), /empty\.yaml: the file is empty/],
    ['only comments', () => file('comments.yaml', '# nothing\n'), /comments\.yaml: the file has no content/],
    [
      'a YAML syntax error',
      () => file('syntax.yaml', 'limits:\n  global: [1,\nserver: {}\n'),
      /syntax\.yaml: YAML syntax error at line 3, column 1: /,
    ],
    [
      'a duplicate key',
      () => file('dup.yaml', 'server: {}\nserver: {}\n'),
      /dup\.yaml: YAML syntax error at line 2, column 1: Map keys must be unique/,
    ],
  ];
  it.each(failures)('%s is a ConfigError', (_name, make, re) => {
    const p = make();
    expect(() => loadConfig(p, {})).toThrow(ConfigError);
    expect(() => loadConfig(p, {})).toThrow(re);
  });
});

describe('the demo config', () => {
  const demo = loadConfig(undefined, {});

  it('validates, is frozen and uses builtin executors', () => {
    expect(demo.source).toBe(DEMO_SOURCE);
    expect(Object.isFrozen(demo) && Object.isFrozen(demo.tools) && Object.isFrozen(demo.policy.rules[0]!.match)).toBe(true);
    expect(demo.tools.map((t) => t.name)).toEqual(['sleep', 'echo', 'fail', 'read_file', 'write_file', 'run_tests', 'deploy']);
    for (const t of demo.tools) expect(t.executor.kind).toBe('builtin');
    expect(demo.limits).toMatchObject({ global: 16, perRun: 8 });
    expect(demo.limits.tool).toEqual({ deploy: 1, run_tests: 2 });
  });

  it('declares resources, a dangerous deploy after run_tests and retries', () => {
    const get = (n: string) => demo.catalog.get(n)!;
    expect(get('read_file')).toMatchObject({ reads: ['file:{path}'], risk: 'read', executor: { name: 'echo' } });
    expect(get('write_file').writes).toEqual(['file:{path}']);
    expect(get('deploy')).toMatchObject({
      writes: ['service:{name}'],
      risk: 'dangerous',
      after: ['run_tests'],
      executor: { name: 'echo' },
    });
    expect(get('fail')).toMatchObject({ idempotent: true, retry: { attempts: 3 } });
    expect(get('sleep')).toMatchObject({ reads: [], writes: [], idempotent: true, executor: { name: 'sleep' } });
  });
});

describe('checkArgs', () => {
  const catalog = parse(`tools:
  - name: deploy
    input:
      type: object
      properties: { image: { type: string }, name: { type: string }, mode: { enum: [a, b] } }
      required: [name]
      additionalProperties: false
    executor: { kind: builtin, name: echo }
  - name: free
    executor: { kind: builtin, name: echo }
`).catalog;
  it.each<[string, unknown, string | null]>([
    ['deploy', { name: 'web' }, null],
    ['deploy', { image: 1 }, "must have required property 'name'; /image must be string"],
    ['deploy', { name: 'x', extra: 1 }, 'must NOT have additional properties ("extra")'],
    ['deploy', { name: 'x', mode: 'c' }, '/mode must be equal to one of the allowed values ("a", "b")'],
    ['free', { anything: [1] }, null],
    ['ghost', {}, 'unknown tool "ghost"'],
  ])('%s %j', (name, args, expected) => expect(catalog.checkArgs(name, args)).toBe(expected));

  it('createCatalog works on hand-made manifests and lists them', () => {
    const m: ToolManifest = {
      name: 'x',
      scope: 'run',
      risk: 'read',
      idempotent: true,
      timeoutMs: 1,
      after: [],
      requires: [],
      input: { type: 'object', required: ['a'] },
      executor: { kind: 'builtin', name: 'echo' },
    };
    const c = createCatalog([m]);
    expect(c.list()).toEqual([m]);
    expect(c.checkArgs('x', {})).toBe("must have required property 'a'");
    expect(() => createCatalog([{ ...m, input: { type: 'nope' } }])).toThrow(/tool "x": its input schema does not compile/);
  });
});

describe('formatPath', () => {
  it.each<[PropertyKey[], string]>([
    [[], 'config'],
    [['tools', 2, 'retry'], 'tools[2].retry'],
    [['limits', 'tool', 'a.b'], 'limits.tool["a.b"]'],
  ])('%j → %s', (keys, out) => expect(formatPath(keys)).toBe(out));
});

describe('flow control (DESIGN §4)', () => {
  it('takes a keyed concurrency, limits.each, weights, priority aging, queue timeouts and maxPriority', () => {
    const c = parse(
      `tools:
  - name: push
    concurrency: { limit: 2, per: "{owner}/{repo}" }
    queueTimeoutMs: 500
    executor: { kind: builtin, name: echo }
  - name: plain
    concurrency: 3
    executor: { kind: builtin, name: echo }
limits: { each: { "repo:*": 2 }, weights: { acme: 3 }, priorityAgingMs: 5000 }
defaults: { queueTimeoutMs: 60000 }
auth: { keys: [ { key: k1, tenant: acme, role: agent, maxPriority: 2 } ] }
`,
    );
    expect(c.tools[0]?.keyedConcurrency).toEqual({ limit: 2, per: '{owner}/{repo}' });
    expect(c.tools[0]?.concurrency).toBeUndefined();
    expect(c.tools[0]?.queueTimeoutMs).toBe(500);
    expect(c.tools[1]?.concurrency).toBe(3);
    expect(c.limits.tool).toEqual({ plain: 3 });
    expect(c.limits.each).toEqual({ 'repo:*': 2 });
    expect(c.limits.weights).toEqual({ acme: 3 });
    expect(c.limits.priorityAgingMs).toBe(5000);
    expect(c.defaults.queueTimeoutMs).toBe(60000);
    expect(c.auth.keys[0]?.maxPriority).toBe(2);
  });

  it('names the path of what is wrong', () => {
    const closed = `    input: { type: object, additionalProperties: false, properties: { owner: { type: string } } }\n`;
    expect(problems(echoTool(`${closed}    concurrency: { limit: 2, per: "{owner}/{repo}" }\n`))).toEqual([
      "tools[0].concurrency.per: unknown arg {repo}: the tool's input takes owner",
    ]);
    // An open schema may get any arg: nothing is certain.
    expect(() => parse(echoTool(`    input: { type: object }\n    concurrency: { limit: 2, per: "{repo}" }\n`))).not.toThrow();
    expect(problems(echoTool('    concurrency: { limit: 0, per: "" }\n'))).toEqual([
      'tools[0].concurrency.limit: expected an integer ≥ 1, got 0',
      'tools[0].concurrency.per: expected a non-empty template like "{owner}/{repo}", got ""',
    ]);
    expect(problems(echoTool('    concurrency: two\n'))).toEqual([
      'tools[0].concurrency: expected an integer ≥ 1, or { limit, per } (a keyed limit), got "two"',
    ]);
    expect(problems('limits: { each: { "repo": 2, "repo:a*": 1, "*:x": 1, "repo:*": 0 } }')).toEqual([
      'limits.each["repo:*"]: expected an integer ≥ 1, got 0',
      'limits.each.repo: "repo" is not a key pattern like "repo:*": it needs a namespace or a segment before the *',
      'limits.each["repo:a*"]: "repo:a*" is not a key pattern like "repo:*": a * stands for a whole segment',
      'limits.each["*:x"]: "*:x" is not a key pattern like "repo:*": its first segment cannot be *',
    ]);
    expect(problems('auth: { keys: [ { key: k1, tenant: t, role: agent, maxPriority: 0 } ] }')).toEqual([
      'auth.keys[0].maxPriority: expected an integer from 1 to 5, got 0',
    ]);
  });
});
