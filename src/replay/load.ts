/**
 * Reading recordings from disk: the paths given on the command line (files, or directories replayed
 * as a corpus of every `*.json` inside, sorted), and each file as text → JSON → a validated
 * `Recording`. Every problem is a `RecordingError` naming the file and the JSON path at fault; for
 * text that is not JSON (a truncated file, say) the path is where the parser stopped.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Ajv } from 'ajv';
import { formatPath } from '../config/load.js';
import type { Recording } from '../contract/recording.js';
import { parseRecording, RecordingError } from './schema.js';

function errnoWords(e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return 'no such file or directory';
  if (code === 'EACCES') return 'permission denied';
  return code ?? (e as Error).message;
}

/**
 * Expands the command line's paths: a file stays itself, a directory becomes its `*.json` files
 * (sorted by name). Throws a `RecordingError` for a path that does not exist or a directory without
 * recordings.
 */
export function expandPaths(paths: readonly string[]): string[] {
  const files: string[] = [];
  for (const p of paths) {
    let isDir: boolean;
    try {
      isDir = statSync(p).isDirectory();
    } catch (e) {
      throw new RecordingError(p, [`cannot read it: ${errnoWords(e)}`]);
    }
    if (!isDir) {
      files.push(p);
      continue;
    }
    const inside = readdirSync(p, { withFileTypes: true })
      .filter((d) => d.isFile() && d.name.endsWith('.json'))
      .map((d) => d.name)
      .sort();
    if (inside.length === 0) throw new RecordingError(p, ['the directory holds no *.json recordings']);
    files.push(...inside.map((n) => path.join(p, n)));
  }
  return files;
}

class Stop {
  constructor(readonly pos: number) {}
}

/**
 * Where JSON text goes wrong, and the JSON path of the value being read there (`JSON.parse` on Node 20
 * names no position for most errors, and never a path): a small recursive-descent check of the
 * grammar. `undefined` when the text is valid JSON (or nests too deep to check).
 */
export function jsonErrorAt(text: string): { pos: number; path: (string | number)[] } | undefined {
  let i = 0;
  const path: (string | number)[] = [];
  const fail = (): never => {
    throw new Stop(i);
  };
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i] as string)) i++;
  };
  const str = (): string => {
    if (text[i] !== '"') fail();
    let s = '';
    for (i++; ; i++) {
      if (i >= text.length) fail();
      const ch = text[i] as string;
      if (ch === '"') break;
      if (ch < ' ') fail();
      if (ch === '\\') {
        i++;
        if (text[i] === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 1, i + 5))) i += 4;
        else if (!'"\\/bfnrt'.includes(text[i] ?? 'x')) fail();
      }
      s += ch;
    }
    i++;
    return s;
  };
  const value = (): void => {
    ws();
    const ch = text[i];
    if (ch === '{' || ch === '[') {
      i++;
      ws();
      const close = ch === '{' ? '}' : ']';
      if (text[i] === close) return void i++;
      for (let n = 0; ; n++) {
        if (ch === '{') {
          ws();
          path.push(str());
          ws();
          if (text[i] !== ':') fail();
          i++;
        } else path.push(n);
        value();
        path.pop();
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === close) return void i++;
        else fail();
      }
    }
    if (ch === '"') return void str();
    const num = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 400));
    if (num) return void (i += num[0].length);
    for (const lit of ['true', 'false', 'null']) if (text.startsWith(lit, i)) return void (i += lit.length);
    fail();
  };
  try {
    value();
    ws();
    if (i < text.length) fail();
    return undefined;
  } catch (e) {
    if (e instanceof Stop) return { pos: e.pos, path: [...path] };
    return undefined; // nested too deep for the stack: JSON.parse's message has to do
  }
}

function lineCol(text: string, pos: number): string {
  const before = text.slice(0, pos).split('\n');
  return `line ${before.length}, column ${(before[before.length - 1] as string).length + 1}`;
}

/** Parses JSON text, or throws a `RecordingError` saying where (line, column, JSON path) and why. */
export function parseJsonText(text: string, source: string): unknown {
  if (text.trim() === '') throw new RecordingError(source, ['the file is empty; expected a recording (a JSON object)']);
  try {
    return JSON.parse(text);
  } catch (e) {
    const message = (e as Error).message.replace(/ (in JSON )?at position \d+.*$/, '').replace(/, (\.\.\.)?".*" is not valid JSON$/, '');
    const at = jsonErrorAt(text);
    const pos = at?.pos ?? text.length;
    const what = pos >= text.length ? 'the file ends too early (truncated?)' : 'not valid JSON';
    const where = at ? `in ${at.path.length === 0 ? '(the top level)' : formatPath(at.path)} ` : '';
    throw new RecordingError(source, [`${what}: ${where}at ${lineCol(text, pos)}: ${message}`]);
  }
}

/** Reads and validates one recording file. */
export function readRecording(file: string, ajv?: Ajv): Recording {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new RecordingError(file, [`cannot read the recording: ${errnoWords(e)}`]);
  }
  return parseRecording(parseJsonText(text, file), file, ajv);
}
