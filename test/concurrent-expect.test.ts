import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";

/**
 * vitest's global `expect` knows the test it runs in only as the one that started last, and none once a
 * test has ended: where blocks of tests run beside each other (`describeEachTopology` runs its topologies
 * so), `expect.poll` through the global `expect`, after a test of the other block has ended, throws
 * "expect.poll() must be called inside a test". A keys CLI test failed so once, on a loaded machine. A
 * test of such a block that polls (or asserts softly, or counts its assertions) takes its own `expect`,
 * from its context. Barriers force the order here; then every test file whose blocks run beside each
 * other is read for the global one.
 */
const aStarted = Promise.withResolvers<void>();
const bEnded = Promise.withResolvers<void>();
/** The global `expect`, by another name: what the scan below looks for is the name `expect`. */
const globalExpect = expect;

describe("expect.poll while a test of another block ends", () => {
  describe("block A", { concurrent: true }, () => {
    describe("in turn", { concurrent: false }, () => {
      it("polls through its own expect", async ({ expect }) => {
        aStarted.resolve();
        await bEnded.promise;
        // The order happened: the global `expect` has lost this test.
        globalExpect(() => globalExpect.poll(() => 1)).toThrow("expect.poll() must be called inside a test");
        await expect.poll(() => 1).toBe(1);
      });
    });
  });

  describe("block B", { concurrent: true }, () => {
    describe("in turn", { concurrent: false }, () => {
      it("ends while block A's test waits", async () => {
        await aStarted.promise;
      });
      // Runs once the block's last test has ended.
      afterAll(() => bEnded.resolve());
    });
  });
});

const ROOT = resolve(import.meta.dirname, "..");
const CONTEXT_BOUND = new Set(["poll", "soft", "assertions", "hasAssertions"]);
const TEST_CALLS = new Set(["it", "test"]);

/** Where a file calls `expect.poll` (and the like) in a test that did not take its own `expect`: `path:line`. */
function globalContextBoundCalls(path: string): string[] {
  const text = readFileSync(path, "utf8");
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const takesItsOwnExpect = (fn: ts.SignatureDeclaration) => {
    const first = fn.parameters[0]?.name;
    return (
      first !== undefined &&
      ts.isObjectBindingPattern(first) &&
      first.elements.some((e) => ts.isIdentifier(e.name) && e.name.text === "expect")
    );
  };
  const visit = (node: ts.Node, inTest: ts.SignatureDeclaration | undefined) => {
    let test = inTest;
    if (
      (ts.isArrowFunction(node) || ts.isFunctionExpression(node)) &&
      ts.isCallExpression(node.parent) &&
      TEST_CALLS.has(node.parent.expression.getText(source).split(".")[0] ?? "")
    )
      test = node;
    if (
      ts.isPropertyAccessExpression(node) &&
      ts.isIdentifier(node.expression) &&
      node.expression.text === "expect" &&
      CONTEXT_BOUND.has(node.name.text) &&
      !(test && takesItsOwnExpect(test))
    )
      found.push(
        `${relative(ROOT, path)}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}`,
      );
    node.forEachChild((child) => visit(child, test));
  };
  visit(source, undefined);
  return found;
}

describe("test files whose blocks run beside each other", () => {
  const files = execFileSync("git", ["ls-files", "*.test.ts"], { cwd: ROOT, encoding: "utf8" })
    .split("\n")
    .filter(Boolean)
    .map((file) => resolve(ROOT, file))
    .filter((path) => /describeEachTopology|concurrent: true/.test(readFileSync(path, "utf8")));

  it("are found (the ones that run Redis's topologies side by side among them)", () => {
    expect(files.some((path) => path.endsWith("packages/gateway/src/cli/keys.test.ts"))).toBe(true);
  });

  it("poll, assert softly and count assertions only through the test's own expect", () => {
    expect(files.flatMap(globalContextBoundCalls)).toEqual([]);
  });

  it("the scan finds a global expect.poll in a test without its own expect, and not one with it", () => {
    // Made-up file contents, through the same scan.
    const dir = mkdtempSync(join(tmpdir(), "gw-concurrent-expect-"));
    const scan = (code: string) => {
      const path = join(dir, "sample.test.ts");
      writeFileSync(path, code);
      return globalContextBoundCalls(path).map((at) => at.slice(at.lastIndexOf(":") + 1));
    };
    try {
      expect(scan(`it("a", async () => {\n  await expect.poll(() => 1).toBe(1);\n});\n`)).toEqual(["2"]);
      expect(scan(`it("a", async ({ expect }) => {\n  await expect.poll(() => 1).toBe(1);\n});\n`)).toEqual(
        [],
      );
      expect(scan(`it("a", async () => {\n  expect.soft(1).toBe(1);\n});\n`)).toEqual(["2"]);
      expect(scan(`it("a", async () => {\n  expect(1).toBe(1);\n});\n`)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
