import { defineConfig } from 'vitest/config';

// Two projects: `unit` is the quick target (pure tests: no servers, child processes, browser, network
// or worker threads; `npm run test:unit`); `integration` is every other test file, so that a test file
// placed anywhere else under tests/ still runs (`npm run test:integration`). `npm test` runs both.
//
// The unit files run in threads that share one module graph (isolate: false), which halves the suite's
// CPU time (src/ is loaded once, not once per file); so a unit test must not mock modules
// (vi.mock), fake timers or change globals without restoring them.
//
// Every integration file fails if a `toolgraph serve` it started is left after its last hook
// (tests/helpers/no-leftovers.ts).
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
    ],
  },
});
