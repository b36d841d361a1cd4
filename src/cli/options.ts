/** What every command is given: where its output goes, and its arguments parsed into options. */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from './input.js';

/** Where a command writes: stdout, stderr, and whether stdout is a terminal. */
export interface Io {
  out: (s: string) => void;
  err: (s: string) => void;
  isTTY: boolean;
}

export const defaultIo: Io = {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
  isTTY: Boolean(process.stdout.isTTY),
};

/** `parseArgs` with its errors turned into usage errors. */
export interface ParsedOptions {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

export function parseOptions(args: string[], options: NonNullable<ParseArgsConfig['options']>): ParsedOptions {
  try {
    const { values, positionals } = parseArgs({ args, options, allowPositionals: true, strict: true });
    return { values: values as ParsedOptions['values'], positionals };
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}
