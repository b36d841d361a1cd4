/**
 * The store (DESIGN §8): the `Store` interface and its backends. Nothing outside this folder touches
 * a database driver.
 */
export type { ListRunsQuery, ReviewRecord, RunRecord, Store } from './types.js';
export { StoreError, STORE_ERROR_CODES, type StoreErrorCode } from './errors.js';
export { openSqliteStore } from './sqlite.js';
export { createMemoryStore } from './memory.js';
export { migrate, readMigrations, MIGRATIONS_DIR, type Migration } from './migrate.js';
