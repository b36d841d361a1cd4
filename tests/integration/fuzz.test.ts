/**
 * Fuzzing the HTTP API (DESIGN §7: bad input is a 4xx, never a 5xx, never a crash). An in-process
 * server on a real SQLite file gets thousands of random and mutated requests: valid batches with
 * fields of the wrong type, missing or extra (prototype keys among them), huge strings, deep nesting,
 * unicode; random headers (Authorization, Idempotency-Key, Content-Type, Last-Event-ID); random paths
 * and query strings. Every answer must be below 500, and every 4xx must carry
 * `{ error: { code, message } }`. Most requests go through `app.inject` for speed, a few hundred over
 * real HTTP; afterwards the server must still be healthy and run a batch to the end.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../../src/api/server.js';
import { Service } from '../../src/api/service.js';
import { parseConfig } from '../../src/config/load.js';
import type { Store } from '../../src/store/types.js';
import { openSqliteStore } from '../../src/store/sqlite.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20240611);
// 10,000 requests in all by default (issue #20): most through app.inject, the rest over real HTTP and
// over raw sockets (what only Node's HTTP parser sees).
const INJECTED = Number(process.env.FUZZ_RUNS ?? 8500);
const OVER_HTTP = Number(process.env.FUZZ_HTTP_RUNS ?? 700);
const RAW = Number(process.env.FUZZ_RAW_RUNS ?? 800);

const CONFIG = `
tools:
  - name: echo
    input: { type: object }
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: echo }
  - name: sleep
    input:
      type: object
      properties: { ms: { type: integer, minimum: 0, maximum: 20 } }
      required: [ms]
    reads: []
    writes: []
    risk: read
    idempotent: true
    retry: { attempts: 2, backoffMs: 1, maxBackoffMs: 2 }
    executor: { kind: builtin, name: sleep }
  - name: fail
    input:
      type: object
      properties: { message: { type: string }, retryable: { type: boolean } }
    reads: []
    writes: []
    risk: read
    idempotent: true
    retry: { attempts: 2, backoffMs: 1, maxBackoffMs: 5 }
    executor: { kind: builtin, name: fail }
  - name: read_file
    input: { type: object, properties: { path: { type: string } }, required: [path] }
    reads: ["file:{path}"]
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: echo }
  - name: write_file
    input: { type: object, properties: { path: { type: string }, content: { type: string } }, required: [path] }
    writes: ["file:{path}"]
    compensate: { tool: echo, args: { undo: "\${self.args.path}" } }
    executor: { kind: builtin, name: echo }
  - name: deploy
    input: { type: object, properties: { name: { type: string } } }
    reads: []
    writes: ["service:{name}"]
    scope: global
    risk: dangerous
    timeoutMs: 200
    after: [read_file]
    executor: { kind: builtin, name: echo }
  - name: OpenWeatherMap.get_current_weather
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: echo }
policy:
  rules:
    - match: { tool: fail, tenant: trial }
      deny: trial tenants cannot fail
limits:
  maxCallsPerRun: 64
  # Small size caps: the growing references below reach them in a few calls (DESIGN §4).
  maxArgsBytes: 65536
  maxOutputBytes: 262144
  tenant: { default: 32 }
defaults:
  timeoutMs: 1000
auth:
  keys:
    - { key: agent-key-acme, tenant: acme, role: agent }
    - { key: operator-key, tenant: ops, role: operator }
`;
const TOOLS = ['echo', 'sleep', 'fail', 'read_file', 'write_file', 'deploy', 'OpenWeatherMap.get_current_weather'];
const OPERATOR = 'Bearer operator-key';
const AGENT = 'Bearer agent-key-acme';

// ---- arbitraries ---------------------------------------------------------------------------------

const PROTO_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__'];
const protoKey = fc.constantFrom(...PROTO_KEYS);
const unicode = fc.string({ unit: 'binary', maxLength: 40 });
const huge = fc.constantFrom(100_000, 100_000, 1_000_000).map((n) => 'ẍ'.repeat(n));

/** A value of any JSON type, weighted to the nasty ones. */
const junk: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -1, 1.5, 2 ** 53, -(2 ** 63), 1e308, 60_001, '', ' ', '0', 'true', 'null', '[]', '{}'),
  unicode,
  protoKey,
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }),
  fc.dictionary(fc.oneof(unicode, protoKey), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
);

const REFS = [
  '${c1.output}',
  '${c2.output.a[0].b}',
  'x ${c1.output} y ${c2.output.n}',
  '$${c1.output}',
  '${echo.output}',
  '${sleep.output.ms}',
  '${OpenWeatherMap.get_current_weather.output.temp}',
  '${nope.output}',
  '${c1.output.__proto__}',
  '${c1.output.constructor.name}',
  '${__proto__.output}',
  '${constructor.output}',
  '${',
  '${}',
  '${.output}',
  '${c1.output[99999999999999999999]}',
  '${c1.output[-1]}',
  `\${c1.output.${'a.'.repeat(300)}b}`,
  '${c1.output}'.repeat(200),
];
const ref = fc.constantFrom(...REFS);

