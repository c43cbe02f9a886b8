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

/** A V8 CPU profile as `--cpu-prof` writes it. */
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
}

/** The newest `.cpuprofile` in `dir`. */
async function newestProfile(dir: string): Promise<Profile> {
  const files = (await readdir(dir)).filter((f) => f.endsWith(".cpuprofile")).sort();
  return JSON.parse(await readFile(join(dir, files.at(-1)!), "utf8")) as Profile;
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
  const profile = await newestProfile(dir);
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

/**
 * What a model call's CPU time is spent on, by the parts the issue names.
 * Each sample goes to the innermost frame of its stack that belongs to one
 * of these (a socket write under the Redis client is Redis; a zod parse
 * under a route is validation); a sample none of them claims goes by its
 * leaf (Node's HTTP and sockets, the garbage collector, other).
 */
const PARTS: [string, RegExp][] = [
  ["tokenizer", /gpt-tokenizer|\/llm\/tokens\.ts/],
  [
    "validation (zod, request schemas)",
    /\/zod\/|\/core\/src\/validation\.ts|\/service\/src\/schema\.ts|\/(completions|responses)\/request\.ts|\/items\/input\.ts/,
  ],
  ["internal assertion (sign, verify, replay guard)", /\/jose\/|internal-assertion\.ts|verify-assertion\.ts/],
  ["usage recording", /\/usage\/store\.ts/],
  [
    "Redis client (ioredis, all commands)",
    /\/ioredis\/|\/redis-parser\/|\/denque\/|\/cluster-key-slot\/|\/core\/src\/redis\.ts/,
  ],
  ["budgets (admission, settlement)", /\/budgets\/|\/core\/src\/windows/],
  [
    "SpiceDB client (grpc-js, authorization)",
    /@grpc\/|@authzed\/|@protobuf-ts\/|protobufjs|\/core\/src\/authz\//,
  ],
  ["PostgreSQL client (pg)", /\/node_modules\/pg(-[a-z-]+)?\/|\/core\/src\/postgres\.ts/],
  ["logging (pino)", /\/pino[^/]*\/|\/sonic-boom\/|\/core\/src\/logger\.ts|thread-stream/],
  ["metrics (prom-client)", /\/prom-client\/|metrics\.ts/],
  ["tracing (OpenTelemetry)", /@opentelemetry|\/core\/src\/tracing\.ts/],
  ["SSE", /\/llm\/sse\.ts|\/(completions|responses)\/stream\.ts/],
  ["provider client (undici)", /undici|\/llm\/provider\.ts|\/llm\/transport\.ts|\/llm\/wire\.ts/],
  [
    "forward to the service (gateway's HTTP client)",
    /\/gateway\/src\/forward\/|node:_http_client|node:_http_agent/,
  ],
  [
    "authentication, principal, rate limit (gateway)",
    /\/gateway\/src\/(authenticate|principal|rate-limit|api-keys)\//,
  ],
  ["model-call pipeline, storage (service)", /\/service\/src\//],
  [
    "HTTP server (Node, Express)",
    /node:_http_|\/express\/|\/router\/|\/body-parser\/|\/raw-body\/|\/on-finished\/|\/finalhandler\/|\/core\/src\/http\//,
  ],
];

/**
 * Milliseconds of CPU per call by part, from the newest profile in `dir`:
 * only the samples taken between `from` and `to` (µs of the monotonic clock
 * `process.hrtime` reads, which V8's profile timestamps share), idle left
 * out, each part's share of the rest times `cpuMs` (the CPU time the
 * process spent in that window: a sample's interval is wall time, which a
 * busy machine stretches), divided by `calls`.
 */
export async function perCallBreakdown(
  dir: string,
  window: { from: number; to: number },
  calls: number,
  cpuMs: number,
): Promise<[string, number][]> {
  const profile = await newestProfile(dir);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const partOf = new Map<number, string>();
  const classify = (leaf: number): string => {
    const known = partOf.get(leaf);
    if (known) return known;
    let part: string | undefined;
    for (let id: number | undefined = leaf; id !== undefined && !part; id = parent.get(id)) {
      const { url } = byId.get(id)!.callFrame;
      part = PARTS.find(([, re]) => re.test(url))?.[0];
    }
    if (!part) {
      const group = groupOf(byId.get(leaf)!);
      part =
        group === "socket and pipe writes (kernel)" || group.startsWith("Node ")
          ? "Node internals (sockets, streams, events)"
          : group === "garbage collector"
            ? "garbage collector"
            : group === "idle (waiting for I/O)"
              ? "idle"
              : "other (V8, program)";
    }
    partOf.set(leaf, part);
    return part;
  };
  const parts = new Map<string, number>();
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i] ?? 0;
    if (at < window.from || at > window.to) return;
    const part = classify(id);
    if (part === "idle") return;
    parts.set(part, (parts.get(part) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const busy = [...parts.values()].reduce((t, us) => t + us, 0);
  return [...parts].map(([part, us]) => [part, ((us / Math.max(1, busy)) * cpuMs) / Math.max(1, calls)]);
}
