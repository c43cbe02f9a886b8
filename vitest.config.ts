import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "packages/*/src/**/*.test.ts", "test/**/*.test.ts"],
    pool: "forks",
    // Test files share worker processes: each loads the project's modules once, not once per file
    // (a fifth of the suite's time did that). What one file could leave behind for the next (fake
    // timers, environment variables, tracing) is put back, and the file that left it fails
    // (`file-hygiene.ts`); every file starts its own servers on free ports and stops them.
    isolate: false,
    setupFiles: ["packages/test-kit/src/file-hygiene.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file starts its own redis-server, SpiceDB and often processes, and partly waits on them: four
    // files at a time keep 2 cores busy (three left a sixth of the run idle).
    maxWorkers: 4,
    // One PostgreSQL for the whole run; each file gets its own database on it (`useTestDatabase`).
    globalSetup: ["packages/test-kit/src/postgres-global-setup.ts"],
    reporters: ["default", "./test/summary-reporter.ts"],
  },
});
