import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    pool: "forks",
    // Each file in a fresh worker. Sharing workers between files (`isolate: false`) saved a fifth of the
    // suite's time, but real-time waits then timed out now and then in files that pass alone
    // (quota-limiters, audit-durability): isolation until that is understood.
    isolate: true,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file starts its own redis-server (and later SpiceDB); two at a time suits these 2-core machines.
    maxWorkers: 2,
    // One PostgreSQL for the whole run; each file gets its own database on it (`useTestDatabase`).
    globalSetup: ["packages/test-kit/src/postgres-global-setup.ts"],
    reporters: ["default", "./test/summary-reporter.ts"],
  },
});
