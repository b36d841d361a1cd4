/**
 * Names every model takes (DESIGN §11). OpenAI and Anthropic take tool names of 1–64 characters
 * `[a-zA-Z0-9_-]` only, and real catalogs use dotted names (`spotify.play`, `math.gcd`). Each tool is
 * exported to a model under a vendor-safe name, and a model's call of that name runs the real tool.
 *
 * The mapping, for a set of names:
 * - a name the vendors take is exported as itself (so no such name ever changes);
 * - any other name has each character outside `[a-zA-Z0-9_-]` replaced by `_` (`spotify.play` →
 *   `spotify_play`), cut to 64 characters (an empty one becomes `tool`);
 * - when that is taken (by a name exported as itself, or by an earlier renamed one), the first free of
 *   `_2`, `_3`, … is appended (the base cut to leave room), the renamed names taken in sorted order
 *   (UTF-16 code units): the result does not depend on the order of the catalog.
 * So the mapping is injective, and `tool(exported(name)) === name` for every name of the set.
 *
 * Pure, and shared: the API (`GET /v1/tools?format=…`, `POST /v1/runs` with `openai`/`anthropic`,
 * `/messages`), the CLI, the stream feeders and the framework adapters all use it.
 */

/** Tool names that OpenAI and Anthropic accept. */
export const MODEL_TOOL_NAME_RE = /^[a-zA-Z0-9_-]{1,64}$/;

/** The longest name the vendors take. */
export const MAX_MODEL_TOOL_NAME = 64;

/** A set of tool names and the names a model sees for them. */
export interface ModelNames {
  /** The name a model sees for this tool; `undefined` for a name not in the set. */
  exported(name: string): string | undefined;
  /** The tool a model's name stands for; `undefined` for a name no tool is exported under. */
  tool(exported: string): string | undefined;
  /** The tools exported under another name than their own, sorted by name. */
  readonly renamed: readonly { name: string; exported: string }[];
}

/** A name's vendor-safe form before collisions are resolved: unsafe characters to `_`, at most 64 long. */
export function safeModelName(name: string): string {
  let out = '';
  for (const ch of name) out += /^[a-zA-Z0-9_-]$/.test(ch) ? ch : '_';
  if (out === '') out = 'tool';
  return out.slice(0, MAX_MODEL_TOOL_NAME);
}

/** The mapping of a set of tool names (duplicates count once). */
export function modelNames(names: Iterable<string>): ModelNames {
  const toModel = new Map<string, string>();
  const fromModel = new Map<string, string>();
  const others: string[] = [];
  for (const name of new Set(names)) {
    if (MODEL_TOOL_NAME_RE.test(name)) {
      toModel.set(name, name);
      fromModel.set(name, name);
    } else others.push(name);
  }
  others.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const renamed: { name: string; exported: string }[] = [];
  for (const name of others) {
    const base = safeModelName(name);
    let exported = base;
    for (let n = 2; fromModel.has(exported); n++) {
      const suffix = `_${n}`;
      exported = base.slice(0, MAX_MODEL_TOOL_NAME - suffix.length) + suffix;
    }
    toModel.set(name, exported);
    fromModel.set(exported, name);
    renamed.push({ name, exported });
  }
  return {
    exported: (name) => toModel.get(name),
    tool: (exported) => fromModel.get(exported),
    renamed,
  };
}

/** The tool a model called: the one exported under `name`, else `name` itself (a real name, or an unknown one). */
export function toolOfModelName(names: Pick<ModelNames, 'tool'> | undefined, name: string): string {
  return names?.tool(name) ?? name;
}