const callId = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom('c1', 'c2', 'c3', 'c4', 'c5') },
  { weight: 1, arbitrary: protoKey.filter((k) => /^[A-Za-z0-9_.:-]+$/.test(k)) },
  { weight: 1, arbitrary: fc.constantFrom('a.b:c-d', 'x'.repeat(128), 'x'.repeat(129), 'ünï', 'a b', '') },
  { weight: 1, arbitrary: junk },
);
const toolName = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom(...TOOLS) },
  { weight: 1, arbitrary: fc.constantFrom(...PROTO_KEYS, 'nope', '', 'x'.repeat(201), 'echo*') },
  { weight: 1, arbitrary: junk },
);
const args = fc.oneof(
  { weight: 5, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), fc.oneof(fc.jsonValue({ maxDepth: 3 }), ref), { maxKeys: 5 }) },
  {
    weight: 4,
    arbitrary: fc.record({ ms: fc.oneof({ weight: 5, arbitrary: fc.integer({ min: 0, max: 20 }) }, { weight: 1, arbitrary: junk }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record(
      {
        path: fc.oneof(fc.constantFrom('/repo/a', '/repo', '*', '{path}'), ref, unicode),
        content: fc.string(),
        name: fc.oneof(fc.string({ maxLength: 6 }), ref),
      },
      { requiredKeys: [] },
    ),
  },
  { weight: 1, arbitrary: fc.record({ message: fc.string(), retryable: fc.oneof(fc.boolean(), junk) }) },
  { weight: 1, arbitrary: fc.dictionary(protoKey, fc.jsonValue({ maxDepth: 2 }), { minKeys: 1, maxKeys: 3 }) },
  { weight: 1, arbitrary: huge.map((s) => ({ s })) },
  { weight: 1, arbitrary: junk },
);
const call = fc.oneof(
  { weight: 10, arbitrary: fc.record({ id: callId, tool: toolName, args }, { requiredKeys: ['id', 'tool'] }) },
  { weight: 1, arbitrary: fc.record({ id: callId, tool: toolName, args, extra: junk }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: junk },
);
/**
 * Valid batches whose call ids are named like Object.prototype properties and refer to each other
 * (data edges into and out of such ids), with conflicting writes among them (conflict edges).
 */
const LINK_IDS = [
  'a',
  'b',
  'c',
  'constructor',
  'toString',
  'valueOf',
  '__proto__',
  'hasOwnProperty',
  'prototype',
  'isPrototypeOf',
  '__lookupGetter__',
];
const linkedCalls = fc.uniqueArray(fc.constantFrom(...LINK_IDS), { minLength: 1, maxLength: 6 }).chain((ids) =>
  fc.tuple(
    ...ids.map((id, i) =>
      fc
        .record({
          tool: fc.constantFrom('echo', 'write_file', 'read_file', 'sleep'),
          refTo: i === 0 ? fc.constant(undefined) : fc.option(fc.constantFrom(...ids.slice(0, i))),
          forward: i === ids.length - 1 ? fc.constant(undefined) : fc.option(fc.constantFrom(...ids.slice(i + 1)), { freq: 5 }),
        })
        .map(({ tool, refTo, forward }) => ({
          id,
          tool,
          args: {
            ...(tool === 'sleep' ? { ms: 0 } : { path: '/repo/shared', content: 'x' }),
            ...(refTo ? { v: `\${${refTo}.output}` } : {}),
            ...(forward ? { w: `\${${forward}.output.path}` } : {}),
          },
        })),
    ),
  ),
);

const calls = fc.oneof(
  { weight: 12, arbitrary: fc.array(call, { maxLength: 7 }) },
  { weight: 4, arbitrary: linkedCalls },
  { weight: 1, arbitrary: fc.constant(Array.from({ length: 65 }, (_, i) => ({ id: `c${i}`, tool: 'echo' }))) },
  { weight: 1, arbitrary: junk },
);
/** Args a tool of the catalog accepts. */
const validArgs = (tool: string): fc.Arbitrary<Record<string, unknown>> => {
  switch (tool) {
    case 'sleep':
      return fc.record({ ms: fc.integer({ min: 0, max: 20 }) });
    case 'fail':
      return fc.record({ message: fc.string({ maxLength: 20 }), retryable: fc.boolean() }, { requiredKeys: [] });
    case 'read_file':
    case 'write_file':
      return fc.record({ path: fc.constantFrom('/repo/a', '/repo', '/repo/a/b', '*'), content: fc.string({ maxLength: 10 }) });
    case 'deploy':
      return fc.record({ name: fc.constantFrom('web', 'api') });
    default:
      return fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(fc.jsonValue({ maxDepth: 2 }), ref), { maxKeys: 4 });
  }
};
const validCall = fc
  .constantFrom(...TOOLS, 'echo', 'echo', 'sleep', 'read_file', 'write_file')
  .chain((tool) => fc.record({ id: fc.constantFrom('c1', 'c2', 'c3', 'c4', 'c5', 'c6'), tool: fc.constant(tool), args: validArgs(tool) }));
/** A batch the API accepts (a few may still fail calls, by design: unknown refs, denied tools). */
const validBatch = fc.record(
  {
    calls: fc.oneof(fc.uniqueArray(validCall, { selector: (c) => c.id, minLength: 1, maxLength: 6 }), linkedCalls),
    failure: fc.constantFrom('fail_fast', 'partial', 'replan'),
    tags: fc.dictionary(fc.string({ minLength: 1, maxLength: 10 }), fc.string({ maxLength: 20 }), { maxKeys: 3 }),
    tenant: fc.constantFrom('acme', 'ops', 'trial', 'default', '__proto__', 'constructor', 'toString', 'valueOf'),
    waitMs: fc.integer({ min: 0, max: 20 }),
  },
  { requiredKeys: ['calls'] },
);

/** Every object or array inside a JSON value, with the key that leads to it from its parent. */
function containers(v: unknown, out: unknown[] = []): unknown[] {
  if (v !== null && typeof v === 'object') {
    out.push(v);
    for (const child of Object.values(v)) containers(child, out);
  }
  return out;
}

type Mutation = 'replace' | 'delete' | 'add' | 'protoKey' | 'wrap' | 'stringify' | 'huge';
/** One mutation at a random place of a batch: the request is now (most likely) one step off. */
function mutated(source: fc.Arbitrary<unknown>): fc.Arbitrary<Record<string, unknown>> {
  return fc
    .tuple(
      source,
      fc.nat(),
      fc.nat(),
      fc.constantFrom<Mutation>('replace', 'replace', 'delete', 'add', 'protoKey', 'wrap', 'stringify', 'huge'),
      junk,
      fc.oneof(protoKey, fc.string({ maxLength: 8 })),
    )
    .map(([b, where, which, op, value, key]) => {
      const copy = structuredClone(b) as Record<string, unknown>;
      const spots = containers(copy);
      const spot = spots[where % spots.length] as Record<string, unknown>;
      const keys = Object.keys(spot);
      const k = keys.length > 0 ? (keys[which % keys.length] as string) : key;
      if (op === 'replace') spot[k] = value;
      else if (op === 'delete') delete spot[k];
      else if (op === 'add') spot[Array.isArray(spot) ? String(keys.length) : key] = value;
      else if (op === 'protoKey') Object.defineProperty(spot, key, { value, enumerable: true, configurable: true, writable: true });
      else if (op === 'wrap') spot[k] = [spot[k]];
      else if (op === 'stringify') spot[k] = JSON.stringify(spot[k]) ?? 'undefined';
      else spot[k] = 'ẍ'.repeat(200_000);
      return copy;
    });
}
const mutatedBatch = mutated(validBatch);

// ---- the cases of issue #20 ----------------------------------------------------------------------

const GROW_SEEDS = ['x'.repeat(64), '"\\'.repeat(20), 'ẍ'.repeat(40), '${c0.output}', '$${x}'];
/**
 * References that grow: each call puts the output of the one before into its args `k` times, inside a
 * longer string (escaped once more at each level: the doubling batch is k = 2) or as whole values.
 */
const growingRefs = fc
  .record({
    n: fc.integer({ min: 2, max: 30 }),
    k: fc.integer({ min: 1, max: 40 }),
    seed: fc.constantFrom(...GROW_SEEDS),
    whole: fc.boolean(),
    tool: fc.constantFrom('echo', 'OpenWeatherMap.get_current_weather'),
  })
  .map(({ n, k, seed, whole, tool }) => {
    const calls: unknown[] = [{ id: 'c0', tool, args: { v: seed } }];
    for (let i = 1; i < n; i++) {
      const r = `\${c${i - 1}.output}`;
      calls.push({
        id: `c${i}`,
        tool,
        args: whole ? Object.fromEntries(Array.from({ length: k }, (_, j) => [`v${j}`, r])) : { v: r.repeat(k) },
      });
    }
    return { calls, waitMs: 20 };
  });
/** Templates that name their own call, each other, or themselves through the tool's name. */
const selfRefs = fc
  .constantFrom(
    [{ id: 'c1', tool: 'echo', args: { v: '${c1.output}' } }],
    [{ id: 'c1', tool: 'echo', args: { v: '${echo.output}${echo.output}' } }],
    [{ id: 'c1', tool: 'echo', args: { v: '${self.args.v}' } }],
    [
      { id: 'c1', tool: 'echo', args: { v: '${c2.output}' } },
      { id: 'c2', tool: 'echo', args: { v: '${c1.output}${c1.output}' } },
    ],
    [{ id: 'c1', tool: 'write_file', args: { path: '/repo/${c1.output.path}', content: '${c1.output}' } }],
    [
      { id: 'c1', tool: 'echo', args: { v: 'x' } },
      { id: 'c2', tool: 'echo', args: { v: '${c2.output}${c1.output}' } },
    ],
  )
  .map((calls) => ({ calls, waitMs: 20 }));
/** Tags past the caps: too many, keys and values at and past their lengths. */
const hugeTags = fc
  .constantFrom(
    [63, 10, 10],
    [64, 100, 500],
    [65, 4, 1],
    [500, 4, 1],
    [5000, 4, 1],
    [1, 101, 1],
    [1, 10_000, 1],
    [1, 10, 501],
    [1, 10, 200_000],
    [2000, 100, 500],
  )
  .map(([count, key, value]) => ({
    calls: [{ id: 'c1', tool: 'echo' }],
    tags: Object.fromEntries(
      Array.from({ length: count as number }, (_, i) => [`${i}`.padEnd(key as number, 'k'), 'v'.repeat(value as number)]),
    ),
  }));
const hardCases = fc.oneof(growingRefs, selfRefs, hugeTags);

const wildBatch = fc.record(
  {
    calls,
    failure: fc.oneof({ weight: 4, arbitrary: fc.constantFrom('fail_fast', 'partial', 'replan') }, { weight: 1, arbitrary: junk }),
    tags: fc.oneof(
      { weight: 4, arbitrary: fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 20 }), { maxKeys: 3 }) },
      { weight: 1, arbitrary: junk },
    ),
    tenant: fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom('acme', 'ops', 'trial', 'default', '__proto__', 'constructor', 'toString') },
      { weight: 1, arbitrary: junk },
    ),
    // Valid waits stay short (a valid batch with a long wait would only slow the fuzzing down).
    waitMs: fc.oneof(
      { weight: 3, arbitrary: fc.integer({ min: 0, max: 20 }) },
      { weight: 1, arbitrary: fc.constantFrom(-1, 60_001, 1.5, '5', null, true, 1e21, [], {}) },
    ),
    open: fc.oneof(fc.boolean(), junk),
    openai: fc.oneof(
      fc.record(
        {
          role: fc.constantFrom('assistant', 'user'),
          content: fc.oneof(fc.constant(null), fc.string()),
          tool_calls: fc.array(
            fc.record(
              {
                id: callId,
                type: fc.constantFrom('function', 'nope'),
                function: fc.record(
                  { name: toolName, arguments: fc.oneof(fc.json({ maxDepth: 2 }), fc.string(), junk) },
                  { requiredKeys: [] },
                ),
              },
              { requiredKeys: [] },
            ),
            { maxLength: 4 },
          ),
        },
        { requiredKeys: [] },
      ),
      junk,
    ),
    anthropic: fc.oneof(
      fc.record(
        {
          role: fc.constantFrom('assistant', 'user'),
          content: fc.array(
            fc.oneof(
              fc.record(
                { type: fc.constantFrom('tool_use', 'text'), id: callId, name: toolName, input: args, text: fc.string() },
                { requiredKeys: [] },
              ),
              junk,
            ),
            { maxLength: 4 },
          ),
        },
        { requiredKeys: [] },
      ),
      junk,
    ),
    [PROTO_KEYS[1] as string]: junk,
  },
  { requiredKeys: [] },
);
const batch = fc.oneof(
  { weight: 4, arbitrary: validBatch },
  { weight: 4, arbitrary: mutatedBatch },
  { weight: 2, arbitrary: wildBatch },
  { weight: 1, arbitrary: hardCases },
  // A mutator that draws from the cases of issue #20.
  { weight: 1, arbitrary: mutated(hardCases) },
);
const reviewBody = fc.record(
  { decision: fc.oneof(fc.constantFrom('approve', 'reject', 'edit'), junk), args, comment: fc.oneof(fc.string(), junk, huge) },
  { requiredKeys: [] },
);
const invokeBody = fc.record({ args, tenant: fc.oneof(fc.constantFrom('acme', 'ops'), junk) }, { requiredKeys: [] });

