import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    pool: "forks",
    // Each file in a fresh worker. Sharing workers between files (`isolate: false`) saves the modules'
    // load per file (a tenth of a file's time or so). With it, the gateway's tests all passed, and no
    // module state that one file leaves to the next was found; but one whole run had expiry-everywhere
    // (real-time expiry in SpiceDB) time out, which passes alone and after its neighbours: isolation
    // until that is understood.
    isolate: true,
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
