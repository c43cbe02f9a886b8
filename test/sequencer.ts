import { readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/** One file of the `engine` project (a fresh worker each, partly waiting on time) after this many others. */
const ENGINE_EVERY = 3;

/** Where each file's time of a whole run is kept for the next fresh clone (`TEST_WRITE_FILE_TIMES=1 pnpm test`). */
export const FILE_TIMES = "test/file-times.json";

/** The kept times: file (from the project's root) → seconds; none when the file is missing or unreadable. */
export function keptFileTimes(root: string): Record<string, number> {
  try {
    return JSON.parse(readFileSync(join(root, FILE_TIMES), "utf8")) as Record<string, number>;
  } catch {
    return {};
  }
}

/**
 * The order files start in (`vitest.config.ts`). On a 2-core machine the run is bound by CPU, and it ends
 * soonest when the longest files start first and the short ones fill the end:
 *
 * - A file that failed in the last run goes first, then the longest by the time vitest kept of it
 *   (`node_modules/.vite`), as vitest's own order; a file vitest has no time of (every file on a fresh
 *   clone) by its time in `test/file-times.json`, and a file with neither first of all. vitest orders files
 *   without times by size, which on a fresh clone left files that wait out expiries for the run's end.
 * - vitest starts one project's files before another's, so the `engine` project's seven files took every
 *   worker for the run's first 15 s, a third of it idle (they wait out consistency windows and restarts);
 *   they are spread among the other project's first files instead.
 */
export default class Sequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const { cache, config } = this.ctx;
    const kept = keptFileTimes(config.root);
    const expected = (spec: TestSpecification) => {
      const result = cache.getTestSpecificationResult(spec);
      if (result) return result.failed ? Number.POSITIVE_INFINITY : result.duration;
      const seconds = kept[relative(config.root, spec.moduleId)];
      return seconds === undefined ? Number.POSITIVE_INFINITY : seconds * 1000;
    };
    const times = new Map(files.map((spec) => [spec, expected(spec)]));
    const sorted = [...files].sort((a, b) => (times.get(b) ?? 0) - (times.get(a) ?? 0));
    const engine = sorted.filter((spec) => spec.project.name === "engine");
    const order: TestSpecification[] = [];
    for (const [i, spec] of sorted.filter((s) => s.project.name !== "engine").entries()) {
      if (i > 0 && i % ENGINE_EVERY === 0 && engine.length > 0) order.push(engine.shift()!);
      order.push(spec);
    }
    return [...order, ...engine];
  }
}
