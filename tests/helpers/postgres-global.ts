/**
 * Global setup of the `integration-postgres` project (vitest.config.ts): one throwaway PostgreSQL
 * cluster for the run, torn down after it. Each server a test starts gets a database of its own on it
 * (`testStore()` in tests/helpers/server.ts), so tests stay as isolated as with their SQLite files.
 */
import type { TestProject } from 'vitest/node';
import { startPostgres } from './postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The admin URL of the run's PostgreSQL cluster (its `postgres` database). */
    pgAdminUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const pg = await startPostgres();
  project.provide('pgAdminUrl', pg.url());
  return () => pg.stop();
}
