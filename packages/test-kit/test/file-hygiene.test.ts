import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { REPO_ROOT } from "@gw/devstack";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const FIXTURES = resolve(import.meta.dirname, "fixtures/hygiene");

interface JsonReport {
  testResults: { name: string; status: string; message: string }[];
}

describe("file hygiene, between test files sharing a worker", () => {
  it("fails the file that leaves fake timers, an environment change, tracing or the SpiceDB engine behind, and puts back all it can for the next file", async () => {
    const { GW_HYGIENE_ADDED: _, ...env } = process.env;
    const dir = await mkdtemp(join(tmpdir(), "gw-hygiene-"));
    const outputFile = join(dir, "report.json");
    const exit = await run(
      resolve(REPO_ROOT, "node_modules/.bin/vitest"),
      [
        "run",
        "--config",
        resolve(FIXTURES, "vitest.config.ts"),
        "--reporter=json",
        "--outputFile",
        outputFile,
      ],
      { cwd: FIXTURES, env: { ...env, GW_HYGIENE_PRESENT: "kept" } },
    ).then(
      () => 0,
      (failed: { code: number }) => failed.code,
    );
    const report = JSON.parse(await readFile(outputFile, "utf8")) as JsonReport;
    await rm(dir, { recursive: true, force: true });
    expect(exit, "the run fails").toBe(1);
    const byFile = new Map(report.testResults.map((r) => [r.name.split("/").at(-1), r]));
    const failure = (file: string) => {
      const result = byFile.get(file);
      expect(result?.status, file).toBe("failed");
      return result!.message;
    };
    expect(failure("1-leaves-fake-timers.fixture.ts")).toMatch(
      /left its worker process changed.*fake timers on/,
    );
    expect(failure("2-leaves-environment.fixture.ts")).toMatch(
      /environment variables changed: GW_HYGIENE_ADDED, GW_HYGIENE_PRESENT/,
    );
    expect(failure("3-leaves-tracing.fixture.ts")).toMatch(/tracing on/);
    expect(failure("4-loads-engine.fixture.ts")).toMatch(/the SpiceDB engine loaded/);
    expect(byFile.get("5-finds-all-put-back.fixture.ts")?.status).toBe("passed");
    expect(byFile.size).toBe(5);
  });
});
