// The text in which the SQLite store hands a batch of writes ([statement name, params]) to its writer
// thread (writer-thread.ts → writer.mjs). One string, because a string is copied between threads far
// more cheaply than the structured clone of the rows' objects. Not JSON: every value is written with its
// length in front, so no string is escaped (JSON quoted each event's `data`, itself JSON text, a second
// time, and that was the dearest part of sending a batch). Plain JS, like writer.mjs, which imports it.
//
// A write is `w<count>;` then its name and its `count` params; a value is `s<length>:<text>` (length in
// UTF-16 code units), `d<number>;` or `n` (null). As in JSON, a number that is not finite, and
// `undefined`, become null; -0 becomes 0. Anything else is refused: SQLite binds no other value here.

/** @typedef {string | number | null} WriteParam A write's param as SQLite binds it. */

/**
 * One value's text.
 * @param {unknown} v
 * @returns {string}
 */
export function encodeValue(v) {
  if (typeof v === 'string') return `s${v.length}:${v}`;
  if (typeof v === 'number') return Number.isFinite(v) ? `d${v === 0 ? 0 : v};` : 'n';
  if (v === null || v === undefined) return 'n';
  throw new TypeError(`a write's param must be a string, a number or null, not ${typeof v}`);
}

/**
 * The text of `[name, params]` writes.
 * @param {readonly (readonly [string, readonly unknown[]])[]} writes
 * @returns {string}
 */
export function encodeWrites(writes) {
  let out = '';
  for (const [name, params] of writes) {
    out += `w${params.length};${encodeValue(name)}`;
    for (const p of params) out += encodeValue(p);
  }
  return out;
}

/**
 * The writes back from their text; throws on text that is not of this form.
 * @param {string} text
 * @returns {[string, WriteParam[]][]}
 */
export function decodeWrites(text) {
  /** @type {[string, WriteParam[]][]} */
  const writes = [];
  let i = 0;
  /** @param {string} end */
  const upTo = (end) => {
    const j = text.indexOf(end, i);
    if (j < 0) throw new Error(`bad writes text at ${i}: no '${end}'`);
    const s = text.slice(i, j);
    i = j + 1;
    return s;
  };
  /** @param {string} s */
  const count = (s) => {
    if (!/^\d+$/.test(s)) throw new Error(`bad writes text before ${i}: ${JSON.stringify(s)} is not a count`);
    return Number(s);
  };
  /** @returns {WriteParam} */
  const value = () => {
    const tag = text[i++];
    if (tag === 'n') return null;
    if (tag === 'd') {
      const t = upTo(';');
      // Number('') and Number(' 1') are numbers too: only what encodeValue writes is one here.
      const n = t === '' || t.trim() !== t ? Number.NaN : Number(t);
      if (!Number.isFinite(n)) throw new Error(`bad writes text before ${i}: not a number`);
      return n;
    }
    if (tag === 's') {
      const length = count(upTo(':'));
      if (i + length > text.length) throw new Error(`bad writes text at ${i}: a string runs past the end`);
      const s = text.slice(i, i + length);
      i += length;
      return s;
    }
    throw new Error(`bad writes text at ${i - 1}: ${JSON.stringify(tag)} begins no value`);
  };
  while (i < text.length) {
    if (text[i++] !== 'w') throw new Error(`bad writes text at ${i - 1}: a write begins with w`);
    const n = count(upTo(';'));
    const name = value();
    if (typeof name !== 'string') throw new Error(`bad writes text before ${i}: a write's name is a string`);
    /** @type {WriteParam[]} */
    const params = [];
    for (let k = 0; k < n; k++) params.push(value());
    writes.push([name, params]);
  }
  return writes;
}
