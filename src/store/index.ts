/**
 * The store (DESIGN §8): the `Store` interface and its backends. Nothing outside this folder touches
 * a database driver, and every SQL statement is here (tests/unit/sql-layer.test.ts checks it): the
 * run store (sqlite.ts, postgres.ts, postgres-append.ts), the numbered migrations, and the cluster's
 * statements (DESIGN §12), one module per operation under postgres/: lease, commands, listen,
 * takeover, permits, permits-free, admissions, limits, replicas, wait-summary. src/cluster/ holds the
 * coordination logic over their small typed interfaces (`LeaseSql`, `CommandsSql`, `TakeoverSql`, …)
 * and passes the pool along as an opaque `PgPool`.
 */
export type { ListRunsQuery, ReviewRecord, RunRecord, Store } from './types.js';
export { StoreError, STORE_ERROR_CODES, type StoreErrorCode } from './errors.js';
export { openSqliteStore } from './sqlite.js';
export { createMemoryStore } from './memory.js';
export { migrate, readMigrations, MIGRATIONS_DIR, type Migration } from './migrate.js';
