/**
 * A tiny migration runner: applies the numbered `NNNN_name.sql` files of a folder, in order, each in
 * its own transaction, and records them in `schema_migrations`. Applied files are never run again,
 * so reopening a database is a no-op; a database that knows a version this build lacks is refused
 * (it was migrated by a newer build).
 *
 * The folder is `./migrations/` next to this file: under `tsx`/vitest that is `src/store/migrations/`,
 * after the build `dist/store/migrations/` (scripts/copy-assets.mjs copies the `.sql` files).
 */
import { readdirSync, readFileSync } from 'node:fs';
import type Database from 'better-sqlite3';

export const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The migrations of a folder, by version; two files with one version are an error. */
export function readMigrations(dir: URL = MIGRATIONS_DIR): Migration[] {
  const out: Migration[] = [];
  for (const file of readdirSync(dir).sort()) {
    const m = /^(\d{4})_[a-z0-9_]+\.sql$/.exec(file);
    if (!m) continue;
    const version = Number(m[1]);
    if (out.some((x) => x.version === version)) throw new Error(`two migrations have version ${m[1]} in ${dir.pathname}`);
    out.push({ version, name: file, sql: readFileSync(new URL(file, dir), 'utf8') });
  }
  return out;
}

/** Brings the database up to date; returns the versions it applied (none when it was current). */
export function migrate(db: Database.Database, migrations: readonly Migration[] = readMigrations()): number[] {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
  )`);
  const applied = () => new Set(db.prepare('SELECT version FROM schema_migrations').pluck().all() as number[]);
  const known = new Set(migrations.map((m) => m.version));
  const unknown = [...applied()].filter((v) => !known.has(v));
  if (unknown.length > 0) {
    throw new Error(`the database has migration ${unknown.join(', ')}, which this build does not know: it was migrated by a newer version`);
  }
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  const done: number[] = [];
  for (const m of migrations) {
    // IMMEDIATE takes the write lock first, so two processes opening one file apply each migration once.
    db.transaction(() => {
      if (applied().has(m.version)) return;
      db.exec(m.sql);
      record.run(m.version, m.name, Date.now());
      done.push(m.version);
    }).immediate();
  }
  return done;
}