function deepText(depth: number, kind: 'object' | 'array', where: 'args' | 'body' | 'tags' | 'calls'): string {
  const open = kind === 'object' ? '{"a":'.repeat(depth) : '['.repeat(depth);
  const close = kind === 'object' ? '}'.repeat(depth) : ']'.repeat(depth);
  const inner = `${open}1${close}`;
  if (where === 'body') return inner;
  if (where === 'args') return `{"calls":[{"id":"c1","tool":"echo","args":{"x":${inner}}}]}`;
  if (where === 'tags') return `{"calls":[],"tags":{"k":${inner}}}`;
  return `{"calls":[${inner}]}`;
}

/** Raw body text: JSON of a structured body, or text no JSON encoder would write. */
const bodyText: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 10, arbitrary: batch.map((b) => JSON.stringify(b)) },
  { weight: 2, arbitrary: reviewBody.map((b) => JSON.stringify(b)) },
  { weight: 2, arbitrary: invokeBody.map((b) => JSON.stringify(b)) },
  { weight: 2, arbitrary: fc.record({ calls }).map((b) => JSON.stringify(b)) },
  { weight: 1, arbitrary: fc.constant(undefined) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '',
      ' ',
      '\n',
      'null',
      'true',
      '0',
      '""',
      '[]',
      '{}',
      '{',
      '{"calls":',
      '{"calls":[{"id":"c1"',
      '\u0000',
      '\uFEFF{"calls":[]}',
      'undefined',
      'NaN',
    ),
  },
  { weight: 1, arbitrary: fc.json({ maxDepth: 4 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.integer({ min: 65, max: 20_000 }),
        fc.constantFrom('object', 'array') as fc.Arbitrary<'object' | 'array'>,
        fc.constantFrom('args', 'body', 'tags', 'calls') as fc.Arbitrary<'args' | 'body' | 'tags' | 'calls'>,
      )
      .map(([d, k, w]) => deepText(d, k, w)),
  },
  {
    // Prototype keys spliced into otherwise valid JSON, where a JSON encoder would never put them.
    weight: 2,
    arbitrary: fc.tuple(batch, protoKey, fc.nat()).map(([b, k, n]) => {
      const text = JSON.stringify(b);
      const spots = [...text.matchAll(/\{/g)].map((m) => m.index as number);
      const at = spots[n % spots.length] ?? 0;
      return `${text.slice(0, at + 1)}"${k}":{"polluted":true,"calls":[{"id":"p","tool":"echo"}]}${text.length > at + 2 ? ',' : ''}${text.slice(at + 1)}`;
    }),
  },
  { weight: 1, arbitrary: fc.tuple(batch, fc.nat()).map(([b, n]) => JSON.stringify(b).slice(0, n % 50)) },
);

const latin1 = fc.string({
  unit: fc
    .integer({ min: 0x20, max: 0xff })
    .filter((c) => c !== 0x7f)
    .map((c) => String.fromCharCode(c)),
  maxLength: 60,
});
const ascii = fc.string({ unit: 'grapheme-ascii', maxLength: 60 }).map((s) => s.replace(/[\r\n\0]/g, ''));

/**
 * Request headers. `focused`: a valid key and a JSON content type nearly always (so the body is what
 * gets tested); otherwise anything, absent headers included.
 */
function headersArb(value: fc.Arbitrary<string>, focused: boolean): fc.Arbitrary<Record<string, string>> {
  const valid = focused ? 30 : 8;
  const authorization = fc.oneof(
    { weight: valid, arbitrary: fc.constantFrom(OPERATOR, OPERATOR, AGENT, 'bearer operator-key', `Bearer   operator-key  `) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        '',
        'Bearer',
        'Bearer ',
        'Basic b3BlcmF0b3Ita2V5',
        'Bearer wrong',
        'Bearer operator-key extra',
        `Bearer ${'k'.repeat(10_000)}`,
        'operator-key',
      ),
    },
    { weight: 1, arbitrary: value.map((v) => `Bearer ${v}`) },
  );
  const contentType = fc.oneof(
    { weight: valid, arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8') },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        'APPLICATION/JSON',
        'application/vnd.api+json',
        'application/json; charset=latin1',
        'text/plain',
        'text/html',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/octet-stream',
        'application/jsonx',
        'json',
        ';',
        '',
      ),
    },
    { weight: 1, arbitrary: value },
  );
  const rest = fc.record(
    {
      'idempotency-key': fc.oneof(
        fc.constantFrom('k1', 'k2', '', ' ', 'k'.repeat(255), 'k'.repeat(256), '__proto__', 'constructor'),
        value,
      ),
      'last-event-id': fc.oneof(
        fc.constantFrom('0', '1', '-1', '1.5', '1e3', 'abc', '', ' 2', '99999999999999999999', 'NaN', 'Infinity', '0x10'),
        value,
      ),
      'x-request-id': fc.oneof(fc.constantFrom('r1', ''), value),
      accept: fc.constantFrom('application/json', 'text/event-stream', '*/*', 'text/html'),
    },
    { requiredKeys: [] },
  );
  if (focused) {
    return fc
      .tuple(authorization, contentType, rest)
      .map(([a, c, r]) => ({ authorization: a, 'content-type': c, ...r }) as Record<string, string>);
  }
  return fc
    .tuple(fc.option(authorization), fc.option(contentType), rest)
    .map(
      ([a, c, r]) =>
        ({ ...(a !== null ? { authorization: a } : {}), ...(c !== null ? { 'content-type': c } : {}), ...r }) as Record<string, string>,
    );
}

