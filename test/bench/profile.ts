/**
 * Where a process spends its time, from a V8 `.cpuprofile` (`node
 * --cpu-prof`): self time grouped by what it is (the kernel calls behind
 * socket and file writes, the garbage collector, each package, the project's
 * own code).
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber?: number };
  children?: number[];
}

function groupOf(node: ProfileNode): string {
  const { url, functionName } = node.callFrame;
  const pkg = /node_modules\/\.pnpm\/[^/]+\/node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return `package ${pkg}`;
  const own = /\/(packages\/[^/]+)\//.exec(url)?.[1];
  if (own && !url.includes("node_modules")) return `project ${own}`;
  if (url.startsWith("node:")) return `Node ${url.slice(5).split("/")[0]}`;
  if (["writev", "writeUtf8String", "writeString", "writeBuffer"].includes(functionName))
    return "socket and pipe writes (kernel)";
  if (functionName === "(idle)") return "idle (waiting for I/O)";
  if (functionName === "(garbage collector)") return "garbage collector";
  return functionName || "other";
}

/** The newest profile in `dir`: share of samples by group, largest first. */
export async function summarizeProfile(dir: string, top = 12): Promise<[string, number][]> {
  return selfTime(dir, groupOf, top);
}

/** The functions of the project and its packages with the most self time, as `name (package or file:line)`. */
export async function topFunctions(dir: string, top = 15): Promise<[string, number][]> {
  return selfTime(
    dir,
    (node) => {
      const group = groupOf(node);
      if (!group.startsWith("package ") && !group.startsWith("project ")) return undefined;
      const { url, functionName } = node.callFrame;
      const where = group.startsWith("project ")
        ? `${/\/(packages\/.+)$/.exec(url)?.[1] ?? url}:${(node.callFrame.lineNumber ?? 0) + 1}`
        : group.slice("package ".length);
      return `${functionName || "(anonymous)"} (${where})`;
    },
    top,
  );
}

/** Share of all samples of the newest profile in `dir`, by `keyOf` (undefined: left out), largest first. */
async function selfTime(
  dir: string,
  keyOf: (node: ProfileNode) => string | undefined,
  top: number,
): Promise<[string, number][]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith(".cpuprofile")).sort();
  const profile = JSON.parse(await readFile(join(dir, files.at(-1)!), "utf8")) as {
    nodes: ProfileNode[];
    samples: number[];
    timeDeltas: number[];
  };
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const keys = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    total += delta;
    const key = keyOf(byId.get(id)!);
    if (key !== undefined) keys.set(key, (keys.get(key) ?? 0) + delta);
  });
  return [...keys]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([key, time]) => [key, time / total]);
}
