/**
 * Loads the configuration: reads the file (or the builtin demo), parses YAML (JSON is YAML too),
 * validates it once with the schema of ./schema.ts, builds the catalog and returns a deep-frozen
 * `Config`. Every failure is a `ConfigError` whose message names the file and lists each problem as
 * `path: what was expected, got what was found`, e.g. `limits.global: expected an integer ≥ 1, got 0`.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseDocument } from 'yaml';
import type { z } from 'zod';
import { createAjv, createCatalog } from './catalog.js';
import { DEMO_CONFIG_YAML } from './demo.js';
import { configFileSchema } from './schema.js';
import type { Config } from './types.js';

/** A config that cannot be used. `problems` holds one line per problem (the message lists them all). */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    /** The file path, or `builtin:demo`. */
    readonly source: string,
    readonly problems: readonly string[],
  ) {
    super(
      problems.length === 1
        ? `${source}: ${problems[0]}`
        : `${source}: ${problems.length} problems in the configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
  }
}

export interface ParseOptions {
  /** Where `key: env:NAME` is read. @default process.env */
  env?: Readonly<Record<string, string | undefined>>;
  /** Worker module paths resolve against it (the config file's directory). @default process.cwd() */
  baseDir?: string;
}

/** The source name of the builtin demo config. */
export const DEMO_SOURCE = 'builtin:demo';

/**
 * Loads a config file, or the builtin demo config when no path is given.
 *
 * @example
 * const config = loadConfig('toolgraph.yaml');
 * config.catalog.checkArgs('deploy', { name: 'web' });
 */
export function loadConfig(file?: string, env: Readonly<Record<string, string | undefined>> = process.env): Config {
  if (file === undefined) return parseConfig(DEMO_CONFIG_YAML, DEMO_SOURCE, { env, baseDir: process.cwd() });
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why =
      e.code === 'ENOENT'
        ? 'no such file'
        : e.code === 'EISDIR'
          ? 'it is a directory'
          : e.code === 'EACCES'
            ? 'permission denied'
            : e.message;
    throw new ConfigError(file, [`cannot read the config file: ${why}`]);
  }
  return parseConfig(text, file, { env, baseDir: path.dirname(path.resolve(file)) });
}

/** Parses and validates config text; `source` names it in messages and in `Config.source`. */
export function parseConfig(text: string, source: string, opts: ParseOptions = {}): Config {
  const data = parseYaml(text, source);
  const ajv = createAjv();
  const schema = configFileSchema({ env: opts.env ?? process.env, baseDir: opts.baseDir ?? process.cwd(), ajv });
  const result = schema.safeParse(data, { reportInput: true });
  if (!result.success) throw new ConfigError(source, result.error.issues.flatMap(describeIssue));
  const catalog = createCatalog(result.data.tools, { ajv });
  return deepFreeze({ ...result.data, catalog, source });
}

function parseYaml(text: string, source: string): unknown {
  if (text.trim() === '')
    throw new ConfigError(source, ['the file is empty; expected a mapping with tools, policy, limits, defaults, auth, server']);
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      source,
      doc.errors.map((e) => {
        const at = e.linePos?.[0];
        const where = at ? ` at line ${at.line}, column ${at.col}` : '';
        const what = e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
        return `YAML syntax error${where}: ${what}`;
      }),
    );
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 1000 });
  } catch (err) {
    throw new ConfigError(source, [`YAML error: ${(err as Error).message}`]);
  }
  if (data === null || data === undefined) {
    throw new ConfigError(source, ['the file has no content; expected a mapping with tools, policy, limits, defaults, auth, server']);
  }
  return data;
}

// ---- issue → `path: expected …, got …` ---------------------------------------------------------

type Issue = z.core.$ZodIssue;
type PathKey = PropertyKey;

const TYPE_WORDS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'true or false',
  array: 'a list',
  object: 'a mapping',
  record: 'a mapping',
};

/** `tools[2].retry`, `limits.tool["a:b"]`; the empty path is `config`. */
export function formatPath(keys: readonly PathKey[]): string {
  let out = '';
  for (const k of keys) {
    if (typeof k === 'number') out += `[${k}]`;
    else if (typeof k === 'string' && /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(k)) out += out ? `.${k}` : k;
    else out += `[${JSON.stringify(String(k))}]`;
  }
  return out || 'config';
}

/** What was found, short: `0`, `"abc"`, `a list [1,2]`, `a mapping`, `nothing`. */
function show(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (typeof value !== 'object') return String(value);
  const word = Array.isArray(value) ? 'a list' : 'a mapping';
  const json = JSON.stringify(value);
  return json !== undefined && json.length <= 40 ? `${word} ${json}` : word;
}

/** An auth key's value never appears in a message: only its kind. */
function isSecretPath(keys: readonly PathKey[]): boolean {
  return keys.length === 4 && keys[0] === 'auth' && keys[1] === 'keys' && keys[3] === 'key';
}

function expectation(issue: Issue): string {
  const own = issue.message.startsWith('expected') ? issue.message : undefined;
  switch (issue.code) {
    case 'invalid_type':
      // A structural mismatch (a list for a mapping…) says so, whatever the field's own wording.
      if (['object', 'record', 'array'].includes(issue.expected)) return `expected ${TYPE_WORDS[issue.expected]}`;
      return own ?? `expected ${TYPE_WORDS[issue.expected] ?? issue.expected}`;
    case 'invalid_value':
      return own ?? `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'too_small':
      return own ?? `expected ${issue.origin === 'number' ? 'a number' : issue.origin} ≥ ${String(issue.minimum)}`;
    case 'too_big':
      return own ?? `expected ${issue.origin === 'number' ? 'a number' : issue.origin} ≤ ${String(issue.maximum)}`;
    default:
      return own ?? issue.message;
  }
}

function describeIssue(issue: Issue): string[] {
  if (issue.code === 'unrecognized_keys') {
    const what = issue.message.startsWith('unknown key') ? issue.message : 'unknown key';
    return issue.keys.map((k) => `${formatPath([...issue.path, k])}: ${what}`);
  }
  let found: unknown = issue.input;
  if (issue.code === 'invalid_union' && 'discriminator' in issue && typeof issue.discriminator === 'string') {
    // The path already ends with the discriminator; the input is the whole object.
    found = (issue.input as Record<string, unknown> | undefined)?.[issue.discriminator];
  }
  const message = expectation(issue);
  const label = formatPath(issue.path);
  if (!message.startsWith('expected') || message.includes(', got ')) return [`${label}: ${message}`];
  const got = isSecretPath(issue.path) ? (found === undefined ? 'nothing' : `a ${typeof found}`) : show(found);
  return [`${label}: ${message}, got ${got}`];
}

// ---- freezing -------------------------------------------------------------------------------------

/** Freezes plain objects and arrays all the way down (functions, like the catalog's, are left alone). */
function deepFreeze<T>(value: T, seen = new WeakSet<object>()): T {
  if (typeof value !== 'object' || value === null || seen.has(value)) return value;
  const proto: unknown = Object.getPrototypeOf(value);
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) return value;
  seen.add(value);
  Object.freeze(value);
  for (const v of Object.values(value)) deepFreeze(v, seen);
  return value;
}