interface Seeds {
  runs: string[];
  ended: string[];
  reviews: string[];
}

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'];
const TEMPLATES = [
  '/v1/runs',
  '/v1/plan',
  '/v1/runs/{id}',
  '/v1/runs/{id}/graph',
  '/v1/runs/{id}/events',
  '/v1/runs/{id}/cancel',
  '/v1/runs/{id}/replan',
  '/v1/runs/{id}/recording',
  '/v1/runs/{id}/calls',
  '/v1/runs/{id}/seal',
  '/v1/runs/{id}/messages',
  '/v1/reviews',
  '/v1/reviews/{id}',
  '/v1/tools',
  '/v1/tools/{name}/invoke',
  '/v1/stream',
  '/healthz',
  '/metrics',
  '/openapi.json',
  '/docs',
  '/',
  '/v1',
  '/v1/',
  '/assets/app.js',
];

function pathSegment(seeds: Seeds) {
  return fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...seeds.runs, ...seeds.reviews) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        ...PROTO_KEYS,
        '..',
        '.',
        '%2e%2e',
        '%00',
        '%ZZ',
        '%',
        'run_',
        'x'.repeat(600),
        '%F0%9F%92%A9',
        ' ',
        'a%2Fb',
        ...TOOLS,
      ),
    },
    { weight: 1, arbitrary: unicode.map((s) => encodeURIComponent(s)) },
    { weight: 1, arbitrary: ascii.map((s) => s.replace(/[/?#]/g, '')) },
  );
}

const QUERY_KEYS = [
  'status',
  'tag',
  'tenant',
  'limit',
  'cursor',
  'from',
  'format',
  'runId',
  'waitMs',
  '__proto__',
  'constructor',
  '__proto__[polluted]',
  'a[b]',
  '',
];
const queryString = fc.oneof(
  { weight: 3, arbitrary: fc.constant('') },
  {
    weight: 4,
    arbitrary: fc
      .array(
        fc.tuple(
          fc.oneof(fc.constantFrom(...QUERY_KEYS), fc.string({ maxLength: 6 })),
          fc.oneof(
            fc.constantFrom(
              'running',
              'succeeded',
              'bogus',
              'k:v',
              'k',
              '1',
              '0',
              '-1',
              '200',
              '201',
              '1.5',
              'mermaid',
              'dot',
              'json',
              'pending',
              'decided',
              'acme',
              'x'.repeat(600),
              '',
            ),
            unicode,
          ),
        ),
        { maxLength: 5 },
      )
      .map((pairs) => `?${pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&')}`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '?',
      '?&&&',
      '?%',
      '?a=%',
      '?%%=%%',
      '?status',
      '?limit=1&limit=2',
      '?cursor=%FF%FE',
      '?from=1&from=x',
      '?a=1#frag',
      `?${'a=1&'.repeat(2000)}`,
    ),
  },
);

interface Req {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/**
 * A request: most aim at one endpoint with a body for it (submit, plan, reviews, replan, invoke) or at
 * the read endpoints of real runs, with good credentials; the rest are random in every part.
 */
function requestArb(seeds: Seeds, headerValue: fc.Arbitrary<string>): fc.Arbitrary<Req> {
  const seg = pathSegment(seeds);
  const focused = headersArb(headerValue, true);
  const json = (a: fc.Arbitrary<unknown>) => a.map((b) => JSON.stringify(b) as string | undefined);
  const aimed = (
    method: fc.Arbitrary<string>,
    path: fc.Arbitrary<string>,
    body: fc.Arbitrary<string | undefined>,
    query: fc.Arbitrary<string> = fc.constant(''),
  ) => fc.record({ method, url: fc.tuple(path, query).map(([p, q]) => p + q), headers: focused, body });
  const seeded = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...seeds.runs) }, { weight: 1, arbitrary: seg });
  const review = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...seeds.reviews) }, { weight: 1, arbitrary: seg });
  const runPaths = fc
    .tuple(fc.constantFrom('', '/graph', '/recording', '/events', '/messages'), seeded)
    .map(([suffix, id]) => `/v1/runs/${id}${suffix}`);

  const routed = fc.tuple(fc.constantFrom(...TEMPLATES), seg, seg).map(([t, a, b]) => t.replace('{id}', a).replace('{name}', b));
  const randomPath = fc.oneof(
    fc.array(seg, { minLength: 1, maxLength: 5 }).map((s) => `/${s.join('/')}`),
    fc.constantFrom('//v1/runs', '/v1//runs', '/v1/runs/', '/V1/RUNS', '/v1/runs/%', '/v1/runs/..%2F..%2Fetc', '/%2e%2e/', '/v1/runs?'),
  );
  const wild = fc
    .record({
      method: fc.oneof({ weight: 6, arbitrary: fc.constantFrom('GET', 'POST') }, { weight: 1, arbitrary: fc.constantFrom(...METHODS) }),
      path: fc.oneof({ weight: 6, arbitrary: routed }, { weight: 1, arbitrary: randomPath }),
      query: queryString,
      headers: headersArb(headerValue, false),
      body: bodyText,
    })
    .map(({ method, path: p, query, headers, body }) => ({ method, url: `${p}${query}`, headers, body }));

  return fc.oneof(
    {
      weight: 30,
      arbitrary: aimed(
        fc.constant('POST'),
        fc.constant('/v1/runs'),
        fc.oneof({ weight: 6, arbitrary: json(batch) }, { weight: 1, arbitrary: bodyText }),
      ),
    },
    {
      weight: 10,
      arbitrary: aimed(
        fc.constant('POST'),
        fc.constant('/v1/plan'),
        fc.oneof({ weight: 6, arbitrary: json(batch) }, { weight: 1, arbitrary: bodyText }),
      ),
    },
    {
      weight: 5,
      arbitrary: aimed(
        fc.constant('POST'),
        review.map((id) => `/v1/reviews/${id}`),
        json(reviewBody),
      ),
    },
    { weight: 3, arbitrary: aimed(fc.constant('GET'), fc.constant('/v1/reviews'), fc.constant(undefined), queryString) },
    {
      weight: 4,
      arbitrary: aimed(
        fc.constant('POST'),
        seeded.map((id) => `/v1/runs/${id}/replan`),
        json(fc.record({ calls }, { requiredKeys: [] })),
      ),
    },
    {
      weight: 3,
      arbitrary: aimed(
        fc.constant('POST'),
        seeded.map((id) => `/v1/runs/${id}/cancel`),
        fc.constantFrom(undefined, '', '{}', 'null', '{"x":1}'),
      ),
    },
    {
      weight: 4,
      arbitrary: aimed(
        fc.constant('POST'),
        fc.oneof(fc.constantFrom(...TOOLS), seg).map((t) => `/v1/tools/${encodeURIComponent(t)}/invoke`),
        json(invokeBody),
      ),
    },
    { weight: 8, arbitrary: aimed(fc.constantFrom('GET', 'GET', 'HEAD'), runPaths, fc.constant(undefined), queryString) },
    { weight: 4, arbitrary: aimed(fc.constant('GET'), fc.constant('/v1/runs'), fc.constant(undefined), queryString) },
    { weight: 25, arbitrary: wild },
  );
}

