/**
 * Which store a server uses (DESIGN §12): `--db`, else `TOOLGRAPH_DB`, else `store.url` in the config,
 * else `server.db`. A `postgres://…` or `postgresql://…` URL is PostgreSQL; a value with another
 * `scheme://` is an error that names where it came from; anything else is a SQLite file.
 */
import { openPostgresStore } from './postgres.js';
import { openSqliteStore } from './sqlite.js';
import type { Store } from './types.js';
import { parseStoreValue, type StoreChoice } from '../config/store-url.js';

export { parseStoreValue, type StoreChoice } from '../config/store-url.js';

export function chooseStore(opts: {
  flag?: string | undefined;
  env?: string | undefined;
  url?: string | undefined;
  file: string;
}): StoreChoice {
  if (opts.flag !== undefined && opts.flag !== '') return parseStoreValue(opts.flag, '--db');
  if (opts.env !== undefined && opts.env !== '') return parseStoreValue(opts.env, 'TOOLGRAPH_DB');
  if (opts.url !== undefined) return parseStoreValue(opts.url, 'store.url');
  return parseStoreValue(opts.file, 'server.db');
}

/** Where the store is, for logs and messages: a file, or `postgres HOST:PORT/DB` (never a password). */
export function describeChoice(c: StoreChoice): string {
  if (c.kind === 'sqlite') return c.file;
  try {
    const u = new URL(c.url);
    return `postgres ${u.hostname}:${u.port || '5432'}${u.pathname}`;
  } catch {
    return 'postgres';
  }
}

/** `onConnectionError`: told of each PostgreSQL connection fault (to log it); the store goes on. */
export async function openStore(
  c: StoreChoice,
  opts: { poolSize?: number; onConnectionError?: (err: Error) => void } = {},
): Promise<Store> {
  if (c.kind === 'sqlite') return openSqliteStore(c.file);
  return openPostgresStore({
    url: c.url,
    ...(opts.poolSize !== undefined ? { poolSize: opts.poolSize } : {}),
    ...(opts.onConnectionError ? { onConnectionError: opts.onConnectionError } : {}),
  });
}
