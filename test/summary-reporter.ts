import type { Reporter, TestModule } from "vitest/node";

/**
 * Ends a run with one plain line, `vitest: N passed, N failed, N skipped`,
 * that CI and people can read without parsing vitest's coloured summary.
 * Errors outside any test count as failures.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    const counts = { passed: 0, failed: unhandledErrors.length, skipped: 0 };
    for (const module of testModules) {
      if (module.state() === "failed" && [...module.children.allTests()].length === 0) counts.failed++;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") counts.passed++;
        else if (state === "failed") counts.failed++;
        else counts.skipped++;
      }
    }
    process.stdout.write(
      `\nvitest: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped\n`,
    );
  }
}
