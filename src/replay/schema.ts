/**
 * `parseRecording`, which turns any JSON value into a valid `Recording` or a `RecordingError` listing
 * every problem as `JSON path: what was expected, got what was found` (e.g. `attempts[3].endMs:
 * expected a number ≥ startMs (12), got 5`).
 *
 * The document's shape is `RecordingSchema` (contract/recording.ts); here are the checks across its
 * fields. Input schemas are compiled here too, so a broken one is reported at its path instead of
 * failing later.
 */
import type { Ajv } from 'ajv';
import type { z } from 'zod';
import { compileSchema, createAjv } from '../config/catalog.js';
import { formatPath } from '../config/load.js';
import { RECORDING_FORMAT, RecordingSchema, type Recording } from '../contract/recording.js';

/** A recording that cannot be replayed: `problems` holds one `path: problem` line each. */
export class RecordingError extends Error {
  constructor(
    readonly source: string,
    readonly problems: readonly string[],
  ) {
    super(
      problems.length === 1
        ? `${source}: ${problems[0]}`
        : `${source}: ${problems.length} problems in the recording:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
  }
}

type Parsed = z.output<typeof RecordingSchema>;
type Path = (string | number)[];

const interned = new WeakMap<Ajv, Map<string, Record<string, unknown>>>();

/**
 * Ajv caches compiled schemas by object identity; recordings parsed from JSON carry fresh objects, so
 * equal input schemas are swapped for the first one seen with this `ajv`: each compiles once per corpus.
 */
export function internInputs<T extends { input?: Record<string, unknown> }>(tools: readonly T[], ajv: Ajv): T[] {
  let seen = interned.get(ajv);
  if (!seen) interned.set(ajv, (seen = new Map()));
  const known = seen;
  return tools.map((t) => {
    if (t.input === undefined) return t;
    const key = JSON.stringify(t.input);
    const first = known.get(key);
    if (first === t.input) return t;
    if (first) return { ...t, input: first };
    known.set(key, t.input);
    return t;
  });
}

/** Cross-field checks: ids are unique and known, attempts are consistent, input schemas compile. */
function crossCheck(r: Parsed, ajv: Ajv): { path: Path; message: string; got?: unknown }[] {
  const out: { path: Path; message: string; got?: unknown }[] = [];
  const ids = new Set<string>();
  const addId = (id: string, path: Path) => {
    if (ids.has(id)) out.push({ path, message: `expected a call id not used before in the recording`, got: id });
    ids.add(id);
  };
  r.calls.forEach((c, i) => {
    addId(c.id, ['calls', i, 'id']);
  });
  r.replans.forEach((p, i) => {
    p.calls.forEach((c, j) => {
      addId(c.id, ['replans', i, 'calls', j, 'id']);
    });
  });
  const tools = new Set<string>();
  r.config.tools.forEach((t, i) => {
    if (tools.has(t.name))
      out.push({ path: ['config', 'tools', i, 'name'], message: 'expected a tool name not declared before', got: t.name });
    tools.add(t.name);
    if (t.input === undefined) return;
    try {
      compileSchema(ajv, t.input);
    } catch (e) {
      out.push({
        path: ['config', 'tools', i, 'input'],
        message: `expected a JSON Schema that compiles, got an error: ${(e as Error).message}`,
      });
    }
  });
  const seen = new Set<string>();
  r.attempts.forEach((a, i) => {
    if (!ids.has(a.callId))
      out.push({ path: ['attempts', i, 'callId'], message: 'expected the id of a call of the recording', got: a.callId });
    if (a.readyMs !== undefined && a.readyMs > a.startMs)
      out.push({ path: ['attempts', i, 'readyMs'], message: `expected a number ≤ startMs (${a.startMs})`, got: a.readyMs });
    if (a.endMs < a.startMs)
      out.push({ path: ['attempts', i, 'endMs'], message: `expected a number ≥ startMs (${a.startMs})`, got: a.endMs });
    if (!a.ok && a.error === undefined && !a.lost)
      out.push({ path: ['attempts', i, 'error'], message: 'expected the error of a failed attempt (ok is false)', got: undefined });
    const key = `${a.compensation ? 'compensation' : 'call'}/${a.callId}/${a.attempt}`;
    if (seen.has(key))
      out.push({ path: ['attempts', i, 'attempt'], message: `expected attempt ${a.attempt} of ${a.callId} only once`, got: a.attempt });
    seen.add(key);
  });
  r.reviews.forEach((v, i) => {
    if (!ids.has(v.callId))
      out.push({ path: ['reviews', i, 'callId'], message: 'expected the id of a call of the recording', got: v.callId });
    if (v.decision === 'edit' && v.args === undefined)
      out.push({ path: ['reviews', i, 'args'], message: 'expected the edited args of an edit', got: undefined });
  });
  (r.hooks ?? []).forEach((h, i) => {
    if (!ids.has(h.callId))
      out.push({ path: ['hooks', i, 'callId'], message: 'expected the id of a call of the recording', got: h.callId });
  });
  r.result.calls.forEach((c, i) => {
    if (!ids.has(c.id)) out.push({ path: ['result', 'calls', i, 'id'], message: 'expected the id of a call of the recording', got: c.id });
  });
  return out;
}

/** What was found, short: `5`, `"abc"`, `a list`, `a mapping`, `nothing`. */
function show(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (typeof value !== 'object') return String(value);
  return Array.isArray(value) ? 'a list' : 'a mapping';
}

const TYPE_WORDS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'true or false',
  array: 'a list',
  object: 'a mapping',
  record: 'a mapping',
};

/** What a failed check expected, in words. */
function expectation(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return `expected ${TYPE_WORDS[issue.expected] ?? issue.expected}`;
    case 'invalid_value':
      return `expected ${issue.values.length === 1 ? '' : 'one of '}${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'too_small':
      if (issue.origin === 'string' && Number(issue.minimum) === 1) return 'expected a non-empty string';
      return `expected ${TYPE_WORDS[issue.origin] ?? issue.origin} ${issue.inclusive ? '≥' : '>'} ${String(issue.minimum)}`;
    case 'too_big':
      return `expected ${TYPE_WORDS[issue.origin] ?? issue.origin} ${issue.inclusive ? '≤' : '<'} ${String(issue.maximum)}`;
    case 'invalid_union':
      return 'expected one of the allowed shapes';
    default:
      return issue.message.startsWith('expected') ? issue.message : `expected ${issue.message.replace(/^Invalid input: (expected )?/, '')}`;
  }
}

function describe(issue: z.core.$ZodIssue): string[] {
  if (issue.code === 'unrecognized_keys') return issue.keys.map((k) => `${formatPath([...issue.path, k])}: unknown key`);
  let found: unknown = issue.input;
  if (issue.code === 'invalid_union' && 'discriminator' in issue && typeof issue.discriminator === 'string') {
    found = (issue.input as Record<string, unknown> | undefined)?.[issue.discriminator];
  }
  return [`${formatPath(issue.path)}: ${expectation(issue)}, got ${show(found)}`];
}

/**
 * Validates a parsed JSON value as a recording; `source` (the file) names it in the error.
 * Pass one shared `ajv` when parsing many recordings: identical input schemas compile once.
 */
export function parseRecording(raw: unknown, source: string, ajv: Ajv = createAjv()): Recording {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new RecordingError(source, [`expected a recording (a JSON object with "format": "${RECORDING_FORMAT}"), got ${show(raw)}`]);
  }
  const format = (raw as { format?: unknown }).format;
  if (format !== RECORDING_FORMAT) {
    // Another version (or not a recording at all): the rest of the document means nothing to us.
    throw new RecordingError(source, [`format: expected "${RECORDING_FORMAT}", got ${show(format)}`]);
  }
  const parsed = RecordingSchema.safeParse(raw, { reportInput: true });
  if (!parsed.success) throw new RecordingError(source, parsed.error.issues.flatMap(describe));
  parsed.data.config.tools = internInputs(parsed.data.config.tools, ajv);
  const problems = crossCheck(parsed.data, ajv);
  if (problems.length > 0)
    throw new RecordingError(
      source,
      problems.map((p) => `${formatPath(p.path)}: ${p.message}${'got' in p ? `, got ${show(p.got)}` : ''}`),
    );
  return parsed.data as Recording;
}
