import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "packages/*/src/**/*.test.ts", "test/**/*.test.ts"],
    pool: "forks",
    // Each file in a fresh worker. Sharing workers between files (`isolate: false`, four workers) ran the
    // suite in 127 s instead of 190 s, but one whole run lost a worker to a crash of the Go runtime of the
    // embedded SpiceDB engine ("traceback did not unwind completely" during a garbage collection) after
    // the worker had run many files' engines: isolation until that is understood.
    isolate: true,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file starts its own redis-server, SpiceDB and often processes, and mostly waits on them: three
    // files at a time keep 2 cores busy (four, with isolation, were slower).
    maxWorkers: 3,
    // One PostgreSQL for the whole run; each file gets its own database on it (`useTestDatabase`).
    globalSetup: ["packages/test-kit/src/postgres-global-setup.ts"],
    reporters: ["default", "./test/summary-reporter.ts"],
  },
});
