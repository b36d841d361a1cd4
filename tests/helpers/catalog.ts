/**
 * Test helpers: tool manifests with defaults and an in-memory Catalog.
 *
 * `checkArgs` here is deliberately tiny (required properties and the JSON types of declared
 * properties); real schema validation with Ajv lives in src/config.
 */
import type { Catalog, ToolManifest } from '../../src/core/tool.js';

/** A full ToolManifest: scope tenant, risk write, not idempotent, 60 s, echo executor, unless overridden. */
export function tool(name: string, partial: Partial<Omit<ToolManifest, 'name'>> = {}): ToolManifest {
  return {
    name,
    scope: 'tenant',
    risk: 'write',
    idempotent: false,
    timeoutMs: 60_000,
    after: [],
    requires: [],
    executor: { kind: 'builtin', name: 'echo' },
    ...partial,
  };
}

function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function typeMatches(expected: string, v: unknown): boolean {
  const actual = jsonType(v);
  if (expected === 'number') return actual === 'number' || actual === 'integer';
  return expected === actual;
}

/** `null` when `args` pass the schema's `required` and `properties[*].type`, else a message. */
export function miniCheck(schema: Record<string, unknown> | undefined, args: unknown): string | null {
  if (!schema) return null;
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return `expected an object, got ${jsonType(args)}`;
  const obj = args as Record<string, unknown>;
  const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
  for (const name of required) if (!Object.hasOwn(obj, name)) return `missing required property ${name}`;
  const props = (schema.properties ?? {}) as Record<string, { type?: string }>;
  for (const [name, prop] of Object.entries(props)) {
    if (!Object.hasOwn(obj, name) || prop.type === undefined) continue;
    if (!typeMatches(prop.type, obj[name])) return `property ${name}: expected ${prop.type}, got ${jsonType(obj[name])}`;
  }
  return null;
}

/** A Catalog over a list of manifests (later duplicates replace earlier ones). */
export function catalogOf(tools: readonly ToolManifest[]): Catalog {
  const byName = new Map(tools.map((t) => [t.name, t]));
  const list = [...byName.values()];
  return {
    get: (name) => byName.get(name),
    checkArgs: (name, args) => miniCheck(byName.get(name)?.input, args),
    list: () => list,
  };
}
