/**
 * PostgreSQL migrations: the numbered files of `migrations/postgres/`, each applied once in its own
 * transaction and recorded in `schema_migrations`, all under one advisory lock, so that replicas that
 * start together apply each file exactly once (the others wait for the lock, then find them applied).
 * A database that knows a version this build lacks is refused (a newer build migrated it).
 */
import type pg from 'pg';
import { readMigrations, type Migration } from './migrate.js';

export const POSTGRES_MIGRATIONS_DIR = new URL('./migrations/postgres/', import.meta.url);

/** The advisory lock's key: any constant that no other application on the database uses. */
const LOCK_KEY = 0x746f6f6c; // "tool"

/** Brings the database up to date; returns the versions it applied. */
export async function migratePostgres(
  pool: pg.Pool,
  migrations: readonly Migration[] = readMigrations(POSTGRES_MIGRATIONS_DIR),
): Promise<number[]> {
  const client = await pool.connect();
  const done: number[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1)', [LOCK_KEY]);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version    INTEGER PRIMARY KEY,
        name       TEXT    NOT NULL,
        applied_at BIGINT  NOT NULL
      )`);
      const applied = new Set(
        (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version),
      );
      const known = new Set(migrations.map((m) => m.version));
      const unknown = [...applied].filter((v) => !known.has(v));
      if (unknown.length > 0) {
        throw new Error(
          `the database has migration ${unknown.join(', ')}, which this build does not know: it was migrated by a newer version`,
        );
      }
      for (const m of migrations) {
        if (applied.has(m.version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
          await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [
            m.version,
            m.name,
            Date.now(),
          ]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => {});
          throw err;
        }
        done.push(m.version);
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]).catch(() => {});
    }
  } finally {
    client.release();
  }
  return done;
}
