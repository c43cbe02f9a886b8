/**
 * The workspace's package graph has no cycle. An edge is a workspace package
 * named in `dependencies` or `devDependencies`: pnpm warns of a cycle through
 * either, so the tests of a package the test kit is built on (core, devstack,
 * spicedb-local) cannot use the kit.
 */
import { readdir, readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { parse } from "yaml";

export interface PackageManifest {
  name: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

/** The package.json of every workspace package, from pnpm-workspace.yaml's `packages` (`dir` or `dir/*`). */
export async function workspaceManifests(root: string): Promise<PackageManifest[]> {
  const workspace = parse(await readFile(resolve(root, "pnpm-workspace.yaml"), "utf8")) as {
    packages: string[];
  };
  const dirs: string[] = [];
  for (const pattern of workspace.packages) {
    if (!pattern.endsWith("/*")) {
      dirs.push(pattern);
      continue;
    }
    const parent = pattern.slice(0, -2);
    const entries = await readdir(resolve(root, parent), { withFileTypes: true });
    for (const entry of entries) if (entry.isDirectory()) dirs.push(`${parent}/${entry.name}`);
  }
  const manifests: PackageManifest[] = [];
  for (const dir of dirs.sort()) {
    const text = await readFile(resolve(root, dir, "package.json"), "utf8").catch(() => undefined);
    if (text !== undefined) manifests.push(JSON.parse(text) as PackageManifest);
  }
  return manifests;
}

/** One line per cycle, `a -> b -> a`; empty when the graph has none. */
export function packageCycles(manifests: PackageManifest[]): string[] {
  const names = new Set(manifests.map((m) => m.name));
  const edges = new Map<string, string[]>();
  for (const m of manifests) {
    const runtime = Object.keys(m.dependencies ?? {});
    const dev = Object.keys(m.devDependencies ?? {});
    edges.set(
      m.name,
      [...new Set([...runtime, ...dev])].filter((name) => names.has(name)),
    );
  }
  return graphCycles(edges).map((cycle) => `package graph: cycle ${cycle}`);
}

/** Each cycle of a directed graph once, `a -> b -> a`, from the names in sorted order; empty when there is none. */
export function graphCycles(edges: Map<string, string[]>): string[] {
  const cycles: string[] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (name: string): void => {
    const at = path.indexOf(name);
    if (at >= 0) {
      cycles.push([...path.slice(at), name].join(" -> "));
      return;
    }
    if (done.has(name)) return;
    path.push(name);
    for (const next of edges.get(name) ?? []) visit(next);
    path.pop();
    done.add(name);
  };
  for (const name of [...edges.keys()].sort()) visit(name);
  return cycles;
}

export async function packageGraphProblems(root: string): Promise<string[]> {
  return packageCycles(await workspaceManifests(root));
}