// ---- checking one answer -------------------------------------------------------------------------

interface Answer {
  status: number;
  contentType: string;
  text: string;
}

function describeReq(r: Req): string {
  const body = r.body === undefined ? '(none)' : r.body.length > 400 ? `${r.body.slice(0, 400)}… (${r.body.length} chars)` : r.body;
  const headers = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, v.length > 100 ? `${v.slice(0, 100)}…` : v]));
  return `${r.method} ${r.url.length > 300 ? `${r.url.slice(0, 300)}…` : r.url}\nheaders: ${JSON.stringify(headers)}\nbody: ${body}`;
}

function check(r: Req, a: Answer, logs: () => string): void {
  const where = () => `${describeReq(r)}\n→ ${a.status} ${a.contentType} ${a.text.slice(0, 500)}\nserver log:\n${logs()}`;
  if (a.status >= 500) throw new Error(`a ${a.status} answer\n${where()}`);
  if (a.status >= 400 && r.method !== 'HEAD') {
    if (!/^application\/json/.test(a.contentType)) throw new Error(`a ${a.status} that is not JSON\n${where()}`);
    let body: { error?: { code?: unknown; message?: unknown } };
    try {
      body = JSON.parse(a.text) as typeof body;
    } catch {
      throw new Error(`a ${a.status} whose body does not parse\n${where()}`);
    }
    if (typeof body.error?.code !== 'string' || typeof body.error.message !== 'string')
      throw new Error(`a ${a.status} without { error: { code, message } }\n${where()}`);
  }
}

