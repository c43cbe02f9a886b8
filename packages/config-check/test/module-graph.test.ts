import { REPO_ROOT } from "@gw/devstack";
import { describe, expect, it } from "vitest";
import { moduleCycles, moduleGraphProblems, runtimeImports } from "../src/module-graph.ts";

describe("module graph", () => {
  it("has no cycle among this repository's source modules", async () => {
    expect(await moduleGraphProblems(REPO_ROOT)).toEqual([]);
  });

  it("flags two modules that import each other, as the response turn and the hosted MCP turn did", () => {
    const cycles = moduleCycles(
      new Map([
        ["responses/turn.ts", ["responses/hosted-mcp.ts", "responses/store.ts"]],
        ["responses/hosted-mcp.ts", ["responses/turn.ts"]],
        ["responses/store.ts", []],
      ]),
    );
    expect(cycles).toEqual([
      "module graph: cycle responses/hosted-mcp.ts -> responses/turn.ts -> responses/hosted-mcp.ts",
    ]);
  });

  it("counts imports and re-exports that run, not type-only ones nor packages", () => {
    const text = [
      'import { a } from "./a.ts";',
      'import type { B } from "./b.ts";',
      'import { type C, type D } from "./c.ts";',
      'import { type E, e } from "./e.ts";',
      'import f from "../f.ts";',
      'import "./g.ts";',
      'export * from "./h.ts";',
      'export type { I } from "./i.ts";',
      'import { z } from "zod";',
    ].join("\n");
    expect(runtimeImports("x.ts", text)).toEqual(["./a.ts", "./e.ts", "../f.ts", "./g.ts", "./h.ts"]);
  });
});
