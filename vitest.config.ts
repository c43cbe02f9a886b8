import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file starts its own redis-server (and later SpiceDB); two at a time suits these 2-core machines.
    maxWorkers: 2,
    reporters: ["default", "./test/summary-reporter.ts"],
  },
});
