import { defineConfig } from 'vitest/config';

// Three projects: `unit` is the quick target (pure tests: no servers, child processes, browser, network
// or worker threads; `npm run test:unit`); `integration` is every other test file, so that a test file
// placed anywhere else under tests/ still runs (`npm run test:integration`); `integration-postgres`
// runs again, on PostgreSQL, the integration files whose behaviour is the store's business (runs,
// events, recovery, reviews, replay, limits, hooks, streaming): one throwaway cluster for the run, a
// database per test server (`npm run test:postgres`). `npm test` runs all three.
//
// The unit files run in threads that share one module graph (isolate: false), which halves the suite's
// CPU time (src/ is loaded once, not once per file); so a unit test must not mock modules
// (vi.mock), fake timers or change globals without restoring them.
//
// Every integration file fails if a `toolgraph serve` it started is left after its last hook
// (tests/helpers/no-leftovers.ts).

/**
 * The integration files that run on both stores (the store suite and the replica tests pick their
 * stores themselves; waits on PostgreSQL, which go through the cluster's permits, are the replica
 * tests' business: tests/integration/replicas-waiting.test.ts).
 */
export const ON_BOTH_STORES = [
  'tests/integration/api-runs.test.ts',
  'tests/integration/api-events.test.ts',
  'tests/integration/api-flows.test.ts',
  'tests/integration/api-recovery.test.ts',
  'tests/integration/api-admission.test.ts',
  'tests/integration/api-formats.test.ts',
  'tests/integration/hooks.test.ts',
  'tests/integration/replay-roundtrip.test.ts',
  'tests/integration/client.test.ts',
  'tests/integration/hardening-runs.test.ts',
  'tests/integration/api-robustness.test.ts',
  'tests/integration/traces.test.ts',
  'tests/integration/api-auth.test.ts',
  'tests/integration/api-run-keys.test.ts',
  'tests/integration/client-tools.test.ts',
  'tests/integration/client-run.test.ts',
  'tests/integration/model-names.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      { extends: true, test: { name: 'unit', include: ['tests/unit/**/*.test.ts'], pool: 'threads', isolate: false } },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['tests/**/*.test.ts'],
          exclude: ['tests/unit/**'],
          setupFiles: ['tests/helpers/no-leftovers.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'integration-postgres',
          include: ON_BOTH_STORES,
          env: { TOOLGRAPH_TEST_STORE: 'postgres' },
          globalSetup: ['tests/helpers/postgres-global.ts'],
          setupFiles: ['tests/helpers/no-leftovers.ts'],
        },
      },
    ],
  },
});
