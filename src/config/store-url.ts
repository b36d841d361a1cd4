/**
 * What a store setting means (DESIGN §12): a `postgres://…` or `postgresql://…` URL is PostgreSQL, a
 * value with another `scheme://` is an error that names its key, anything else is a SQLite file. No
 * driver here: the config checks `store.url` with it.
 */
export type StoreChoice = { kind: 'postgres'; url: string; from: string } | { kind: 'sqlite'; file: string; from: string };

const SCHEME_RE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//;

/** What one value means; `from` names its key (`--db`, `TOOLGRAPH_DB`, `store.url`…) in the error. */
export function parseStoreValue(value: string, from: string): StoreChoice {
  const scheme = SCHEME_RE.exec(value)?.[1]?.toLowerCase();
  if (scheme === undefined) return { kind: 'sqlite', file: value, from };
  if (scheme !== 'postgres' && scheme !== 'postgresql') {
    throw new Error(`${from}: expected a postgres:// or postgresql:// URL or a SQLite file, got a ${scheme}:// URL`);
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`${from}: expected a URL like postgres://USER@HOST:PORT/DB, got one that does not parse`);
  }
  if (url.hostname === '') throw new Error(`${from}: expected a URL like postgres://USER@HOST:PORT/DB, got one without a host`);
  return { kind: 'postgres', url: value, from };
}
