/**
 * What is wrong with a tool's input schema (DESIGN §2), said as the keyword and value at fault:
 * `tools[0].input.type: "dict" is not a JSON Schema type`, not the meta-schema validator's list of
 * every alternative it tried (`must be equal to one of the allowed values, must be array, must match a
 * schema in anyOf`).
 */
import type { Ajv, ErrorObject } from 'ajv';
import { ajvFor, compileSchema } from './catalog.js';

/** The JSON Schema type names. */
const TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array', 'null'];

/** A problem of a schema: where in it (keys under `input`), and what. */
export interface SchemaProblem {
  path: (string | number)[];
  message: string;
}

/** The first problem of `schema`, or undefined when it compiles. */
export function schemaProblem(ajv: Ajv, schema: Record<string, unknown>): SchemaProblem | undefined {
  try {
    compileSchema(ajv, schema);
    return undefined;
  } catch (err) {
    const errors = metaErrors(ajv, schema);
    if (errors.length === 0) return { path: [], message: `expected a JSON Schema that compiles, got an error: ${(err as Error).message}` };
    return describe(schema, errors);
  }
}

/** The meta-schema's errors for `schema` (validated with the draft it declares). */
function metaErrors(ajv: Ajv, schema: Record<string, unknown>): ErrorObject[] {
  const own = ajvFor(ajv, schema);
  own.validateSchema(schema);
  return [...(own.errors ?? [])];
}

/** The deepest place the meta-schema found wrong, in words. */
function describe(schema: Record<string, unknown>, errors: readonly ErrorObject[]): SchemaProblem {
  const deepest = [...errors].sort((a, b) => depth(b.instancePath) - depth(a.instancePath))[0] as ErrorObject;
  const at = deepest.instancePath;
  const path = pointer(at);
  const value = valueAt(schema, path);
  const here = errors.filter((e) => e.instancePath === at);
  const shown = JSON.stringify(value) ?? String(value);
  const last = path[path.length - 1];
  const inType = last === 'type' || path[path.length - 2] === 'type';
  if (inType && (typeof value === 'string' || typeof value === 'number'))
    return { path, message: `${shown} is not a JSON Schema type (expected one of ${TYPES.join(', ')})` };
  const typeErr = here.find((e) => e.keyword === 'type');
  if (typeErr) {
    const want = (typeErr.params as { type?: string | string[] }).type;
    const words = Array.isArray(want) ? want.join(' or ') : String(want);
    return { path, message: `${shown} is not valid for ${String(last ?? 'the schema')}: expected ${article(words)}` };
  }
  const min = here.find((e) => e.keyword === 'minimum' || e.keyword === 'minItems' || e.keyword === 'minLength');
  if (min) return { path, message: `${shown} is not valid for ${String(last)}: it ${min.message ?? 'is too small'}` };
  return { path, message: `${shown} is not valid for ${String(last ?? 'the schema')}: it ${here[0]?.message ?? 'is invalid'}` };
}

function article(word: string): string {
  return /^[aeiou]/.test(word) ? `an ${word}` : `a ${word}`;
}

function depth(instancePath: string): number {
  return instancePath === '' ? 0 : instancePath.split('/').length;
}

/** A JSON pointer's keys, array indexes as numbers. */
function pointer(p: string): (string | number)[] {
  if (p === '') return [];
  return p
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^(0|[1-9][0-9]*)$/.test(s) ? Number(s) : s));
}

function valueAt(v: unknown, path: readonly (string | number)[]): unknown {
  let x = v;
  for (const k of path) {
    if (x === null || typeof x !== 'object') return undefined;
    x = (x as Record<string | number, unknown>)[k];
  }
  return x;
}
