/**
 * Writes docs/configuration.md, the configuration reference, from the zod schema of the config file
 * (`npm run docs:config`). Each key's type, whether it is required, its default and its allowed values
 * come from the schema (`z.toJSONSchema`, input side); its description comes from the schema's
 * `.describe()` when it has one, else from NOTES below; its example from NOTES, else from the schema.
 * A unit test fails when the file is not what this script writes, so the page cannot drift: after
 * changing the schema, run `npm run docs:config`.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { stringify } from 'yaml';
import { z } from 'zod';
import { configFileSchema } from '../src/config/schema.js';

export const CONFIG_DOC = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));

type JsonSchema = {
  type?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  additionalProperties?: JsonSchema | boolean;
  oneOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  description?: string;
};

/** What the schema cannot say: a sentence per key and an example value (a key's path as in the table). */
const NOTES: Record<string, { d: string; e?: unknown }> = {
  tools: { d: 'The catalog: the tools a batch may call. Without a config file the demo catalog of builtin tools is used.' },
  'tools[].name': { d: 'The name calls use (`"tool": "…"`); unique in the catalog.', e: 'deploy_image' },
  'tools[].description': { d: 'Shown in `GET /v1/tools` and to the model.', e: 'Deploys an image as a service' },
  'tools[].input': {
    d: "A JSON Schema for the call's `args`; a call whose args do not match fails with `invalid_args` before it runs.",
    e: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  },
  'tools[].reads': {
    d: 'Resource templates the call reads, filled from its args (`{path}`, `{a.b[0]}`). With neither `reads` nor `writes` a tool is treated as writing `*`; `[]` means it reads nothing.',
    e: ['file:{path}'],
  },
  'tools[].writes': {
    d: 'Resource templates the call writes. Two calls conflict when a write of one overlaps a read or write of the other; they are then ordered.',
    e: ['service:{name}'],
  },
  'tools[].scope': {
    d: "Where its resources live: `run` (only within one run), `tenant` (shared by a tenant's runs) or `global` (every run).",
    e: 'global',
  },
  'tools[].risk': { d: '`dangerous` calls wait for a human review by default (`policy` can change that).', e: 'dangerous' },
  'tools[].idempotent': { d: 'Safe to run twice: needed for `retry`, and for re-running an interrupted call after a restart.', e: true },
  'tools[].timeoutMs': {
    d: "An attempt's deadline in milliseconds (default: `defaults.timeoutMs`); the attempt's signal is aborted and it fails with `timeout`.",
    e: 30000,
  },
  'tools[].retry': { d: 'Retries of failed attempts, with exponential backoff and jitter. Needs `idempotent: true`.', e: { attempts: 3 } },
  'tools[].retry.attempts': { d: 'Attempts in all, the first included.', e: 3 },
  'tools[].retry.backoffMs': { d: 'The wait before the second attempt; doubled after each failure.', e: 200 },
  'tools[].retry.maxBackoffMs': { d: 'The longest wait between attempts (≥ `backoffMs`).', e: 5000 },
  'tools[].concurrency': {
    d: "At most this many of the tool's calls run at once (same as `limits.tool.<name>`); or `{ limit, per }`, a keyed limit: at most `limit` at once for each value of `per` (DESIGN §4).",
    e: 2,
  },
  'tools[].concurrency.limit': { d: 'A keyed limit: calls of the tool running at once for one value of `per`.', e: 1 },
  'tools[].concurrency.per': {
    d: "A keyed limit's key: a template over the call's args, like a resource template (a missing arg expands to the empty string). An arg a closed input schema (`additionalProperties: false`) does not take is an error.",
    e: '{owner}/{repo}',
  },
  'tools[].queueTimeoutMs': {
    d: 'A ready call not started within this many ms fails `queue_timeout` and never reaches the tool (overrides `defaults.queueTimeoutMs`).',
    e: 5000,
  },
  'tools[].rate': { d: 'At most this many starts per second, minute or hour (`N/s`, `N/min`, `N/h`), a token bucket.', e: '5/s' },
  'tools[].failure': {
    d: "`fail_fast`: a failure of this tool cancels the rest of the run whatever the run's failure mode.",
    e: 'fail_fast',
  },
  'tools[].after': {
    d: "Tools (names or globs) whose calls in the same run must succeed before this tool's calls start (a policy edge).",
    e: ['run_tests'],
  },
  'tools[].requires': {
    d: 'Like `after`, and the run must contain such a call: without one the call fails with `missing_required_predecessor`.',
    e: ['run_tests'],
  },
  'tools[].compensate': {
    d: "Under fail-fast, run for this call when it had succeeded (newest first), with args that may refer to the call's args and output.",
    e: { tool: 'delete_service', args: { name: '${self.output.name}' } },
  },
  'tools[].compensate.tool': { d: 'The compensating tool (a catalog name).', e: 'delete_service' },
  'tools[].compensate.args': {
    d: 'Its args; `${self.output…}` and `${self.args…}` refer to the compensated call.',
    e: { name: '${self.args.name}' },
  },
  'tools[].executor': {
    d: 'How a call runs: `builtin` (the demo tools), `http` (POST the args as JSON to a URL) `worker` (a JavaScript module in a worker thread) or `client` (the agent that submitted the run runs the call and posts its result: see docs/client-tools.md).',
    e: { kind: 'http', url: 'http://127.0.0.1:9000/deploy' },
  },
  'tools[].executor.kind': { d: 'The executor.', e: 'http' },
  'tools[].executor.name': { d: "builtin: which builtin (default: the tool's name).", e: 'echo' },
  'tools[].executor.url': {
    d: 'http: the URL the args are POSTed to as JSON; the JSON answer is the output, a non-2xx answer a failure.',
    e: 'http://127.0.0.1:9000/deploy',
  },
  'tools[].executor.headers': { d: 'http: headers sent with each request.', e: { Authorization: 'Bearer …' } },
  'tools[].executor.headers.<name>': { d: 'A header value.', e: 'Bearer …' },
  'tools[].executor.module': {
    d: 'worker: a module path (relative to the config file) whose default export is `async (args, { signal }) => output`.',
    e: './tools/hash.js',
  },
  policy: { d: 'Rules applied to every call when a batch is planned.' },
  'policy.rules': {
    d: 'The rules; every matching rule applies, and a `deny` always wins.',
    e: [{ match: { tool: 'rm_*', tenant: 'trial' }, deny: 'trial tenants cannot delete' }],
  },
  'policy.rules[].match': { d: 'Which calls the rule is for; every given field must match.', e: { tool: 'deploy*' } },
  'policy.rules[].match.tool': { d: 'A tool name or glob.', e: 'deploy*' },
  'policy.rules[].match.risk': { d: "The tool's risk.", e: 'dangerous' },
  'policy.rules[].match.tenant': { d: "The run's tenant.", e: 'trial' },
  'policy.rules[].after': { d: 'Adds `after` edges to the matching calls.', e: ['run_tests'] },
  'policy.rules[].requires': { d: 'Adds `requires` edges to the matching calls.', e: ['run_tests'] },
  'policy.rules[].review': {
    d: 'Whether matching calls wait for a human review (`false` turns off the default for `dangerous`).',
    e: true,
  },
  'policy.rules[].deny': { d: 'Blocks matching calls with this reason (`policy_denied`).', e: 'trial tenants cannot delete' },
  'policy.rules[].allow': { d: 'Waives the default review of `dangerous` calls (it never bypasses a `deny`).', e: true },
  limits: { d: 'How many calls run at once, at each level. A call starts only when every limit it falls under has room.' },
  'limits.global': { d: 'Calls running at once in the whole service (default: unlimited).', e: 64 },
  'limits.perRun': { d: 'Calls running at once in one run.', e: 16 },
  'limits.maxActiveRunsPerTenant': {
    d: 'Unfinished runs a tenant may have; one more is refused with `429 too_many_runs` and `Retry-After`.',
    e: 100,
  },
  'limits.maxCallsPerRun': {
    d: 'Calls in one run (submission, streamed appends and replans together); a bigger batch is a `413`, on `/v1/plan` too. The CLI has no cap.',
    e: 1000,
  },
  'limits.tenant': { d: 'Calls running at once per tenant; `default` applies to tenants not named.', e: { default: 32, acme: 64 } },
  'limits.tenant.<name>': { d: "A tenant's limit (`default`: every other tenant's).", e: 32 },
  'limits.tool': { d: "Calls running at once per tool (a tool's `concurrency` sets the same).", e: { deploy_image: 1 } },
  'limits.tool.<name>': { d: "A tool's limit; the key must be a catalog tool.", e: 1 },
  'limits.resource': { d: 'Calls holding a resource matching a pattern at once (by their `reads`/`writes` keys).', e: { 'service:*': 1 } },
  'limits.resource.<name>': { d: "A resource pattern's limit.", e: 1 },
  'limits.rate': { d: 'Start rates.' },
  'limits.rate.tenant': {
    d: 'Starts per tenant, as `N/s`, `N/min` or `N/h`; `default` applies to tenants not named.',
    e: { default: '50/s' },
  },
  'limits.rate.tenant.<name>': { d: "A tenant's start rate.", e: '50/s' },
  'limits.each': {
    d: "Keyed limits: pattern → for each key K under it (a running call's read or write key cut to the pattern's length: `repo:acme/web/a.ts` under `repo:*` is `repo:acme`), at most this many running calls touch K.",
    e: { 'repo:*': 2 },
  },
  'limits.priorityAgingMs': {
    d: 'A run whose calls have waited this long gains one priority level (1 is the most urgent), again each period, so nothing starves; default 10000.',
    e: 10000,
  },
  'limits.weights': {
    d: 'Tenant → weight (default 1): within a priority, a tenant of weight w gets w turns in a row (weighted round robin).',
    e: { acme: 3 },
  },
  defaults: { d: 'Defaults for runs and tools.' },
  'defaults.timeoutMs': { d: "An attempt's deadline when its tool sets none.", e: 60000 },
  'defaults.queueTimeoutMs': {
    d: "A ready call not started within this many ms fails `queue_timeout` (a tool's `queueTimeoutMs` overrides it); none when unset.",
    e: 60000,
  },
  'defaults.failure': {
    d: "A run's failure mode when the submission sets none: `fail_fast` (cancel the rest), `partial` (run what does not depend on the failure) or `replan` (pause for the agent to append calls).",
    e: 'partial',
  },
  'defaults.openRunTimeoutMs': { d: 'An open (streamed) run that is not sealed within this time is sealed by the server.', e: 30000 },
  auth: { d: 'API keys. With none the server is in open development mode and listens on loopback addresses only.' },
  'auth.keys': {
    d: 'The keys; requests send `Authorization: Bearer <key>`.',
    e: [{ key: 'env:TOOLGRAPH_AGENT_KEY', tenant: 'acme', role: 'agent' }],
  },
  'auth.keys[].key': { d: 'The key, or `env:NAME` to read it from the environment (never printed).', e: 'env:TOOLGRAPH_AGENT_KEY' },
  'auth.keys[].tenant': { d: "The tenant the key's runs belong to.", e: 'acme' },
  'auth.keys[].role': {
    d: "`agent` submits and reads its own tenant's runs; `operator` sees every tenant, decides reviews and reads `/metrics`.",
    e: 'agent',
  },
  'auth.keys[].maxPriority': {
    d: 'The most urgent run `priority` the key may submit (1 most urgent … 5); a more urgent one is `403 priority_not_allowed`.',
    e: 2,
  },
  // Keys other branches add (size limits, store, mcp, hooks): used once the schema has them.
  'limits.maxArgsBytes': {
    d: "A call's args, once references are resolved, as compact JSON UTF-8 bytes; past it the call fails `args_too_large` before it runs.",
    e: 1048576,
  },
  'limits.maxOutputBytes': {
    d: "A call's output, as compact JSON UTF-8 bytes; past it the call fails `output_too_large` (a tool's `maxOutputBytes` overrides it).",
    e: 4194304,
  },
  'limits.hooksInFlight': {
    d: 'Hook requests (`hooks`) running at once in a process: the calls whose hooks come beyond it wait their turn, first come first served, as for any limit (their wait counts in no `timeoutMs`).',
    e: 64,
  },
  'tools[].maxOutputBytes': { d: "This tool's output cap (overrides `limits.maxOutputBytes`).", e: 1048576 },
  store: { d: 'Where runs are kept: SQLite (the default, `server.db`) or PostgreSQL for several replicas.' },
  'store.url': {
    d: 'A `postgres://` (or `postgresql://`) URL, or `env:NAME`. `--db` and `TOOLGRAPH_DB` take precedence.',
    e: 'env:TOOLGRAPH_DB_URL',
  },
  'store.poolSize': { d: 'The most connections to PostgreSQL this process opens (a bounded pool); ignored for SQLite.', e: 10 },
  'store.leaseMs': {
    d: 'PostgreSQL (several replicas): how long a replica owns its runs without renewing its lease (it renews every third of it). When a replica dies, hangs or loses the database, another takes its runs over within this + 2 s.',
    e: 10000,
  },
  'store.takeoverConcurrency': {
    d: 'PostgreSQL (several replicas): the most runs of a dead replica this replica resumes at once. It claims them in batches of twice this, only as it resumes them, so live replicas share a takeover.',
    e: 32,
  },
  'store.permitSlices': {
    d: 'PostgreSQL (several replicas): a replica takes slices of counted limits (tenant, tool, keyed and resource limits) and grants their calls with no round trip, giving free places back as soon as another replica waits for the key. `false`: every call of a shared limit asks the database (strict first come, first served across replicas from the first call on, at the cost of an ask per call).',
    e: true,
  },
  mcp: { d: 'Tools from MCP servers, added to the catalog at start.' },
  'mcp.servers': { d: 'The MCP servers.', e: [{ name: 'fs', command: 'node', args: ['server.js', '/srv/repo'] }] },
  'mcp.servers[].name': { d: "The server's name ([A-Za-z0-9_-]{1,32}).", e: 'fs' },
  'mcp.servers[].command': { d: 'stdio transport: the command to start.', e: 'node' },
  'mcp.servers[].args': { d: 'stdio transport: its arguments.', e: ['server.js', '/srv/repo'] },
  'mcp.servers[].env': { d: 'stdio transport: extra environment variables.', e: { LOG_LEVEL: 'warn' } },
  'mcp.servers[].cwd': { d: 'stdio transport: the working directory.', e: '/srv' },
  'mcp.servers[].url': { d: "Streamable HTTP transport: the server's URL (instead of `command`).", e: 'https://mcp.example.com/mcp' },
  'mcp.servers[].headers': { d: 'Streamable HTTP transport: headers (`env:NAME` values allowed).', e: { Authorization: 'env:MCP_KEY' } },
  'mcp.servers[].prefix': { d: "Prepended to the server's tool names in the catalog (default `<name>__`).", e: 'fs__' },
  'mcp.servers[].trustAnnotations': {
    d: "Use the tools' hints (`readOnlyHint`, `idempotentHint`) as defaults; otherwise every tool is opaque (writes `*`).",
    e: true,
  },
  'mcp.servers[].include': { d: "Globs on the server's tool names to add (default: every tool).", e: ['read_*', 'write_file'] },
  'mcp.servers[].scope': { d: "As a tool's `scope`, for every tool of the server.", e: 'tenant' },
  'mcp.servers[].maxOutputBytes': { d: "Output cap for the server's tools (default `limits.maxOutputBytes`).", e: 1048576 },
  'mcp.servers[].tools': {
    d: "Per-tool overrides by the server's tool name: any field of `tools[]` but `name`, `input` and `executor`.",
    e: { write_file: { writes: ['file:{path}'] } },
  },
  hooks: {
    d: 'Hooks around every matching call (a policy service, a guardrail): `before_call` may allow, deny, send to review or rewrite the args; `after_call` may replace the output (redaction) or fail the call. Hooks of one event run in this order. Each decision is a `call.hook` event and part of the recording; replay applies the recorded decisions and calls no hook.',
    e: [{ on: 'before_call', match: { tool: 'fs__*' }, url: 'http://127.0.0.1:9100/hooks', timeoutMs: 2000, onError: 'deny' }],
  },
  'hooks[].on': {
    d: '`before_call`: once per call, when it is ready to start (its predecessors ended), before its first attempt; it answers `{ decision: allow | deny | review, args?, reason? }`. `after_call`: once after its last attempt; it answers `{}`, `{ output }` (replaces the output) or `{ fail: { message } }` (fails a succeeded call with `hook_rejected`).',
    e: 'before_call',
  },
  'hooks[].name': { d: 'Names the hook in events, metrics and recordings (default `hooks[<index>]`); unique.', e: 'fs-guard' },
  'hooks[].match': {
    d: "Which calls, as a policy rule's `match`; every given field must match (default: every call).",
    e: { tool: 'fs__*' },
  },
  'hooks[].match.tool': { d: 'A tool name or glob.', e: 'fs__*' },
  'hooks[].match.risk': { d: "The tool's risk.", e: 'write' },
  'hooks[].match.tenant': { d: "The run's tenant (a glob).", e: 'trial' },
  'hooks[].url': {
    d: 'An HTTP endpoint: the request `{ on, runId, callId, tool, tenant, args, status?, output?, error? }` is POSTed to it as JSON, and a 2xx JSON answer is the decision. Give `url` or `module`.',
    e: 'http://127.0.0.1:9100/hooks',
  },
  'hooks[].headers': { d: 'With `url`: headers sent with each request (`env:NAME` values allowed).', e: { Authorization: 'env:HOOK_KEY' } },
  'hooks[].module': {
    d: 'A module path (relative to the config file) whose default export `async (request, { signal }) => answer` runs in a worker thread.',
    e: './hooks/check.js',
  },
  'hooks[].timeoutMs': {
    d: "How long one hook call may take, in milliseconds. Hook time counts in neither the call's `timeoutMs` nor its wait for limits.",
    e: 2000,
  },
  'hooks[].onError': {
    d: 'What a hook that fails, times out or answers nonsense decides: `deny` fails the call (`hook_denied` before, `hook_rejected` after a succeeded call), `allow` lets it go on.',
    e: 'deny',
  },
  server: { d: '`toolgraph serve` (flags override these).' },
  'server.host': { d: 'The address to listen on (`--host`); beyond loopback, `auth.keys` are required.', e: '0.0.0.0' },
  'server.port': { d: 'The port (`--port`; `0`: any free port).', e: 8080 },
  'server.db': { d: 'The SQLite database file (`--db`); its directory is created.', e: '/data/toolgraph.db' },
};

