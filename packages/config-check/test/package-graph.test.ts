import { REPO_ROOT } from "@gw/devstack";
import { describe, expect, it } from "vitest";
import {
  type PackageManifest,
  packageCycles,
  packageGraphProblems,
  workspaceManifests,
} from "../src/package-graph.ts";

const pkg = (name: string, dependencies: string[] = [], devDependencies: string[] = []): PackageManifest => ({
  name,
  dependencies: Object.fromEntries(dependencies.map((d) => [d, "workspace:*"])),
  devDependencies: Object.fromEntries(devDependencies.map((d) => [d, "workspace:*"])),
});

describe("package graph", () => {
  it("has no cycle in this repository, and reads every workspace package", async () => {
    const names = (await workspaceManifests(REPO_ROOT)).map((m) => m.name);
    expect(names).toEqual(
      expect.arrayContaining([
        "@gw/config-check",
        "@gw/core",
        "@gw/devstack",
        "@gw/e2e",
        "@gw/gateway",
        "@gw/service",
        "@gw/spicedb-local",
        "@gw/test-kit",
      ]),
    );
    expect(await packageGraphProblems(REPO_ROOT)).toEqual([]);
  });

  it("flags the cycle a checker in devstack made: devstack needs the gateway, whose tests need devstack", () => {
    const cycles = packageCycles([
      pkg("@gw/core"),
      pkg("@gw/gateway", ["@gw/core"], ["@gw/devstack"]),
      pkg("@gw/devstack", ["@gw/core", "@gw/gateway"]),
    ]);
    expect(cycles).toEqual(["package graph: cycle @gw/devstack -> @gw/gateway -> @gw/devstack"]);
  });

  it("flags a cycle through runtime dependencies, the test kit's included", () => {
    expect(packageCycles([pkg("@gw/core", ["@gw/test-kit"]), pkg("@gw/test-kit", ["@gw/core"])])).toEqual([
      "package graph: cycle @gw/core -> @gw/test-kit -> @gw/core",
    ]);
  });

  it("flags a package whose tests use the test kit built on it (pnpm install warns of it too)", () => {
    expect(
      packageCycles([
        pkg("@gw/core", ["zod"], ["@gw/test-kit"]),
        pkg("@gw/test-kit", ["@gw/core", "@gw/devstack"]),
        pkg("@gw/devstack", ["@gw/core"]),
      ]),
    ).toEqual([
      "package graph: cycle @gw/core -> @gw/test-kit -> @gw/core",
      "package graph: cycle @gw/core -> @gw/test-kit -> @gw/devstack -> @gw/core",
    ]);
  });

  it("lets the tests of a package the kit is not built on use it, and ignores packages outside the workspace", () => {
    expect(
      packageCycles([
        pkg("@gw/core", ["zod"]),
        pkg("@gw/test-kit", ["@gw/core", "@gw/devstack"]),
        pkg("@gw/devstack", ["@gw/core"]),
        pkg("@gw/gateway", ["@gw/core", "express"], ["@gw/test-kit"]),
      ]),
    ).toEqual([]);
  });
});
