import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    pool: "forks",
    // Files share their worker (and its loaded modules) instead of a fresh one each: no file relies on
    // module state another could leave behind (no hooks at the top of shared modules, no stubbed globals).
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file starts its own redis-server, SpiceDB and often processes, and mostly waits on them: three
    // files at a time keep 2 cores busy.
    maxWorkers: 3,
    // One PostgreSQL for the whole run; each file gets its own database on it (`useTestDatabase`).
    globalSetup: ["packages/test-kit/src/postgres-global-setup.ts"],
    reporters: ["default", "./test/summary-reporter.ts"],
  },
});
