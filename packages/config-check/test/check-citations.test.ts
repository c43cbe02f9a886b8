import { resolve } from "node:path";
import { REPO_ROOT } from "@gw/devstack";
import { describe, expect, it } from "vitest";
import { citationsOfFile, commentsOf, headingsOf, missingCitations } from "../src/check-citations.ts";
import { knownVariables } from "../src/check-config.ts";

const FIXTURE = resolve(import.meta.dirname, "fixtures/citations");

describe("citations in comments and documents", () => {
  it("flags a cited file or folder, heading or setting that does not exist, and nothing else", async () => {
    expect(await missingCitations(FIXTURE, new Set(["WIDGET_PORT"]))).toEqual([
      "docs/guide.md:5: cites docs/gone.md (no such file or folder)",
      "docs/guide.md:5: cites packages/widget/src/gone.ts (no such file or folder)",
      "docs/guide.md:5: cites deploy/k8s/ (no such file or folder)",
      'docs/guide.md:7: cites "Budgets" in README.md (no such heading)',
      "docs/guide.md:6: cites WIDGET_COLOUR (no configuration schema or code reads such a setting)",
      "packages/widget/src/widget.ts:2: cites docs/adr/0001-widgets.md (no such file or folder)",
      'packages/widget/src/widget.ts:5: cites "Limits" in docs/guide.md (no such heading)',
    ]);
  });

  it("reads a TypeScript file's comments only, never its strings", () => {
    const source =
      'const a = "docs/x.md"; // see docs/y.md\n/* and docs/z.md */\nfetch("http://h/docs/w.md");\n';
    expect(commentsOf(source).map((c) => c.line)).toEqual([1, 2]);
    expect(citationsOfFile("a.ts", source).map((c) => c.target)).toEqual(["docs/y.md", "docs/z.md"]);
  });

  it("finds nothing missing in this repository", async () => {
    expect(await missingCitations(REPO_ROOT, knownVariables())).toEqual([]);
  });
});

describe("headingsOf", () => {
  it("takes headings and the bold labels that open list items, not bold words elsewhere or in code", () => {
    const found = headingsOf(
      [
        "# Operations",
        "- **Client aborts**: logged at info",
        "  * **Traces** (OpenTelemetry): off unless configured",
        "Some **bold words** in a sentence",
        "```",
        "- **In code**",
        "```",
      ].join("\n"),
    );
    expect([...found].sort()).toEqual(["client aborts", "operations", "traces"]);
  });
});
