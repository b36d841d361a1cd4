/**
 * The pieces the config's schemas share (schema.ts, mcp-schema.ts, hooks-schema.ts): each field helper
 * carries its expectation as the message, and `env:NAME` values are read from the environment without
 * ever appearing in a message.
 */
import { z } from 'zod';

/** `env:NAME`: a value read from the environment. */
export const ENV_VALUE_RE = /^env:([A-Za-z_][A-Za-z0-9_]*)$/;

/** What a section's schema is made with: the environment, and the config file's folder. */
export interface SchemaCtx {
  env: Readonly<Record<string, string | undefined>>;
  baseDir: string;
}

/** A strict object whose unknown keys are reported with the keys it allows. */
export function strict<T extends z.ZodRawShape>(shape: T) {
  const allowed = Object.keys(shape).join(', ');
  return z.strictObject(shape, {
    error: (iss) => (iss.code === 'unrecognized_keys' ? `unknown key, expected one of ${allowed}` : 'expected a mapping'),
  });
}

export const text = () => z.string({ error: 'expected a string' }).min(1, { error: 'expected a non-empty string' });

/** A string that may be `env:NAME`: the variable's value replaces it, and never appears in a message. */
export function secretText(ctx: SchemaCtx) {
  return z.string({ error: 'expected a string' }).transform((v, c) => {
    const m = ENV_VALUE_RE.exec(v);
    if (!m) return v;
    const value = ctx.env[m[1]!];
    if (value === undefined) {
      c.addIssue({ code: 'custom', input: undefined, message: `expected environment variable ${m[1]} to be set (env:${m[1]})` });
      return z.NEVER;
    }
    return value;
  });
}

export function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}
