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
  callFrame: { functionName: string; url: string };
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
  const files = (await readdir(dir)).filter((f) => f.endsWith(".cpuprofile")).sort();
  const profile = JSON.parse(await readFile(join(dir, files.at(-1)!), "utf8")) as {
    nodes: ProfileNode[];
    samples: number[];
    timeDeltas: number[];
  };
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const groups = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    const group = groupOf(byId.get(id)!);
    groups.set(group, (groups.get(group) ?? 0) + delta);
    total += delta;
  });
  return [...groups]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([group, time]) => [group, time / total]);
}
