/**
 * A throwaway PostgreSQL cluster for tests: the bench's (src/bench/postgres-cluster.ts), which starts
 * one for the side-by-side HTTP bench too.
 */
export { freePort, postgresBin, startPostgres, type TestPostgres } from '../../src/bench/postgres-cluster.js';