/** Streams (SSE) never end on their own while the run lives: those go over real HTTP and are cut off. */
function isStream(r: Req): boolean {
  const p = r.url.split('?')[0] as string;
  return (r.method === 'GET' || r.method === 'HEAD') && (/events\/?$/i.test(p) || /stream\/?$/i.test(p));
}

async function overHttp(base: string, r: Req): Promise<Answer> {
  const controller = new AbortController();
  const res = await fetch(base + r.url, {
    method: r.method,
    headers: r.headers,
    ...(r.body !== undefined && r.method !== 'GET' && r.method !== 'HEAD' ? { body: r.body } : {}),
    signal: controller.signal,
  });
  const contentType = res.headers.get('content-type') ?? '';
  if (res.status === 200 && contentType.startsWith('text/event-stream')) {
    controller.abort();
    return { status: res.status, contentType, text: '' };
  }
  return { status: res.status, contentType, text: await res.text() };
}

// ---- raw requests: what only Node's HTTP parser sees -----------------------------------------------

/** A request as bytes, correct, then maybe broken in one way at the level of HTTP itself. */
type RawMutation =
  | 'none'
  | 'padHeader'
  | 'manyHeaders'
  | 'crInHeader'
  | 'lfInHeader'
  | 'nulInHeader'
  | 'twoLengths'
  | 'negativeLength'
  | 'lengthAndChunked'
  | 'badChunk'
  | 'garbageLine'
  | 'spaceInPath'
  | 'noHost'
  | 'http10'
  | 'expectHuge'
  | 'expectSmall'
  | 'badVersion'
  | 'truncated';
const RAW_MUTATIONS: RawMutation[] = [
  'none',
  'padHeader',
  'padHeader',
  'padHeader',
  'manyHeaders',
  'crInHeader',
  'lfInHeader',
  'nulInHeader',
  'twoLengths',
  'negativeLength',
  'lengthAndChunked',
  'badChunk',
  'garbageLine',
  'spaceInPath',
  'noHost',
  'http10',
  'expectHuge',
  'expectSmall',
  'badVersion',
  'truncated',
];
/** Header block sizes around Node's 16 KiB limit (maxHeaderSize). */
const PADS = [8_000, 16_000, 16_200, 16_300, 16_384, 16_400, 16_500, 20_000, 64_000];

const rawRequest = fc
  .record({
    method: fc.constantFrom('GET', 'POST', 'HEAD'),
    path: fc.constantFrom('/v1/runs', '/v1/plan', '/healthz', '/v1/stream', '/v1/tools', '/metrics'),
    body: fc.oneof(
      batch.map((b) => JSON.stringify(b)),
      fc.constant(''),
    ),
    mutation: fc.constantFrom(...RAW_MUTATIONS),
    pad: fc.constantFrom(...PADS),
    garbage: fc.oneof(fc.constantFrom('garbage', 'GET', '\u0000\u0001', 'GET / HTTP/9.9', '\u00ff\u00fe'), latin1),
  })
  .map(({ method, path: p, body, mutation, pad, garbage }) => {
    const sendBody = method === 'POST' ? body : '';
    let head = `${method} ${mutation === 'spaceInPath' ? `${p} x` : p} ${mutation === 'http10' ? 'HTTP/1.0' : mutation === 'badVersion' ? 'HTTP/1.x' : 'HTTP/1.1'}\r\n`;
    if (mutation !== 'noHost') head += 'Host: 127.0.0.1\r\n';
    head += `Authorization: ${OPERATOR}\r\nContent-Type: application/json\r\nConnection: close\r\n`;
    if (mutation === 'padHeader') head += `X-Pad: ${'p'.repeat(Math.max(0, pad - head.length - 12))}\r\n`;
    if (mutation === 'manyHeaders') for (let i = 0; i < pad / 16; i++) head += `X-H${i}: v\r\n`;
    if (mutation === 'crInHeader') head += 'X-Bad: a\rb\r\n';
    if (mutation === 'lfInHeader') head += 'X-Bad: a\nb: c\r\n';
    if (mutation === 'nulInHeader') head += 'X-Bad: a\u0000b\r\n';
    let tail = sendBody;
    if (mutation === 'twoLengths') head += `Content-Length: ${sendBody.length}\r\nContent-Length: ${sendBody.length + 1}\r\n`;
    else if (mutation === 'negativeLength') head += 'Content-Length: -1\r\n';
    else if (mutation === 'lengthAndChunked') head += `Content-Length: ${sendBody.length}\r\nTransfer-Encoding: chunked\r\n`;
    else if (mutation === 'badChunk') {
      head += 'Transfer-Encoding: chunked\r\n';
      tail = `zz\r\n${sendBody}\r\n0\r\n\r\n`;
    } else if (mutation === 'expectHuge') head += 'Content-Length: 100000000\r\nExpect: 100-continue\r\n';
    else if (mutation === 'expectSmall') head += `Content-Length: ${Buffer.byteLength(sendBody)}\r\nExpect: 100-continue\r\n`;
    else if (sendBody) head += `Content-Length: ${Buffer.byteLength(sendBody)}\r\n`;
    if (mutation === 'expectHuge') tail = '';
    let bytes = mutation === 'garbageLine' ? `${garbage}\r\n\r\n` : `${head}\r\n${tail}`;
    if (mutation === 'truncated') bytes = bytes.slice(0, Math.max(1, Math.floor(bytes.length / 2)));
    return { method, path: p, mutation, bytes };
  });

