import { resolve } from "node:path";
import { describe, expect, it, vi } from "vitest";
import type { TestModule } from "vitest/node";
import SummaryReporter from "./summary-reporter.ts";

/** A finished test file as the reporter sees it: its path, its times, its tests' states. */
function module(path: string, seconds: number, states: string[]): TestModule {
  return {
    moduleId: resolve(process.cwd(), path),
    state: () => (states.includes("failed") ? "failed" : "passed"),
    diagnostic: () => ({
      environmentSetupDuration: 0,
      prepareDuration: 100,
      collectDuration: 400,
      setupDuration: 0,
      duration: seconds * 1000 - 500,
    }),
    errors: () => [],
    children: {
      allTests: () =>
        states.map((state, i) => ({
          fullName: `suite > test ${i}`,
          result: () => ({
            state,
            errors: state === "failed" ? [{ message: `expected ${i} to be 0\nat line 3` }] : undefined,
          }),
        })),
    },
  } as unknown as TestModule;
}

describe("the summary reporter", () => {
  it("lists every file's time, slowest first, with the ten slowest's share, then the one plain line", () => {
    const written: string[] = [];
    const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
      written.push(String(chunk));
      return true;
    });
    try {
      const files = Array.from({ length: 11 }, (_, i) =>
        module(`packages/x/test/f${i}.test.ts`, i + 1, ["passed"]),
      );
      files.push(module("packages/x/test/slow.test.ts", 30, ["passed", "failed", "skipped"]));
      new SummaryReporter().onTestRunEnd(files, [{ message: "worker exited" }]);
    } finally {
      write.mockRestore();
    }
    const lines = written.join("").split("\n");
    // 1 + 2 + … + 11 + 30 = 96 s; the ten slowest: 30 + 11 + 10 + … + 3 = 93 s.
    expect(lines).toContain("Time per file, slowest first (96.0 s over 12 files; the 10 slowest 97 %):");
    const times = lines.filter((l) => l.endsWith(".test.ts"));
    expect(times[0]).toBe("   30.0 s  packages/x/test/slow.test.ts");
    expect(times[1]).toBe("   11.0 s  packages/x/test/f10.test.ts");
    expect(times).toHaveLength(12);
    // The failure is named last, before the count, where the tail of a CI log shows it.
    expect(lines.slice(-6, -2)).toEqual([
      "Failed:",
      "  outside any test: worker exited",
      "  packages/x/test/slow.test.ts > suite > test 1: expected 1 to be 0",
      "",
    ]);
    expect(lines.at(-2)).toBe("vitest: 12 passed, 2 failed, 1 skipped");
  });

  it("lists the time of a single file too, as a run of one file shows it", () => {
    const written: string[] = [];
    const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
      written.push(String(chunk));
      return true;
    });
    try {
      new SummaryReporter().onTestRunEnd([module("packages/x/test/one.test.ts", 7.25, ["passed"])], []);
    } finally {
      write.mockRestore();
    }
    const lines = written.join("").split("\n");
    expect(lines).toContain("Time per file:");
    expect(lines).toContain("    7.3 s  packages/x/test/one.test.ts");
    expect(lines).not.toContain("Failed:");
    expect(lines.at(-2)).toBe("vitest: 1 passed, 0 failed, 0 skipped");
  });
});
