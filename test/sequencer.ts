import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/** One file of the `engine` project (fresh worker each, partly waiting on time) after this many others. */
const ENGINE_EVERY = 3;

/**
 * The order files start in (`vitest.config.ts`): vitest's own (a file that failed last run first, then
 * the longest by the times it keeps in `node_modules/.vite`; without times, as on a fresh clone, the
 * largest file first), with two changes for a 2-core machine where the run is bound by CPU:
 *
 * - Without times for most files, the end-to-end tests (`test/e2e/`, each a `pnpm start` or more and
 *   the longest files) go first: by size they came late, and the run ended waiting on the last of them.
 * - vitest starts one project's files before another's, so the `engine` project's seven files took
 *   every worker for the run's first 15 s, a third of it idle (they wait out consistency windows and
 *   restarts); they are spread among the first files of the other project instead.
 */
export default class Sequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const known = sorted.filter((spec) => this.ctx.cache.getTestSpecificationResult(spec)).length;
    const endToEnd = (spec: TestSpecification) =>
      relative(this.ctx.config.root, spec.moduleId).startsWith("test/e2e/");
    const shared = sorted.filter((spec) => spec.project.name !== "engine");
    const engine = sorted.filter((spec) => spec.project.name === "engine");
    const others =
      known >= sorted.length / 2
        ? shared
        : [...shared.filter(endToEnd), ...shared.filter((spec) => !endToEnd(spec))];
    const order: TestSpecification[] = [];
    for (const [i, spec] of others.entries()) {
      if (i > 0 && i % ENGINE_EVERY === 0 && engine.length > 0) order.push(engine.shift()!);
      order.push(spec);
    }
    return [...order, ...engine];
  }
}
