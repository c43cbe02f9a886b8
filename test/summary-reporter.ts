import { relative } from "node:path";
import type { Reporter, TestModule } from "vitest/node";

/** How many of the slowest files the share line sums up. */
const SLOWEST = 10;

/** A file's time from its worker's point of view: environment, import, setup files, tests and hooks. */
export function fileSeconds(module: TestModule): number {
  const d = module.diagnostic();
  const ms =
    d.environmentSetupDuration + d.prepareDuration + d.collectDuration + d.setupDuration + d.duration;
  return ms / 1000;
}

/**
 * Lists every test file with its time, slowest first, and the share the ten
 * slowest take (a run of one file shows that file's time); then ends the run with one plain line,
 * `vitest: N passed, N failed, N skipped`, that CI and people can read without
 * parsing vitest's coloured summary. Errors outside any test count as failures.
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
    const times = testModules
      .map((module) => ({ file: relative(process.cwd(), module.moduleId), seconds: fileSeconds(module) }))
      .sort((a, b) => b.seconds - a.seconds);
    if (times.length > 0) {
      const sum = times.reduce((total, t) => total + t.seconds, 0);
      const slowest = times.slice(0, SLOWEST).reduce((total, t) => total + t.seconds, 0);
      const lines = times.map((t) => `${t.seconds.toFixed(1).padStart(7)} s  ${t.file}`);
      const heading =
        times.length === 1
          ? "Time per file:"
          : `Time per file, slowest first (${sum.toFixed(1)} s over ${times.length} files; ` +
            `the ${Math.min(SLOWEST, times.length)} slowest ${Math.round((100 * slowest) / sum)} %):`;
      process.stdout.write(`\n${heading}\n${lines.join("\n")}\n`);
    }
    process.stdout.write(
      `\nvitest: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped\n`,
    );
  }
}
