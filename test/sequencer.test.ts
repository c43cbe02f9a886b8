import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { TestSpecification, Vitest } from "vitest/node";
import Sequencer, { FILE_TIMES } from "./sequencer.ts";

/** Orders `files` (path → project) as the sequencer does, with vitest's kept results and the kept file times. */
async function order(
  files: [string, "shared" | "engine"][],
  kept: Record<string, number>,
  results: Record<string, { duration: number; failed: boolean }> = {},
): Promise<string[]> {
  const root = await mkdtemp(join(tmpdir(), "gw-sequencer-"));
  try {
    await mkdir(join(root, "test"));
    await writeFile(join(root, FILE_TIMES), JSON.stringify(kept));
    const specs = files.map(
      ([file, project]) => ({ moduleId: join(root, file), project: { name: project } }) as TestSpecification,
    );
    const ctx = {
      config: { root },
      cache: {
        getTestSpecificationResult: (spec: TestSpecification) =>
          results[spec.moduleId.slice(root.length + 1)],
      },
    } as unknown as Vitest;
    return (await new Sequencer(ctx).sort(specs)).map((spec) => spec.moduleId.slice(root.length + 1));
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

describe("the order test files start in", () => {
  it("on a fresh clone, longest first by the kept times, a file without one before all; engine files spread among the others", async () => {
    const files: [string, "shared" | "engine"][] = [
      ["s1.test.ts", "shared"],
      ["s2.test.ts", "shared"],
      ["s3.test.ts", "shared"],
      ["s4.test.ts", "shared"],
      ["s5.test.ts", "shared"],
      ["s6.test.ts", "shared"],
      ["new.test.ts", "shared"],
      ["e1.test.ts", "engine"],
      ["e2.test.ts", "engine"],
    ];
    const kept = {
      "s1.test.ts": 1,
      "s2.test.ts": 50,
      "s3.test.ts": 3,
      "s4.test.ts": 40,
      "s5.test.ts": 5,
      "s6.test.ts": 6,
      "e1.test.ts": 2,
      "e2.test.ts": 20,
    };
    expect(await order(files, kept)).toEqual([
      "new.test.ts",
      "s2.test.ts",
      "s4.test.ts",
      "e2.test.ts",
      "s6.test.ts",
      "s5.test.ts",
      "s3.test.ts",
      "e1.test.ts",
      "s1.test.ts",
    ]);
  });

  it("takes vitest's own times and failures over the kept ones", async () => {
    const files: [string, "shared"][] = [
      ["a.test.ts", "shared"],
      ["b.test.ts", "shared"],
      ["c.test.ts", "shared"],
    ];
    const kept = { "a.test.ts": 1, "b.test.ts": 2, "c.test.ts": 3 };
    const results = {
      "a.test.ts": { duration: 9_000, failed: false },
      "b.test.ts": { duration: 10, failed: true },
    };
    expect(await order(files, kept, results)).toEqual(["b.test.ts", "a.test.ts", "c.test.ts"]);
  });
});
