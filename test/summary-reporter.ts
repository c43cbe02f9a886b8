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

/** The first line of an error's message, or what was thrown when it has none. */
function firstLine(error: unknown): string {
  const message =
    typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error);
  return message.split("\n")[0] ?? "";
}

/**
 * Lists every test file with its time, slowest first, and the share the ten
 * slowest take (a run of one file shows that file's time); then each failure, named by file and test
 * with its error's first line, last, where a CI log's tail shows it; then ends the run with one plain line,
 * `vitest: N passed, N failed, N skipped`, that CI and people can read without
 * parsing vitest's coloured summary. Errors outside any test count as failures.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    const counts = { passed: 0, failed: unhandledErrors.length, skipped: 0 };
    const failures = unhandledErrors.map((error) => `  outside any test: ${firstLine(error)}`);
    for (const module of testModules) {
      const file = relative(process.cwd(), module.moduleId);
      if (module.state() === "failed" && [...module.children.allTests()].length === 0) {
        counts.failed++;
        failures.push(`  ${file}: ${firstLine(module.errors()[0] ?? "the file failed to load")}`);
      }
      for (const test of module.children.allTests()) {
        const result = test.result();
        if (result.state === "passed") counts.passed++;
        else if (result.state === "failed") {
          counts.failed++;
          failures.push(`  ${file} > ${test.fullName}: ${firstLine(result.errors?.[0] ?? "failed")}`);
        } else counts.skipped++;
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
    if (failures.length > 0) process.stdout.write(`\nFailed:\n${failures.join("\n")}\n`);
    process.stdout.write(
      `\nvitest: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped\n`,
    );
  }
}
