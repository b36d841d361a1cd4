/**
 * Size caps (DESIGN §4): how many bytes a value takes as compact JSON in UTF-8 (what the `http`
 * executor sends, `Buffer.byteLength(JSON.stringify(v))`), counted without building the text and
 * stopping as soon as a budget is passed, so the work is bounded by the budget, not by the value.
 */
import { callError, type CallError } from './errors.js';
import type { ToolManifest } from './tool.js';

/** `limits.maxArgsBytes` when a config does not say: a call's resolved args. */
export const DEFAULT_MAX_ARGS_BYTES = 1024 * 1024;
/** `limits.maxOutputBytes` when a config does not say: one output. */
export const DEFAULT_MAX_OUTPUT_BYTES = 4 * 1024 * 1024;

/** What `jsonBytes` answers for a value past its budget (or nested past `MAX_VALUE_DEPTH`). */
export const OVER = Number.POSITIVE_INFINITY;

/**
 * How deep a value may nest (arrays and objects) to be measured, stored and sent: a tool's output
 * deeper than this fails `output_too_large` (JSON.stringify and every recursive walk would overflow the
 * stack some thousands of levels down, and a tool server is outside our control).
 */
export const MAX_VALUE_DEPTH = 256;

/** What `measure` answers for a value nested past its depth limit. */
const DEEP = -1;

/**
 * How deep `jsonBytes` walks: args built from references nest an output (up to `MAX_VALUE_DEPTH`) inside
 * args (up to 64 levels), so this is looser than the output cap and still far from the stack's end.
 */
const MEASURE_DEPTH = 4 * MAX_VALUE_DEPTH;

/**
 * The bytes of `value` as compact JSON, or `OVER` once they pass `budget` (the walk stops there).
 * Values JSON leaves out (undefined, functions, symbols) count as JSON.stringify treats them: dropped
 * from objects, `null` in arrays.
 */
export function jsonBytes(value: unknown, budget: number): number {
  const n = measure(value, budget, 0, MEASURE_DEPTH);
  return n > budget || n === DEEP ? OVER : n;
}

/** The bytes of a string's contents once escaped for a JSON string (the quotes not counted). */
export function escapedBytes(s: string, budget = OVER): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    if (ch < 0x80) n += ch === 34 || ch === 92 ? 2 : ch < 0x20 ? (ch === 8 || ch === 9 || ch === 10 || ch === 12 || ch === 13 ? 2 : 6) : 1;
    else if (ch < 0x800) n += 2;
    else if (ch >= 0xd800 && ch <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        n += 4;
        i++;
      } else n += 6; // a lone surrogate is written `\udXXX`
    } else if (ch >= 0xdc00 && ch <= 0xdfff) n += 6;
    else n += 3;
    if (n > budget) return OVER;
  }
  return n;
}

/**
 * `used` bytes are spent already, `levels` more levels of arrays and objects may open; returns the new
 * total, something past `budget`, or `DEEP`.
 */
function measure(value: unknown, budget: number, used: number, levels: number): number {
  switch (typeof value) {
    case 'string':
      return used + 2 + escapedBytes(value, budget - used - 2);
    case 'number':
      return used + (Number.isFinite(value) ? String(value).length : 4);
    case 'boolean':
      return used + (value ? 4 : 5);
    case 'bigint':
      return OVER; // JSON.stringify throws: never sendable
    case 'object': {
      if (value === null) return used + 4;
      const toJSON = (value as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === 'function') return measure((value as { toJSON(): unknown }).toJSON(), budget, used, levels);
      if (levels === 0) return DEEP;
      if (Array.isArray(value)) {
        let n = used + 2 + Math.max(0, value.length - 1);
        for (let i = 0; i < value.length && n <= budget && n !== DEEP; i++) {
          const v = value[i];
          n = v === undefined || typeof v === 'function' || typeof v === 'symbol' ? n + 4 : measure(v, budget, n, levels - 1);
        }
        return n;
      }
      let n = used + 2;
      let first = true;
      for (const k in value) {
        if (!Object.hasOwn(value, k)) continue;
        const v = (value as Record<string, unknown>)[k];
        if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
        n += (first ? 0 : 1) + 3 + escapedBytes(k, budget - n);
        first = false;
        if (n > budget) return n;
        n = measure(v, budget, n, levels - 1);
        if (n > budget || n === DEEP) return n;
      }
      return n;
    }
    default:
      return used; // undefined, function, symbol at the top: nothing
  }
}

type AttemptOutcome =
  | { ok: true; output: unknown }
  | { ok: false; error: CallError; retryable?: boolean; retryAfterMs?: number; pauseMs?: number; pauseStatus?: number };

/**
 * An attempt's result with its output held to the cap (DESIGN §4): the tool's own `maxOutputBytes`,
 * else `limits.maxOutputBytes`, else 4 MiB. An output past it is a failure, `output_too_large`, that no
 * retry can mend; the output is dropped, never stored.
 */
export function outputChecked(
  r: AttemptOutcome,
  call: { id: string; manifest?: ToolManifest | undefined },
  maxOutputBytes?: number,
): AttemptOutcome {
  if (!r.ok) return r;
  const max = call.manifest?.maxOutputBytes ?? maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const n = measure(r.output, max, 0, MAX_VALUE_DEPTH);
  if (n === DEEP) {
    return {
      ok: false,
      error: callError('output_too_large', `${call.id}: the output nests deeper than ${MAX_VALUE_DEPTH} levels`, {
        details: { maxDepth: MAX_VALUE_DEPTH },
      }),
      retryable: false,
    };
  }
  if (n <= max) return r;
  const source = call.manifest?.maxOutputBytes !== undefined ? "the tool's maxOutputBytes" : 'limits.maxOutputBytes';
  return {
    ok: false,
    error: callError('output_too_large', `${call.id}: the output passes ${max} bytes of JSON (${source})`, { details: { maxBytes: max } }),
    retryable: false,
  };
}
