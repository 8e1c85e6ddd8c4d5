import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    // Kills what a test file's helpers started once the file ends (test/helpers/children.ts).
    setupFiles: ['test/helpers/children-setup.ts'],
    pool: 'forks',
    // Two cores: two files at a time keeps the database-heavy suites from starving each other.
    maxWorkers: 2,
    // Generous, so that a loaded machine is slow rather than failing: a test may start one server (up to
    // START_TIMEOUT_MS, 120 s, in test/helpers/server-process.ts) and a hook two; tests that start more say so with
    // startsTimeout(n). A test that hangs still fails, only later.
    testTimeout: 180_000,
    hookTimeout: 300_000,
  },
});
