/**
 * The tool catalog: the validated manifests plus one compiled Ajv check per tool input schema.
 *
 * Schemas are compiled once, when the catalog is built (the config loader compiles them while it
 * validates, on the same Ajv instance, whose cache makes the second compile a lookup). `checkArgs`
 * turns Ajv's errors into one short line, e.g. `/image must be string; must have required property 'name'`.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ArgsCheck, Catalog, ToolManifest } from '../core/tool.js';

/** The Ajv options every tool input schema is compiled with. */
export function createAjv(): Ajv {
  // `format` keywords are not checked (no format plugin is bundled), and Ajv says nothing of them:
  // a log line per schema at start-up would only be noise.
  return new Ajv({ allErrors: true, strict: false, validateFormats: false });
}

/** One Ajv for JSON Schema 2020-12 per draft-07 instance, made when a schema first asks for it. */
const ajv2020s = new WeakMap<Ajv, Ajv2020>();

/** Whether a schema declares JSON Schema 2020-12 (`$schema`); others compile as draft-07, as before. */
export function is2020(schema: Record<string, unknown>): boolean {
  return typeof schema.$schema === 'string' && schema.$schema.includes('2020-12');
}

/**
 * Compiles a JSON Schema with the draft the schema declares: 2020-12 (MCP's default dialect) on an
 * Ajv2020 with the same options, anything else on `ajv` (draft-07). Throws Ajv's error.
 */
export function compileSchema(ajv: Ajv, schema: Record<string, unknown>): ValidateFunction {
  return ajvFor(ajv, schema).compile(schema);
}

/** The Ajv that compiles `schema`: `ajv` (draft-07), or its 2020-12 sibling when the schema declares that draft. */
export function ajvFor(ajv: Ajv, schema: Record<string, unknown>): Ajv {
  if (!is2020(schema)) return ajv;
  let other = ajv2020s.get(ajv);
  if (!other) {
    other = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
    ajv2020s.set(ajv, other);
  }
  return other;
}

/** How many Ajv errors one message lists at most. */
const MAX_ERRORS = 5;

/** One readable line for Ajv's errors: `/image must be string; must have required property 'name'`. */
export function formatAjvErrors(errors: readonly ErrorObject[] | null | undefined): string {
  if (!errors || errors.length === 0) return 'invalid args';
  const lines: string[] = [];
  for (const error of errors) {
    const line = describeAjvError(error);
    if (!lines.includes(line)) lines.push(line);
  }
  const shown = lines.slice(0, MAX_ERRORS);
  if (lines.length > MAX_ERRORS) shown.push(`and ${lines.length - MAX_ERRORS} more`);
  return shown.join('; ');
}

function describeAjvError(error: ErrorObject): string {
  let message = error.message ?? 'is invalid';
  const params = error.params as Record<string, unknown>;
  if (error.keyword === 'additionalProperties' && typeof params.additionalProperty === 'string') {
    message += ` (${JSON.stringify(params.additionalProperty)})`;
  } else if (error.keyword === 'enum' && Array.isArray(params.allowedValues)) {
    message += ` (${params.allowedValues.map((v) => JSON.stringify(v)).join(', ')})`;
  }
  return error.instancePath ? `${error.instancePath} ${message}` : message;
}

/** Compiles a tool's input schema; throws Ajv's error when the schema does not compile. */
export function compileArgsCheck(ajv: Ajv, schema: Record<string, unknown>): ArgsCheck {
  const validate: ValidateFunction = compileSchema(ajv, schema);
  return (args) => (validate(args) ? null : formatAjvErrors(validate.errors));
}

export interface CatalogOptions {
  /** The Ajv instance to compile with (the loader passes the one it validated with). @default createAjv() */
  ajv?: Ajv;
}

/**
 * Builds the catalog. Throws an `Error` naming the tool when an input schema does not compile (the
 * config loader reports that as a config error before it gets here).
 *
 * @example
 * const catalog = createCatalog(config.tools);
 * catalog.checkArgs('deploy', { name: 1 }); // "/name must be string"
 */
export function createCatalog(tools: readonly ToolManifest[], options: CatalogOptions = {}): Catalog {
  const ajv = options.ajv ?? createAjv();
  const byName = new Map<string, { manifest: ToolManifest; check: ArgsCheck | null }>();
  for (const manifest of tools) {
    if (byName.has(manifest.name)) throw new Error(`tool "${manifest.name}" is declared twice`);
    let check: ArgsCheck | null = null;
    if (manifest.input !== undefined) {
      try {
        check = compileArgsCheck(ajv, manifest.input);
      } catch (err) {
        throw new Error(`tool "${manifest.name}": its input schema does not compile: ${(err as Error).message}`);
      }
    }
    byName.set(manifest.name, { manifest, check });
  }
  const list: readonly ToolManifest[] = Object.freeze([...tools]);
  return {
    get: (name) => byName.get(name)?.manifest,
    checkArgs(name, args) {
      const entry = byName.get(name);
      if (!entry) return `unknown tool ${JSON.stringify(name)}`;
      return entry.check ? entry.check(args) : null;
    },
    list: () => list,
  };
}
