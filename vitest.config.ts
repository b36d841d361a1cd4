import { defineConfig } from 'vitest/config';

// Two projects: `unit` is the quick target (pure tests: no servers, child processes, browser, network
// or worker threads; `npm run test:unit`); `integration` is every other test file, so that a test file
// placed anywhere else under tests/ still runs (`npm run test:integration`). `npm test` runs both.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      { extends: true, test: { name: 'unit', include: ['tests/unit/**/*.test.ts'] } },
      { extends: true, test: { name: 'integration', include: ['tests/**/*.test.ts'], exclude: ['tests/unit/**'] } },
    ],
  },
});