/** The first final (non-1xx) answer on a fresh connection: status, head and body as text. */
function rawExchange(
  port: number,
  bytes: string,
  waitMs: number,
  head = false,
): Promise<{ status: number; head: string; body: string } | undefined> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    let answer: { status: number; head: string; body: string } | undefined;
    const parse = () => {
      const text = out.replace(/^(HTTP\/1\.1 1\d\d[^\r]*\r\n\r\n)+/, '');
      const m = /^HTTP\/1\.[01] (\d{3})[^\r]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/.exec(text);
      if (!m) return undefined;
      const h = (m[2] as string).toLowerCase();
      const length = /content-length: (\d+)/.exec(h);
      const body = m[3] as string;
      // Whole once the body declared has come (a HEAD has none; a stream declares no length: its
      // head is the answer).
      const need = head || !length ? 0 : Number(length[1]);
      if (Buffer.byteLength(body) < need) return undefined;
      return { status: Number(m[1]), head: h, body };
    };
    const finish = () => {
      clearTimeout(timer);
      s.destroy();
      resolve(answer ?? parse());
    };
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      out += d;
      answer = parse();
      if (answer) finish();
    });
    s.on('error', () => {});
    // A request cut short (or none at all) is not answered until the server's request timeout: give
    // up on those sooner. (Half-closing instead would abort any request still being served.)
    const timer = setTimeout(finish, waitMs);
    s.on('close', finish);
    s.write(Buffer.from(bytes, 'utf8'));
  });
}

// ---- the test ------------------------------------------------------------------------------------

