import { resolve } from "node:path";
import { defineConfig } from "vitest/config";

/**
 * Node's compile cache for the run's processes, as `pnpm start` has it (docs/testing.md): set here, in
 * the process that starts the test workers, so that they and every process started with their
 * environment (`pnpm`, the CLIs, the stacks) read the modules they load already compiled instead of
 * compiling them again (a CLI's start is half what it was). `NODE_COMPILE_CACHE` set outside wins;
 * `NODE_DISABLE_COMPILE_CACHE=1` turns it off.
 */
process.env.NODE_COMPILE_CACHE ??= resolve(import.meta.dirname, "node_modules/.cache/node-compile");

/**
 * The files that run the SpiceDB engine in their own process (its own tests, and tests that watch
 * what reaches it): each gets a fresh worker, so the engine's Go runtime never outlives its file.
 * `file-hygiene.ts` fails any other file that loads it.
 */
const ENGINE_FILES = [
  "packages/spicedb-local/test/**/*.test.ts",
  "packages/gateway/test/consistency.test.ts",
  "packages/gateway/test/decision-cache.test.ts",
  "packages/config-check/test/check-config.test.ts",
];

export default defineConfig({
  test: {
    pool: "forks",
    testTimeout: 30_000,
    // vitest clears every mock's calls as each test starts, whichever test made the mock: the blocks of
    // `describeEachTopology` run beside each other, so a test starting in one wiped a spy's count in the
    // other (test/concurrent-mocks.test.ts). Each test makes and restores its own spies instead.
    clearMocks: false,
    hookTimeout: 60_000,
    // Each file starts its own redis-server, SpiceDB and often processes, and partly waits on them: four
    // files at a time keep 2 cores busy (three left a sixth of the run idle).
    maxWorkers: 4,
    // One PostgreSQL for the whole run (each file gets its own database on it, `useTestDatabase`), and
    // the openai-python environment, made before any file needs it.
    globalSetup: [
      "packages/test-kit/src/postgres-global-setup.ts",
      "packages/test-kit/src/python-global-setup.ts",
    ],
    reporters: ["default", "./test/summary-reporter.ts"],
    projects: [
      {
        test: {
          name: "shared",
          include: ["packages/*/test/**/*.test.ts", "packages/*/src/**/*.test.ts", "test/**/*.test.ts"],
          exclude: ["**/node_modules/**", ...ENGINE_FILES],
          // Test files share worker processes: each loads the project's modules once, not once per
          // file (a fifth of the suite's time did that). What one file could leave behind for the next
          // (fake timers, environment variables, tracing) is put back, and the file that left it fails
          // (`file-hygiene.ts`); every file starts its own servers on free ports and stops them, and
          // its SpiceDB runs in the worker's SpiceDB host process (`startTestSpiceDB`).
          isolate: false,
          setupFiles: ["packages/test-kit/src/file-hygiene.ts", "packages/test-kit/src/wait-for-default.ts"],
        },
      },
      {
        test: {
          name: "engine",
          include: ENGINE_FILES,
          isolate: true,
          setupFiles: ["packages/test-kit/src/wait-for-default.ts"],
        },
      },
    ],
  },
});
