import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    pool: "forks",
    // A worker keeps the modules it has imported from one test file to the next (each file still gets a
    // fresh module of its own): importing the packages again for every file was a fifth of the suite's time.
    // Files therefore restore what they change globally (fake timers, environment variables).
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file starts its own redis-server (and later SpiceDB); two at a time suits these 2-core machines.
    maxWorkers: 2,
    // One PostgreSQL for the whole run; each file gets its own database on it (`useTestDatabase`).
    globalSetup: ["packages/test-kit/src/postgres-global-setup.ts"],
    reporters: ["default", "./test/summary-reporter.ts"],
  },
});