interface Row {
  path: string;
  variant?: string;
  type: string;
  required: boolean;
  default?: unknown;
  description: string;
  example?: unknown;
}

export function configJsonSchema(): JsonSchema {
  const schema = configFileSchema({ env: {}, baseDir: '.', ajv: new Ajv() });
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
}

function typeOf(s: JsonSchema): string {
  if (s.const !== undefined) return `\`${JSON.stringify(s.const)}\``;
  if (s.enum) return `one of ${s.enum.map((v) => `\`${String(v)}\``).join(', ')}`;
  const variants = s.oneOf ?? s.anyOf;
  if (variants?.every((v) => v.properties?.kind?.const !== undefined)) return 'mapping, by `kind`';
  if (variants) return variants.map(typeOf).join(' or ');
  switch (s.type) {
    case 'integer':
    case 'number': {
      const max = s.maximum !== undefined && s.maximum < Number.MAX_SAFE_INTEGER ? s.maximum : undefined;
      const word = s.type === 'integer' ? 'integer' : 'number';
      if (s.minimum !== undefined && max !== undefined) return `${word} ${s.minimum}–${max}`;
      if (s.minimum !== undefined) return `${word} ≥ ${s.minimum}`;
      return word;
    }
    case 'string':
      return s.minLength ? 'non-empty string' : 'string';
    case 'boolean':
      return 'boolean';
    case 'array':
      return `list of ${s.items ? typeOf(s.items) : 'values'}`;
    case 'object':
      if (s.properties) return 'mapping';
      if (typeof s.additionalProperties === 'object') return `mapping of name → ${typeOf(s.additionalProperties)}`;
      return 'mapping';
    default:
      return 'mapping (any)';
  }
}

function walk(s: JsonSchema, path: string, required: boolean, rows: Row[], variant?: string): void {
  const note = NOTES[path];
  const description = s.description ?? note?.d ?? '(undocumented)';
  rows.push({
    path,
    ...(variant ? { variant } : {}),
    type: typeOf(s),
    required,
    ...(s.default !== undefined ? { default: s.default } : {}),
    description,
    ...(note?.e !== undefined ? { example: note.e } : {}),
  });
  const variants = s.oneOf ?? s.anyOf;
  if (variants) {
    // A discriminated union (executor): each variant's keys, labelled by its `kind`.
    const seen = new Set<string>();
    for (const v of variants) {
      const kind = v.properties?.kind?.const;
      for (const [k, sub] of Object.entries(v.properties ?? {})) {
        const key = `${path}.${k}`;
        if (k === 'kind') {
          if (seen.has(key)) continue;
          seen.add(key);
          const kinds = variants.map((x) => x.properties?.kind?.const).filter((x) => x !== undefined);
          walkChildren({ ...sub, const: undefined, enum: kinds }, key, true, rows);
          continue;
        }
        walkChildren(sub, key, v.required?.includes(k) ?? false, rows, kind === undefined ? undefined : `kind: ${String(kind)}`);
      }
    }
    return;
  }
  if (s.type === 'array' && s.items?.type === 'object') walkObject(s.items, `${path}[]`, rows);
  else if (s.type === 'object' && s.properties) walkObject(s, path, rows);
  else if (s.type === 'object' && typeof s.additionalProperties === 'object' && NOTES[`${path}.<name>`]) {
    walkChildren(s.additionalProperties, `${path}.<name>`, false, rows);
  }
}

function walkChildren(s: JsonSchema, path: string, required: boolean, rows: Row[], variant?: string): void {
  walk(s, path, required, rows, variant);
}

function walkObject(s: JsonSchema, path: string, rows: Row[]): void {
  for (const [k, sub] of Object.entries(s.properties ?? {})) walk(sub, `${path}.${k}`, s.required?.includes(k) ?? false, rows);
}

export function yamlInline(key: string, value: unknown): string {
  const text = `${key}: ${stringify(value, { collectionStyle: 'flow', lineWidth: 0 }).trim()}`;
  return `\`${text.replace(/\|/g, '\\|')}\``;
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** The rows of the reference: every key of the file, depth first, in the schema's order. */
export function configRows(): Row[] {
  const root = configJsonSchema();
  const rows: Row[] = [];
  for (const [k, sub] of Object.entries(root.properties ?? {})) walk(sub, k, root.required?.includes(k) ?? false, rows);
  return rows;
}