describe('fuzzing the HTTP API: bad input is a 4xx with an error body, never a 5xx', () => {
  let dir = '';
  let store: Store;
  let service: Service;
  let app: FastifyInstance;
  let base = '';
  let log = '';
  const seeds: Seeds = { runs: [], ended: [], reviews: [] };
  const protoBefore = Object.getOwnPropertyNames(Object.prototype).sort();

  const inject = async (method: string, url: string, body?: unknown, auth = OPERATOR) => {
    const res = await app.inject({
      method: method as 'GET',
      url,
      headers: { authorization: auth, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
    return { status: res.statusCode, body: res.body ? (JSON.parse(res.body) as Record<string, unknown>) : undefined };
  };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-fuzz-'));
    store = openSqliteStore(path.join(dir, 'fuzz.db'));
    const config = parseConfig(CONFIG, 'fuzz.yaml', { env: {} });
    service = new Service({ config, store });
    const sink = new Writable({
      write(chunk, _enc, done) {
        log += String(chunk);
        if (log.length > 200_000) log = log.slice(-100_000);
        done();
      },
    });
    app = buildServer({ service, logger: pino({ level: 'error' }, sink) });
    await app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

    // Seeds, so that random requests also hit real runs and reviews.
    const ended = await inject('POST', '/v1/runs', {
      calls: [
        { id: 'c1', tool: 'echo', args: { a: [{ b: 1 }] } },
        { id: 'c2', tool: 'echo', args: { x: '${c1.output}' } },
      ],
      waitMs: 5000,
    });
    const replan = await inject('POST', '/v1/runs', {
      failure: 'replan',
      calls: [
        { id: 'c1', tool: 'fail', args: { message: 'no' } },
        { id: 'c2', tool: 'echo', args: { x: '${c1.output}' } },
      ],
      waitMs: 5000,
    });
    const waiting = await inject('POST', '/v1/runs', {
      calls: [
        { id: 'c1', tool: 'deploy', args: { name: 'web' } },
        { id: 'c2', tool: 'echo' },
      ],
      waitMs: 5000,
    });
    const agents = await inject('POST', '/v1/runs', { calls: [{ id: 'c1', tool: 'echo' }], waitMs: 5000 }, AGENT);
    for (const r of [ended, replan, waiting, agents]) expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(ended.body?.status).toBe('succeeded');
    expect(replan.body?.status).toBe('needs_replan');
    expect(agents.body?.status).toBe('succeeded');
    seeds.ended.push(ended.body?.id as string, agents.body?.id as string, replan.body?.id as string);
    seeds.runs.push(...seeds.ended, waiting.body?.id as string);
    const reviews = await inject('GET', `/v1/reviews?runId=${waiting.body?.id as string}`);
    seeds.reviews.push(...((reviews.body?.items ?? []) as { id: string }[]).map((r) => r.id));
    expect(seeds.reviews).toHaveLength(1);
  });

  afterAll(async () => {
    await app?.close();
    await service?.engine.close();
    store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`${INJECTED} random requests through app.inject`, { timeout: 300_000 }, async () => {
    let n = 0;
    /** Answers per method, route and status, and the time they took. */
    const tally: Record<string, { n: number; ms: number }> = {};
    await fc.assert(
      fc.asyncProperty(requestArb(seeds, latin1), async (r) => {
        n++;
        const t0 = performance.now();
        const a = isStream(r)
          ? await overHttp(base, {
              ...r,
              headers: Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, v.replace(/[^\x20-\x7e]/g, '?')])),
            })
          : await app
              .inject({ method: r.method as 'GET', url: r.url, headers: r.headers, ...(r.body !== undefined ? { payload: r.body } : {}) })
              .then((res) => ({
                status: res.statusCode,
                contentType: String(res.headers['content-type'] ?? ''),
                text: res.body,
              }));
        check(r, a, () => log);
        const k = `${r.method} ${(r.url.split('?')[0] as string).replace(/run_\w+|rev_\w+/g, ':id').slice(0, 40)} ${a.status}`;
        const e = (tally[k] ??= { n: 0, ms: 0 });
        e.n++;
        e.ms += performance.now() - t0;
      }),
      { numRuns: INJECTED, seed: SEED, endOnFailure: true },
    );
    // FUZZ_PROFILE=1 prints where the requests went and where the time went.
    if (process.env.FUZZ_PROFILE) {
      const rows = Object.entries(tally).sort((x, y) => y[1].ms - x[1].ms);
      console.log(rows.map(([key, v]) => `${v.ms.toFixed(0).padStart(6)} ms ${String(v.n).padStart(5)}× ${key}`).join('\n'));
    }
    expect(n).toBeGreaterThanOrEqual(INJECTED);
    // The fuzzing reached past validation: many batches ran, plans were made, reviews and reads were
    // answered (a change that made nearly everything a 401 or a 400 would show here).
    const count = (key: string) => tally[key]?.n ?? 0;
    expect(count('POST /v1/runs 201'), JSON.stringify(tally)).toBeGreaterThan(INJECTED / 40);
    expect(count('POST /v1/plan 200'), JSON.stringify(tally)).toBeGreaterThan(INJECTED / 100);
    expect(count('POST /v1/runs 400'), JSON.stringify(tally)).toBeGreaterThan(INJECTED / 40);
    expect(count('GET /v1/runs/:id 200') + count('GET /v1/runs/:id/graph 200'), JSON.stringify(tally)).toBeGreaterThan(0);
  });

  it(`${OVER_HTTP} random requests over real HTTP`, { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(requestArb(seeds, ascii), async (r) => {
        check(r, await overHttp(base, r), () => log);
      }),
      { numRuns: OVER_HTTP, seed: SEED + 1, endOnFailure: true },
    );
  });

  it(`${RAW} raw requests over a socket: headers near the limits, broken framing, Expect, no Host`, { timeout: 120_000 }, async () => {
    const port = Number(new URL(base).port);
    const seen = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(rawRequest, async (r) => {
        // A stream answers as soon as its head is read: framing broken after that (a body on a GET)
        // can only cut the connection, as the stream's head is already sent.
        const streamCut = r.path === '/v1/stream' && r.method !== 'POST' && ['badChunk', 'lengthAndChunked'].includes(r.mutation);
        const whole = r.mutation !== 'truncated' && r.bytes.trim() !== '' && !streamCut;
        const a = await rawExchange(port, r.bytes, whole ? 15_000 : 200, r.method === 'HEAD');
        const what = () =>
          `${r.mutation}: ${JSON.stringify(r.bytes.slice(0, 300))} → ${a ? `${a.status} ${a.body.slice(0, 300)}` : 'no answer'}\nserver log:\n${log}`;
        if (!a) {
          // Only a request that never finished may go unanswered, or bytes that hold none (empty lines
          // before a request line are skipped, as HTTP allows).
          if (whole) throw new Error(`no answer to a whole request\n${what()}`);
          return;
        }
        seen.set(`${r.mutation} ${a.status}`, (seen.get(`${r.mutation} ${a.status}`) ?? 0) + 1);
        if (a.status >= 500) throw new Error(`a ${a.status} answer\n${what()}`);
        if (a.status >= 400 && r.method !== 'HEAD') {
          if (!a.head.includes('content-type: application/json')) throw new Error(`a ${a.status} that is not JSON\n${what()}`);
          const body = JSON.parse(a.body) as { error?: { code?: unknown; message?: unknown } };
          if (typeof body.error?.code !== 'string' || typeof body.error.message !== 'string')
            throw new Error(`a ${a.status} without the error body\n${what()}`);
        }
      }),
      { numRuns: RAW, seed: SEED + 2, endOnFailure: true },
    );
    // The parser's own answers were reached: a 431 for the big headers, 400s for broken framing, 413 for Expect.
    const keys = [...seen.keys()].join(' ');
    expect(keys).toMatch(/padHeader 431/);
    expect(keys).toMatch(/twoLengths 400/);
    expect(keys).toMatch(/expectHuge 413/);
    expect(keys).toMatch(/noHost 400/);
  });

  it('a body over the size limit is a 413, and a malformed one a 400, over real HTTP', async () => {
    const big = JSON.stringify({ calls: [{ id: 'c1', tool: 'echo', args: { s: 'x'.repeat(33 * 1024 * 1024) } }] });
    const r1 = await fetch(`${base}/v1/runs`, {
      method: 'POST',
      headers: { authorization: OPERATOR, 'content-type': 'application/json' },
      body: big,
    }).catch((e: unknown) => e as Error);
    // The server may close the connection while the client still sends; a response, if any, is a 413.
    if (!(r1 instanceof Error)) {
      expect(r1.status).toBe(413);
      expect(await r1.json()).toMatchObject({ error: { code: 'payload_too_large' } });
    }
    const r2 = await fetch(`${base}/v1/runs`, {
      method: 'POST',
      headers: { authorization: OPERATOR, 'content-type': 'application/json' },
      body: '{"calls":[',
    });
    expect(r2.status).toBe(400);
    expect(await r2.json()).toMatchObject({ error: { code: 'invalid_json' } });
  });

  /*
   * Regression (src/core/limits.ts, found by this file): limits were looked up in plain objects by
   * name (`limits.tenant[tenant] ?? limits.tenant.default`, likewise `limits.tool[tool]` and
   * `limits.rate.tenant[tenant]`), so a tenant named like an Object.prototype property — `constructor`,
   * `toString`, `hasOwnProperty`, `__proto__`, all valid tenant names — found a function or an object
   * instead of its limit, and ran without any tenant limit.
   */
  describe('tenant limits hold for tenants named like Object.prototype properties', () => {
    /** Submits 40 one-call runs at once for a fresh tenant: how many calls run at the same time. */
    const runningAt = async (tenant: string) => {
      const runs = await Promise.all(
        Array.from(
          { length: 40 },
          async () => (await service.submit({ role: 'operator' }, { tenant, calls: [{ id: 'a', tool: 'sleep', args: { ms: 20 } }] })).run,
        ),
      );
      const running = runs.filter((r) => r.calls[0]?.status === 'running').length;
      const ended = await Promise.all(runs.map((r) => service.engine.wait(r.id, 20_000)));
      expect(ended.map((v) => v?.status)).toEqual(runs.map(() => 'succeeded'));
      return running;
    };
    it('control: a tenant runs at most limits.tenant.default (32) calls at once', async () => {
      expect(await runningAt('limits-control')).toBe(32);
    });
    it('tenant hasOwnProperty runs at most 32 calls at once', async () => {
      expect(await runningAt('hasOwnProperty')).toBe(32);
    });
  });

  it('afterwards the server is healthy, runs a batch to the end, and no prototype was polluted', { timeout: 30_000 }, async () => {
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(protoBefore);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    const res = await fetch(`${base}/v1/runs`, {
      method: 'POST',
      headers: { authorization: OPERATOR, 'content-type': 'application/json' },
      body: JSON.stringify({
        calls: [
          { id: 'a', tool: 'sleep', args: { ms: 5 } },
          { id: 'b', tool: 'echo', args: { slept: '${a.output.ms}' } },
          { id: 'c', tool: 'write_file', args: { path: '/repo/x', content: 'y' } },
          { id: 'd', tool: 'read_file', args: { path: '/repo/x' } },
        ],
        waitMs: 20_000,
      }),
    });
    expect(res.status).toBe(201);
    const run = (await res.json()) as { status: string; calls: { id: string; status: string; output: unknown }[] };
    expect(run.status).toBe('succeeded');
    expect(run.calls.find((c) => c.id === 'b')?.output).toEqual({ slept: 5 });
    const listed = await fetch(`${base}/v1/runs?limit=1`, { headers: { authorization: OPERATOR } });
    expect(listed.status).toBe(200);
  });
});