const INTRO = `# Configuration reference

<!-- Generated by \`npm run docs:config\` from the config schema (src/config/schema.ts). Do not edit by
hand: a test fails when this file is not what the script writes. -->

The service, \`toolgraph run\`, \`plan\` and \`replay\` read one YAML (or JSON) file given with
\`--config FILE\`. Without one, the demo catalog of builtin tools is used (\`sleep\`, \`echo\`, \`fail\`,
\`read_file\`, \`write_file\`, \`run_tests\`, \`deploy\`).

Every mapping is strict: an unknown key is an error that lists the keys allowed there. Every error
names its path and says what was expected and what was found, e.g.
\`tools[2].retry: retry needs idempotent: true\`, and one load reports every problem at once.
A key's value may not be read from the environment, except \`auth.keys[].key: env:NAME\`.

A complete example (the examples in this file are checked by \`tests/unit/docs.test.ts\`):

\`\`\`yaml
tools:
  - name: deploy_image
    description: Deploys an image as a service
    input: { type: object, properties: { image: { type: string }, name: { type: string } }, required: [image, name] }
    writes: ["service:{name}"]
    scope: global
    risk: dangerous
    idempotent: true
    retry: { attempts: 3, backoffMs: 200, maxBackoffMs: 5000 }
    concurrency: 2
    rate: 5/s
    after: [run_tests]
    executor: { kind: http, url: "http://127.0.0.1:9000/deploy" }
  - name: run_tests
    reads: ["repo:*"]
    writes: []
    executor: { kind: http, url: "http://127.0.0.1:9000/tests", headers: { Authorization: "Bearer secret" } }
  - name: hash
    reads: ["file:{path}"]
    writes: []
    executor: { kind: worker, module: ./tools/hash.js }
policy:
  rules:
    - match: { tool: "rm_*", tenant: trial }
      deny: "trial tenants cannot delete"
limits: { global: 64, perRun: 16, tenant: { default: 32 }, resource: { "service:*": 1 }, maxActiveRunsPerTenant: 100 }
defaults: { failure: partial, timeoutMs: 60000 }
auth:
  keys:
    - { key: "env:TOOLGRAPH_AGENT_KEY", tenant: acme, role: agent }
    - { key: "env:TOOLGRAPH_OPERATOR_KEY", tenant: ops, role: operator }
server: { host: 127.0.0.1, port: 8080, db: ./data/toolgraph.db }
\`\`\`

In the tables, a key's path uses \`[]\` for an item of a list and \`<name>\` for a key you choose.
`;

/** The whole page. */
export function configReference(): string {
  const rows = configRows();
  const out = [INTRO];
  let section = '';
  for (const row of rows) {
    const top = row.path.split(/[.[]/)[0] as string;
    if (top !== section) {
      section = top;
      out.push(`\n## \`${top}\`\n\n${cell(row.description)}\n\n| key | type | default | example | what it does |\n|---|---|---|---|---|`);
      continue;
    }
    const leaf = row.path.split('.').pop()!.replace(/\[\]$/, '');
    const dflt = row.default !== undefined ? `\`${JSON.stringify(row.default)}\`` : row.required ? 'required' : '—';
    const example = row.example !== undefined && leaf !== '<name>' ? yamlInline(leaf, row.example) : '';
    out.push(
      `| \`${row.path}\`${row.variant ? ` (${row.variant})` : ''} | ${cell(row.type)} | ${dflt} | ${example} | ${cell(row.description)} |`,
    );
  }
  return `${out.join('\n')}\n`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(CONFIG_DOC, configReference());
  console.log(`wrote ${CONFIG_DOC}`);
}
