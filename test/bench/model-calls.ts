/**
 * Model calls through the gateway beside the same fake provider called
 * directly, in one run (issue: "a model call that costs what the fastest
 * gateways cost"): added latency at concurrency 1, calls alternating; CPU per
 * call at 16 connections from each process's own CPU time (gateway, service,
 * Redis, the local SpiceDB); the same with a token budget on the key; the
 * cost of tracing at sampling ratios 1 and 0.01; and CPU profiles of gateway
 * and service under load. Every process is its own: the fake provider, Redis,
 * PostgreSQL, the local SpiceDB, and a gateway and service per variant.
 *
 * `BENCH_MODEL_CALLS` calls per row at concurrency 1 (default 300),
 * `BENCH_MODEL_SECONDS` seconds per load at 16 connections (default 5),
 * `BENCH_MODEL_PROFILE_SECONDS` seconds of load under the profiler (default 10).
 * Alone: `pnpm exec node test/bench/model-calls.ts` (prints; `BENCH_OUTPUT`
 * writes a report).
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ASSERTION_HEADER, InternalAssertions } from "@gw/core/internal-assertion";
import type { Limits } from "@gw/core/limits";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { createRedis } from "@gw/core/redis";
import {
  freePort,
  REPO_ROOT,
  type RunningNodeProcess,
  startNodeProcess,
  startSpiceDBLocalProcess,
} from "@gw/devstack";
import { ApiKeyStore } from "@gw/gateway";
import { startTestPostgres, startTestRedis } from "@gw/test-kit";
import { benchStackEnv, cpuMs, load, startBareProxy } from "./http.ts";
import { perCallBreakdown, summarizeProfile, topFunctions } from "./profile.ts";
import { Report } from "./report.ts";

const CALLS = Number(process.env.BENCH_MODEL_CALLS ?? 300);
const SECONDS = Number(process.env.BENCH_MODEL_SECONDS ?? 5);

export const CHAT = "/api/v1/llm/chat/completions";
export const RESPONSES = "/api/v1/llm/responses";
const MESSAGES = [{ role: "user", content: "What is the capital of France? Answer in one word." }];
export const chatBody = (stream = false) =>
  JSON.stringify({ model: "echo-small", messages: MESSAGES, ...(stream ? { stream: true } : {}) });
export const responseBody = (store: boolean) =>
  JSON.stringify({ model: "echo-small", input: MESSAGES[0]!.content, store });

interface Pair {
  name: string;
  gateway: RunningNodeProcess;
  service: RunningNodeProcess;
}

export interface ModelStack {
  provider: RunningNodeProcess;
  providerUrl: string;
  /** The provider through `test/bench/bare-proxy.ts`: the floor of any Node proxy. */
  bareProxyUrl: string;
  pids: { redis: number; spicedb: number; bareProxy: number };
  redisUrl: string;
  pairs: Map<string, Pair>;
  plainKey: string;
  /** The plain key's id, and the secret gateway and service share: to call a service directly as the gateway would. */
  plainKeyId: string;
  assertionSecret: string;
  budgetKey: string;
  spans: () => number;
  startPair(
    name: string,
    env?: NodeJS.ProcessEnv,
    nodeOptions?: (process: "gateway" | "service") => string,
    /** Another checkout of the repository to run gateway and service from (a before/after comparison). */
    root?: string,
  ): Promise<Pair>;
  /** The gateway with the service in its process (`packages/gateway-with-service`): one process, its `service` the service's own listener. */
  startOneProcess(
    name: string,
    env?: NodeJS.ProcessEnv,
    /** Another checkout of the repository to run it from (a before/after comparison). */
    root?: string,
  ): Promise<Pair>;
  close(): Promise<void>;
}

/** An OTLP/HTTP receiver that accepts every export and counts the bytes: where traced variants send spans. */
async function startCollector(): Promise<{ url: string; bytes: () => number; server: Server }> {
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on("end", () => res.writeHead(200, { "content-type": "application/x-protobuf" }).end());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    bytes: () => bytes,
    server,
  };
}

export async function startModelStack(): Promise<ModelStack> {
  const [redis, postgres] = await Promise.all([startTestRedis(), startTestPostgres()]);
  const dataDir = await mkdtemp(join(tmpdir(), "gw-bench-model-"));
  const spicedbPort = await freePort();
  const spicedb = await startSpiceDBLocalProcess({
    port: spicedbPort,
    env: { PATH: process.env.PATH, LOG_LEVEL: "warn", DATA_DIR: dataDir },
  });
  const providerPort = await freePort();
  const providerUrl = `http://127.0.0.1:${providerPort}/v1`;
  const provider = await startNodeProcess({
    name: "fake-provider",
    entry: "packages/test-kit/src/llm-upstream.ts",
    port: providerPort,
    env: { PATH: process.env.PATH },
    isReady: () =>
      fetch(`${providerUrl}/chat/completions`, { method: "POST", body: chatBody() }).then(
        (r) => r.ok,
        () => false,
      ),
    outputFile: join(dataDir, "provider.log"),
  });
  const bare = await startBareProxy(`http://127.0.0.1:${providerPort}`, join(dataDir, "bare-proxy.log"));
  const collector = await startCollector();
  const common: NodeJS.ProcessEnv = {
    ...benchStackEnv({ redis: redis.url, postgres: postgres.url, spicedbPort, dataDir, logLevel: "info" }),
    LLM_BASE_URL: providerUrl,
    LLM_DEFAULT_MODEL: "echo-small",
  };
  const pairs = new Map<string, Pair>();
  const startPair = async (
    name: string,
    env: NodeJS.ProcessEnv = {},
    nodeOptions?: (process: "gateway" | "service") => string,
    root = REPO_ROOT,
  ) => {
    const options = (of: "gateway" | "service") => (nodeOptions ? { NODE_OPTIONS: nodeOptions(of) } : {});
    const service = await startNodeProcess({
      name: `service-${name}`,
      entry: join(root, "packages/service/src/main.ts"),
      port: await freePort(),
      env: { ...common, ...env, ...options("service") },
      outputFile: join(dataDir, `service-${name}.log`),
    });
    const gateway = await startNodeProcess({
      name: `gateway-${name}`,
      entry: join(root, "packages/gateway/src/main.ts"),
      port: await freePort(),
      env: { ...common, ...env, ...options("gateway"), SERVICE_URL: service.url },
      outputFile: join(dataDir, `gateway-${name}.log`),
    });
    const pair = { name, gateway, service };
    pairs.set(name, pair);
    return pair;
  };
  const startOneProcess = async (name: string, env: NodeJS.ProcessEnv = {}, root = REPO_ROOT) => {
    const servicePort = await freePort();
    const gateway = await startNodeProcess({
      name,
      entry: join(root, "packages/gateway-with-service/src/main.ts"),
      port: await freePort(),
      env: { ...common, ...env, SERVICE_PORT: String(servicePort) },
      outputFile: join(dataDir, `${name}.log`),
    });
    // The same process: stopped once, with the gateway.
    const service = { ...gateway, url: `http://127.0.0.1:${servicePort}`, stop: async () => undefined };
    const pair = { name, gateway, service };
    pairs.set(name, pair);
    return pair;
  };
  const client = createRedis(redis.url, { connectionName: "bench-setup" });
  const store = new ApiKeyStore(client);
  const permissions = [...DEFAULT_PERMISSIONS];
  const plain = await store.create({ org: "bench", owner: "alice", permissions });
  const plainKey = plain.secret;
  const budget: Limits = { tokens: { minute: 1e12, day: 1e12 } };
  const budgetKey = (await store.create({ org: "bench", owner: "alice", permissions, limits: budget }))
    .secret;
  client.disconnect();
  return {
    provider,
    providerUrl,
    bareProxyUrl: `${bare.url}/v1`,
    pids: { redis: redis.process.pid!, spicedb: spicedb.process.pid!, bareProxy: bare.process.pid! },
    redisUrl: redis.url,
    pairs,
    plainKey,
    plainKeyId: plain.record.id,
    assertionSecret: String(common.INTERNAL_ASSERTION_SECRET),
    budgetKey,
    spans: collector.bytes,
    startPair,
    startOneProcess,
    async close() {
      await Promise.all([...pairs.values()].flatMap((p) => [p.gateway.stop(), p.service.stop()]));
      await Promise.all([provider.stop(), bare.stop(), spicedb.stop()]);
      collector.server.close();
      await Promise.all([redis.stop(), postgres.stop()]);
      await rm(dataDir, { recursive: true, force: true });
    },
    // The traced variants' collector, for their environment.
    ...{ collectorUrl: collector.url },
  } as ModelStack & { collectorUrl: string };
}

/** One call's latency in ms: to the whole answer, or (`firstByte`) to the first byte of the body. */
export async function timedCall(
  url: string,
  headers: Record<string, string>,
  body: string,
  firstByte = false,
) {
  const started = performance.now();
  const res = await fetch(url, { method: "POST", headers, body });
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status} ${await res.text()}`);
  if (firstByte) {
    const reader = res.body!.getReader();
    await reader.read();
    const ms = performance.now() - started;
    while (!(await reader.read()).done);
    return ms;
  }
  await res.arrayBuffer();
  return performance.now() - started;
}

export const p50 = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};
const ms = (v: number) => `${v.toFixed(2)} ms`;

/** `calls` of each function, in turn (a, b, c, a, b, c…); the p50 of each (after 20 warm-up calls of each). */
async function alternateAll(fns: readonly (() => Promise<number>)[], calls = CALLS): Promise<number[]> {
  const times = fns.map(() => [] as number[]);
  for (let i = 0; i < 20 + calls; i++) {
    for (const [n, fn] of fns.entries()) {
      const t = await fn();
      if (i >= 20) times[n]!.push(t);
    }
  }
  return times.map(p50);
}

/** `alternateAll` of two. */
async function alternate(a: () => Promise<number>, b: () => Promise<number>, calls = CALLS) {
  const [pa, pb] = await alternateAll([a, b], calls);
  return [pa!, pb!] as const;
}

const json = { "content-type": "application/json" };
export const bearer = (key: string) => ({
  ...json,
  authorization: `Bearer ${key}`,
  "x-on-behalf-of": "alice",
});

/** The rows of the added-latency table for gateways at `urls`: the provider's p50, then each gateway's. */
async function addedLatency(stack: ModelStack, urls: readonly string[], key: string) {
  const direct =
    (stream = false) =>
    () =>
      timedCall(`${stack.providerUrl}/chat/completions`, json, chatBody(stream), stream);
  const through = (path: string, body: string, stream = false) =>
    urls.map((url) => () => timedCall(`${url}${path}`, bearer(key), body, stream));
  const rows: [string, number, ...number[]][] = [];
  const add = async (name: string, d: () => Promise<number>, gs: (() => Promise<number>)[]) => {
    const [dp, ...gps] = await alternateAll([d, ...gs]);
    rows.push([name, dp!, ...gps]);
  };
  await add("chat completion, not stored", direct(), through(CHAT, chatBody()));
  await add("response, `store: false`", direct(), through(RESPONSES, responseBody(false)));
  await add("response, stored", direct(), through(RESPONSES, responseBody(true)));
  await add("streamed chat completion, first byte", direct(true), through(CHAT, chatBody(true), true));
  return rows;
}

/** A chat completion (not stored) to the provider and through each path in front of it, by name: one call each. */
function chatPaths(stack: ModelStack, pair: Pair, one: Pair): [string, () => Promise<number>][] {
  const body = chatBody();
  return [
    ["to the provider", () => timedCall(`${stack.providerUrl}/chat/completions`, json, body)],
    [
      "through a bare Node proxy (the floor)",
      () => timedCall(`${stack.bareProxyUrl}/chat/completions`, json, body),
    ],
    [
      "through the gateway, the service its own process",
      () => timedCall(`${pair.gateway.url}${CHAT}`, bearer(stack.plainKey), body),
    ],
    [
      "through the gateway, the service in its process",
      () => timedCall(`${one.gateway.url}${CHAT}`, bearer(stack.plainKey), body),
    ],
  ];
}

/**
 * The same calls at concurrency 1, alternating call by call (as every table above) and in blocks: each
 * path called `BLOCK` times in a row, the blocks alternating, the first call of each block left out. Call
 * by call, each process sits idle while the others' calls run and answers its next request later; in
 * blocks it is answering back to back, as under steady traffic. Chat completions, not stored.
 */
async function warmOrIdle(report: Report, stack: ModelStack, pair: Pair, one: Pair) {
  const BLOCK = 10;
  const paths = chatPaths(stack, pair, one);
  const interleaved = await alternateAll(paths.map(([, call]) => call));
  const blocks = paths.map(() => [] as number[]);
  for (let round = 0; round < Math.ceil(CALLS / BLOCK); round++)
    for (const [n, [, call]] of paths.entries()) {
      await call();
      for (let i = 0; i < BLOCK; i++) blocks[n]!.push(await call());
    }
  const warm = blocks.map(p50);
  report.section(
    "Model calls: call by call, or back to back",
    `Chat completions (not stored) at concurrency 1 through the same paths, measured two ways in one run: alternating call by call (${CALLS} calls each after 20 warm-up calls, as every table above), and in blocks of ${BLOCK} calls of one path in a row, the blocks alternating, the first call of each block left out (${Math.ceil(CALLS / BLOCK) * BLOCK} calls each). Call by call, each process waits idle while the other paths' calls run, and a process that has slept answers its next request later on this virtual machine; in blocks it answers back to back, as under steady traffic at concurrency 1. "Added" is beside the provider measured the same way.`,
  );
  report.table(
    ["path", "call by call, p50", "added", "back to back, p50", "added"],
    paths.map(([name], n) => [
      name,
      ms(interleaved[n]!),
      n === 0 ? "–" : ms(interleaved[n]! - interleaved[0]!),
      ms(warm[n]!),
      n === 0 ? "–" : ms(warm[n]! - warm[0]!),
    ]),
  );
}

/**
 * What the gateway and its hop cost at concurrency 1: chat completions sent
 * to the service directly, with an assertion the bench signs as the gateway
 * would (no gateway, no hop), beside the provider, the gateway in front of
 * its own service process and the gateway with the service in its process
 * (docs/adr/0026-service-in-the-gateways-process.md).
 */
async function withoutTheGateway(report: Report, stack: ModelStack, pair: Pair, one: Pair): Promise<void> {
  const assertions = new InternalAssertions(stack.assertionSecret);
  const principal = {
    org: "bench",
    user: "alice",
    keyId: stack.plainKeyId,
    permissions: [...DEFAULT_PERMISSIONS],
    credential: "api_key" as const,
    onBehalfOf: true,
  };
  const [toProvider, throughBare, throughGateway, throughOne] = chatPaths(stack, pair, one).map(
    ([, call]) => call,
  );
  const [direct, bare, service, gateway, inProcess] = await alternateAll([
    toProvider!,
    throughBare!,
    async () => {
      const requestId = randomUUID();
      const assertion = await assertions.sign(
        principal,
        { method: "POST", path: CHAT, requestId },
        { limits: {} },
      );
      const headers = { ...json, [ASSERTION_HEADER]: assertion, "x-request-id": requestId };
      return timedCall(`${pair.service.url}${CHAT}`, headers, chatBody());
    },
    throughGateway!,
    throughOne!,
  ]);
  report.section(
    "Model calls: the gateway and its hop to the service",
    `Chat completions (not stored) at concurrency 1, ${CALLS} calls each after 20 warm-up calls, the five alternating: to the provider, through a bare Node proxy in front of it (\`test/bench/bare-proxy.ts\`: \`node:http\` and a pooled undici client, no logic: the least any Node proxy adds), to the service directly (with an assertion the bench signs as the gateway would: no gateway, no hop), through the gateway in front of the service's process (the default deployment), and through the gateway with the service in its process (\`SERVICE_IN_GATEWAY\`, docs/adr/0026-service-in-the-gateways-process.md).`,
  );
  report.table(
    ["path", "p50", "added beside the provider"],
    [
      ["to the provider", ms(direct!), "–"],
      ["through a bare Node proxy (no logic: the floor)", ms(bare!), ms(bare! - direct!)],
      ["to the service directly (no gateway, no hop)", ms(service!), ms(service! - direct!)],
      ["through the gateway, the service its own process", ms(gateway!), ms(gateway! - direct!)],
      ["through the gateway, the service in its process", ms(inProcess!), ms(inProcess! - direct!)],
      ["the gateway and its hop (two processes)", "", ms(gateway! - service!)],
      ["the gateway (one process)", "", ms(inProcess! - service!)],
      ["the gateway with the service in its process, beyond the floor", "", ms(inProcess! - bare!)],
    ],
  );
}

/** Redis commands gateway and service have sent so far, from their own metrics (a script is one command). */
async function redisCommands(pair: Pair): Promise<number> {
  let total = 0;
  // One process has two registries: the gateway's on its port, the service's on its own listener.
  for (const url of new Set([pair.gateway.url, pair.service.url])) {
    const text = await (await fetch(`${url}/metrics`)).text();
    for (const line of text.split("\n"))
      if (line.startsWith("redis_client_command_duration_seconds_count"))
        total += Number(line.split(" ").at(-1));
  }
  return total;
}

/** Requests per second, CPU per call of each process and Redis commands per call, at 16 connections for SECONDS. */
/** The processes a call through `pair` spends CPU in. */
const callPids = (stack: ModelStack, pair: Pair) => ({
  gateway: pair.gateway.process.pid!,
  service: pair.service.process.pid!,
  redis: stack.pids.redis,
  spicedb: stack.pids.spicedb,
});

/** Each of `pids`' CPU milliseconds from now until the function returned is called. */
function cpuSince<K extends string>(pids: Record<K, number>): () => Record<K, number> {
  const names = Object.keys(pids) as K[];
  const before = names.map((n) => cpuMs(pids[n]));
  return () => Object.fromEntries(names.map((n, i) => [n, cpuMs(pids[n]) - before[i]!])) as Record<K, number>;
}

/**
 * `target` at 16 connections for SECONDS after 1 s of warm-up: each of `pids`' CPU per call answered in
 * the measured window, and what `count` (read at the window's start and end) went up by per call.
 */
async function cpuPerCallOf<K extends string>(
  target: Omit<Parameters<typeof load>[0], "connections" | "seconds">,
  pids: Record<K, number>,
  count: () => Promise<number> = async () => 0,
) {
  await load({ ...target, connections: 16, seconds: 1 });
  const counted = await count();
  const spent = cpuSince(pids);
  const sample = await load({ ...target, connections: 16, seconds: SECONDS });
  const per = spent();
  const calls = Math.max(1, sample.total);
  for (const n of Object.keys(per) as K[]) per[n] /= calls;
  return { sample, per, counted: ((await count()) - counted) / calls };
}

/**
 * CPU per chat completion of the bare Node proxy (`test/bench/bare-proxy.ts`), held to `rate` calls a
 * second (a process answering more calls a second spends less on each: more of them share each wake-up).
 */
async function floorCpuPerCall(stack: ModelStack, rate: number) {
  const target = {
    url: `${stack.bareProxyUrl}/chat/completions`,
    method: "POST" as const,
    headers: json,
    body: chatBody(),
    overallRate: Math.max(1, Math.round(rate)),
  };
  const { sample, per } = await cpuPerCallOf(target, { proxy: stack.pids.bareProxy });
  return { sample, proxy: per.proxy };
}

export async function cpuPerCall(stack: ModelStack, pair: Pair, path: string, body: string, key: string) {
  const pids = callPids(stack, pair);
  const target = { url: `${pair.gateway.url}${path}`, method: "POST" as const, headers: bearer(key), body };
  const { sample, per, counted: commands } = await cpuPerCallOf(target, pids, () => redisCommands(pair));
  // The service in the gateway's process: its CPU is in the gateway's column.
  if (pids.service === pids.gateway) per.service = 0;
  return { sample, per, total: per.gateway + per.service + per.redis, commands };
}

export async function benchModelCalls(report: Report): Promise<void> {
  const stack = (await startModelStack()) as ModelStack & { collectorUrl: string };
  try {
    const plain = await stack.startPair("plain");
    const one = await stack.startOneProcess("one-process");
    report.section(
      "Model calls: added latency beside the provider called directly",
      `The same fake OpenAI-compatible provider (its own process, on loopback), called directly, through gateway and service as two processes (the default deployment) and through the gateway with the service in its process (\`SERVICE_IN_GATEWAY\`), the three alternating, one call at a time, ${CALLS} calls each after 20 warm-up calls; p50. A response is compared with the direct chat completion it makes. Goals (issue 44): added p50 under 1 ms not stored and to a stream's first byte, under 3 ms for a stored response.`,
    );
    const urls = [plain.gateway.url, one.gateway.url];
    const rows = await addedLatency(stack, urls, stack.plainKey);
    const budgetRows = await addedLatency(stack, urls, stack.budgetKey);
    const table = (list: [string, number, ...number[]][], suffix = "") =>
      list.map(([name, d, two, inOne]) => [
        `${name}${suffix}`,
        ms(d),
        ms(two!),
        ms(two! - d),
        ms(inOne!),
        ms(inOne! - d),
      ]);
    report.table(
      [
        "call",
        "direct to the provider",
        "two processes",
        "added (p50)",
        "the service in the gateway's process",
        "added (p50)",
      ],
      [...table(rows), ...table(budgetRows, ", token budget on the key")],
    );

    await withoutTheGateway(report, stack, plain, one);
    await warmOrIdle(report, stack, plain, one);

    report.section(
      "Model calls: CPU per call at 16 connections",
      `${SECONDS} s of each call at 16 connections (autocannon, after 1 s of warm-up), CPU time each process spent (from /proc), divided by the calls answered. Goal: gateway + service + Redis under 0.5 ms per call. "One process": the gateway with the service in its process, whose CPU is all in the gateway's column. The last row is the bare Node proxy in front of the same provider (\`test/bench/bare-proxy.ts\`: no logic, no Redis), its CPU in the gateway's column, held to the calls a second the one process answered: what any Node proxy spends on one call's two HTTP exchanges.`,
    );
    const cpuRows: (string | number)[][] = [];
    const loads: [string, Pair, string, string, string][] = [
      ["chat completion, not stored", plain, CHAT, chatBody(), stack.plainKey],
      ["chat completion, not stored, token budget", plain, CHAT, chatBody(), stack.budgetKey],
      ["response, `store: false`", plain, RESPONSES, responseBody(false), stack.plainKey],
      ["response, stored", plain, RESPONSES, responseBody(true), stack.plainKey],
      ["chat completion, not stored, one process", one, CHAT, chatBody(), stack.plainKey],
      ["response, stored, one process", one, RESPONSES, responseBody(true), stack.plainKey],
    ];
    let oneProcessRate = 0;
    for (const [name, pair, path, body, key] of loads) {
      const { sample, per, total, commands } = await cpuPerCall(stack, pair, path, body, key);
      if (pair === one && path === CHAT) oneProcessRate = sample.rps;
      cpuRows.push([
        name,
        sample.rps.toFixed(0),
        commands.toFixed(1),
        ms(per.gateway),
        pair === one ? "–" : ms(per.service),
        ms(per.redis),
        ms(per.spicedb),
        ms(total),
        String(sample.non2xx),
      ]);
    }
    const floor = await floorCpuPerCall(stack, oneProcessRate);
    cpuRows.push([
      "chat completion through a bare Node proxy (no logic: the floor), at the one process's calls a second",
      floor.sample.rps.toFixed(0),
      "0.0",
      ms(floor.proxy),
      "–",
      "–",
      "–",
      ms(floor.proxy),
      String(floor.sample.non2xx),
    ]);
    report.table(
      [
        "call",
        "calls/s",
        "Redis commands sent",
        "gateway",
        "service",
        "Redis",
        "SpiceDB",
        "gateway + service + Redis",
        "non-2xx",
      ],
      cpuRows,
    );

    await benchTracing(report, stack, plain);
    await profileModelCalls(report, stack);
    readingOfModelCalls(report);
  } finally {
    await stack.close();
  }
}

/**
 * Calls (chat completions unless `call` says) at 16 connections for `seconds` after 1 s of warm-up,
 * against a pair whose processes write CPU profiles as they exit: the measured window (for the profiles'
 * samples), the calls answered and each process's CPU in the window. Stops the pair (so its profiles are
 * written).
 */
export async function profiledLoad(
  stack: ModelStack,
  pair: Pair,
  seconds: number,
  call: { path: string; body: string } = { path: CHAT, body: chatBody() },
) {
  const window = { from: 0, to: 0 };
  const cpu = { gateway: 0, service: 0, redis: 0, spicedb: 0 };
  let calls = 0;
  try {
    const target = {
      url: `${pair.gateway.url}${call.path}`,
      method: "POST" as const,
      headers: bearer(stack.plainKey),
      body: call.body,
    };
    await load({ ...target, connections: 16, seconds: 1 }); // warm-up, left out of the breakdown
    const spent = cpuSince(callPids(stack, pair));
    window.from = Number(process.hrtime.bigint() / 1000n);
    calls = (await load({ ...target, connections: 16, seconds })).total;
    window.to = Number(process.hrtime.bigint() / 1000n);
    Object.assign(cpu, spent());
  } finally {
    // Each writes its profile as it exits.
    await pair.gateway.stop();
    await pair.service.stop();
    stack.pairs.delete(pair.name);
  }
  return { window, calls, cpu };
}

/** Tracing off, and on at sampling ratios 1 and 0.01 (spans exported to a local OTLP receiver). */
async function benchTracing(report: Report, stack: ModelStack & { collectorUrl: string }, plain: Pair) {
  const traced = (ratio: string): NodeJS.ProcessEnv => ({
    OTEL_EXPORTER_OTLP_ENDPOINT: stack.collectorUrl,
    OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
    OTEL_TRACES_SAMPLER_ARG: ratio,
  });
  const all = await stack.startPair("traced-1", traced("1"));
  const some = await stack.startPair("traced-0.01", traced("0.01"));
  const call = (pair: Pair) => () =>
    timedCall(`${pair.gateway.url}${CHAT}`, bearer(stack.plainKey), chatBody());
  const [off, on] = await alternate(call(plain), call(all));
  const [, sampled] = await alternate(call(plain), call(some));
  const rows: (string | number)[][] = [];
  for (const [name, pair, p] of [
    ["off (no OTEL_* set)", plain, off],
    ["on, ratio 1", all, on],
    ["on, ratio 0.01", some, sampled],
  ] as const) {
    const spansBefore = stack.spans();
    const { sample, total } = await cpuPerCall(stack, pair, CHAT, chatBody(), stack.plainKey);
    // The batch processor exports every 5 s: wait for the last batch before counting bytes.
    if (pair !== plain) await new Promise((r) => setTimeout(r, 6_000));
    rows.push([
      name,
      ms(p),
      sample.rps.toFixed(0),
      ms(total),
      pair === plain ? "–" : `${((stack.spans() - spansBefore) / Math.max(1, sample.total)).toFixed(0)} B`,
    ]);
  }
  report.section(
    "Model calls: the cost of tracing",
    "Chat completions (not stored) through a gateway and service with tracing off, and on with `OTEL_TRACES_SAMPLER=parentbased_traceidratio` at 1 and 0.01, spans exported over OTLP/HTTP to a local receiver. p50 at concurrency 1 (alternating with the untraced pair), then CPU per call at 16 connections (gateway + service + Redis) and the OTLP bytes exported per call.",
  );
  report.table(["tracing", "p50, concurrency 1", "calls/s at 16", "CPU per call", "OTLP per call"], rows);
}

/** Gateway and service under `--cpu-prof` with 16 connections of chat completions: where their time goes. */
export async function profileModelCalls(report: Report, stack: ModelStack): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "gw-bench-model-prof-"));
  const seconds = Number(process.env.BENCH_MODEL_PROFILE_SECONDS ?? Math.max(10, SECONDS));
  const pair = await stack.startPair("profiled", {}, (of) => `--cpu-prof --cpu-prof-dir=${join(dir, of)}`);
  const { window, calls, cpu } = await profiledLoad(stack, pair, seconds);
  // The same load through the gateway with the service in its process, profiled the same way.
  const one = await stack.startOneProcess("profiled-one-process", {
    NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${join(dir, "one-process")}`,
  });
  const oneLoad = await profiledLoad(stack, one, seconds);
  const oneBreakdown = (await readdir(join(dir, "one-process")).catch(() => [])).some((f) =>
    f.endsWith(".cpuprofile"),
  )
    ? new Map(
        await perCallBreakdown(join(dir, "one-process"), oneLoad.window, oneLoad.calls, oneLoad.cpu.gateway),
      )
    : new Map<string, number>();
  // A stored response through the two processes, profiled the same way: what its ownership and its row add.
  const storedPair = await stack.startPair(
    "profiled-stored",
    {},
    (of) => `--cpu-prof --cpu-prof-dir=${join(dir, "stored", of)}`,
  );
  const storedLoad = await profiledLoad(stack, storedPair, seconds, {
    path: RESPONSES,
    body: responseBody(true),
  });
  const breakdown = await pairBreakdown(dir, { window, calls, cpu });
  const storedBreakdown = await pairBreakdown(join(dir, "stored"), storedLoad);
  const sum = (m: Map<string, number>) => [...m.values()].reduce((t, v) => t + v, 0);
  const us = (v: number | undefined) => (v ? `${(v * 1000).toFixed(0)} µs` : "–");
  if (breakdown) {
    const { gateway, service } = breakdown;
    const parts = [...new Set([...gateway.keys(), ...service.keys(), ...oneBreakdown.keys()])].sort(
      (a, b) => (gateway.get(b) ?? 0) + (service.get(b) ?? 0) - (gateway.get(a) ?? 0) - (service.get(a) ?? 0),
    );
    report.section(
      "Where a model call's CPU goes: per call, by part",
      `CPU profiles (\`node --cpu-prof\`) of gateway and service under ${seconds} s of chat completions (not stored) at 16 connections, after 1 s of warm-up (start-up and warm-up left out): ${calls} calls; then the same through the gateway with the service in its process (\`SERVICE_IN_GATEWAY\`, its own column): ${oneLoad.calls} calls. Each sample is given to the innermost frame of its stack that belongs to a part (a socket write under the Redis client is Redis's; a zod parse under a route is validation's); what no part claims goes by its leaf. Idle time left out; each process's shares are then scaled to the CPU time it spent in that window (from /proc, as the CPU table: a sample's interval is wall time, which a busy machine stretches) and divided by the calls answered. The profiler's own overhead is in the totals.`,
    );
    report.table(
      ["part", "gateway", "service", "both", "one process"],
      [
        ...parts.map((p) => [
          p,
          us(gateway.get(p)),
          us(service.get(p)),
          us((gateway.get(p) ?? 0) + (service.get(p) ?? 0)),
          us(oneBreakdown.get(p)),
        ]),
        [
          "**total**",
          us(sum(gateway)),
          us(sum(service)),
          us(sum(gateway) + sum(service)),
          us(sum(oneBreakdown)),
        ],
      ],
    );
  }
  if (storedBreakdown) {
    const { gateway, service } = storedBreakdown;
    const parts = [...new Set([...gateway.keys(), ...service.keys()])].sort(
      (a, b) => (gateway.get(b) ?? 0) + (service.get(b) ?? 0) - (gateway.get(a) ?? 0) - (service.get(a) ?? 0),
    );
    const perCall = (ms: number) => ms / Math.max(1, storedLoad.calls);
    report.section(
      "Where a stored response's CPU goes: per call, by part",
      `The same profiles of gateway and service (two processes) under ${seconds} s of stored responses (\`store: true\`) at 16 connections: ${storedLoad.calls} calls. A stored response also writes its owner relationship to SpiceDB (the service's SpiceDB client; the local engine's process has its own row below), its row to PostgreSQL (the service's PostgreSQL client; the server's own CPU is not counted) and the write's ZedToken to Redis.`,
    );
    report.table(
      ["part", "gateway", "service", "both"],
      [
        ...parts.map((p) => [
          p,
          us(gateway.get(p)),
          us(service.get(p)),
          us((gateway.get(p) ?? 0) + (service.get(p) ?? 0)),
        ]),
        ["**total**", us(sum(gateway)), us(sum(service)), us(sum(gateway) + sum(service))],
        [
          "the local SpiceDB's process (its engine and its store)",
          "",
          "",
          us(perCall(storedLoad.cpu.spicedb)),
        ],
        ["Redis's process", "", "", us(perCall(storedLoad.cpu.redis))],
      ],
    );
  }
  for (const name of ["gateway", "service"] as const) {
    const own = join(dir, name);
    const written = await readdir(own).catch(() => []);
    report.section(
      `Where the ${name}'s time goes: chat completions at 16 connections`,
      `CPU profile (\`node --cpu-prof\`) of the ${name} under ${seconds} s of chat completions (not stored), self time by group, then the functions of this project and its packages that take most. Start-up is included.`,
    );
    if (!written.some((f) => f.endsWith(".cpuprofile"))) {
      report.line(`No profile was written (the ${name} did not exit in time).`);
      continue;
    }
    const groups = await summarizeProfile(own);
    const functions = await topFunctions(own, 20);
    report.table(
      ["", "share"],
      groups.map(([group, share]) => [group, `${(share * 100).toFixed(1)} %`]),
    );
    report.table(
      ["function", "share"],
      functions.map(([fn, share]) => [fn, `${(share * 100).toFixed(2)} %`]),
    );
  }
  await rm(dir, { recursive: true, force: true });
}

/** Gateway's and service's CPU per call by part, from the profiles each wrote under `root`; none if either is missing. */
async function pairBreakdown(
  root: string,
  load: { window: { from: number; to: number }; calls: number; cpu: { gateway: number; service: number } },
): Promise<Record<"gateway" | "service", Map<string, number>> | undefined> {
  const maps: Partial<Record<"gateway" | "service", Map<string, number>>> = {};
  for (const name of ["gateway", "service"] as const) {
    const own = join(root, name);
    if (!(await readdir(own).catch(() => [])).some((f) => f.endsWith(".cpuprofile"))) return undefined;
    maps[name] = new Map(await perCallBreakdown(own, load.window, load.calls, load.cpu[name]));
  }
  return maps as Record<"gateway" | "service", Map<string, number>>;
}

/** What bounds the model-call goals, and the levers: those taken, and those left to the code that owns them. */
export function readingOfModelCalls(report: Report): void {
  report.section(
    "Model calls: what bounds them, and the levers",
    "Read with the profiles above (self time of each process, start-up included).",
  );
  for (const line of [
    "- **The path**: a model call crosses two HTTP hops the direct call does not (client → gateway → service), and the service makes the provider call a third; each is Node's HTTP parsing and serialization on both sides (`HTTP server` and `Node internals` in the breakdown), small socket writes, and garbage from their buffers. Gateway: authenticate (cached key), principal, rate limit (no Redis command for a key without request windows), the internal assertion (an HS256 JWT signed with `node:crypto`), forward. Service: the assertion verified and its id recorded (`SET NX`, with the organization's guardrail version read beside it; its answer overlaps body parsing and validation), budgets' admission, the provider call, usage (sent before the answer, not waited for), the answer. At concurrency 1 every step that waits on another process (the service, Redis twice, the provider) wakes a process on a machine whose cores are shared, which is why the added latency runs above the CPU a call costs.",
    "- **Taken in this code** (issue 32; each measured before/after side by side, see the levers table): the assertion signed and verified with `node:crypto` in the request's turn (it was a WebCrypto key import and sign per call in the gateway and a verify in the service); request schemas built once (a `chosen()` branch and the `X-On-Behalf-Of` schema compiled a zod schema per request); undici's `request` to the provider instead of `fetch` (no WHATWG streams, `Headers` and `Response` per call); usage in one script of 13 arguments (it spelled 30 fields); a stored answer's ownership written while the provider answers and the answer is kept (the compensation: the call is cut short and charged, or what was kept is taken back); no tokenization without a token budget (the prompt is counted only when a budget asks); one access line per request (the gateway's; the service's is at `debug`); a kept-warm connection pool per provider origin. Issue 44: usage's command sent before the answer and not waited for; the guardrail version read beside the replay guard; the replay guard's answer overlapping the body's parsing and validation (the handler waits for it: ADR 0006); a forwarded answer of known length sent with its headers in one write; the service in the gateway's process behind a setting (`SERVICE_IN_GATEWAY`, docs/adr/0026-service-in-the-gateways-process.md): one HTTP server and client fewer on the path, the same assertion and door.",
    "- **Not taken**: making the one process the default (two processes scale the service apart from the gateway, and `deploy/` runs them so); admission, usage and request windows in one Redis round trip: for a call without a token budget the service waits on one round trip (the replay guard and the guardrail version, sent together) and the gateway on none, so there is nothing left to merge; with a budget, admission must come before the provider call and settlement after it, so one script per call is not possible without giving up the reservation (usage could ride with the settlement: one round trip of the six).",
    '- **The floor**: the row "through a bare Node proxy" is a proxy with no logic at all (`test/bench/bare-proxy.ts`: Node\'s `http` server, a pooled undici client, the answer piped back) in front of the same provider, alternating with the others. What it adds beside the direct call is what any Node proxy adds on this machine (one more HTTP server and client, one more loopback hop each way); the gateway\'s own share is the row "beyond the floor". Where the floor is near the 1 ms goal, the goal leaves nothing for authentication, a Redis round trip and the pipeline.',
    "- **What bounds the goals**: not stored, the service alone adds more than the 0.5 ms goal (\"to the service directly\"): its HTTP server, one Redis round trip (replay guard and guardrail version, partly hidden behind parsing) and the provider client; CPU per call: in the breakdown, the two processes' HTTP servers (Node's `http` and Express, for the client's request and the hop) take about as much as the whole 0.4 ms goal on their own, then the service's Redis client (three commands; since stop 57 the replay guard and the guardrail version leave in one write, the usage in another) and the provider client; what is left of this project's code (authentication, the assertion, validation, usage, budgets, metrics, logging) is a small part. With the service in the gateway's process one HTTP server and the hop are gone (the tables above: about a millisecond at concurrency 1, two-fifths of the CPU); below that, the goal needs fewer Redis commands and less of this code's own work per call than the parts below add up to (Node's own HTTP is not what stands in the way: see \"The floor's CPU\"). Stored, the local SpiceDB's write of the owner relationship (its `SpiceDB` CPU column; an SQLite commit, docs/adr/0011-spicedb-local-keeps-relationships-in-sqlite.md) and PostgreSQL's row are each a durable write of their own; with both concurrent (and, since stop 57, the owner's end recorded beside the write rather than before it, and the row kept in one statement) the answer waits for the SpiceDB write and its ZedToken, which stay above 2 ms on this machine.",
    "- **Stored, by part** (the table \"Where a stored response's CPU goes\", new at stop 65): beside a call not stored, the service spends about 1 ms more CPU a call: its PostgreSQL client (the response's row and its owner's end, two statements) about 0.3 ms, its SpiceDB client (the owner relationship over gRPC) 0.2 ms, two more Redis commands (the write's ZedToken) and a larger answer. The local SpiceDB's own process spends about 1.5 ms a call on the write. Measured on its own at stop 65 (one writer, one relationship a write): 1.3–1.4 ms of CPU per `WriteRelationships`, 0.7–0.9 ms of it in the engine's Go threads and 0.45 ms on Node's main thread (gRPC, the Watch that stores the change, SQLite); it answers in 1.35 ms alone, and in about 3.2 ms inside a stored call, beside the provider call and PostgreSQL's writes on two cores. The answer waits for it (the owner must hold before anyone is told the id), so a stored response stays about 3 ms above one not stored here, and the 3 ms goal out of reach with the local engine; a SpiceDB server's write replaces it in production.",
    "- **Tried at stop 65 and not kept** (the first two side by side with the code as committed, two one-process gateways alternating, three rounds of 300 calls; the third on the local SpiceDB alone, three runs of 2,000 writes each way, alternating): the service in the gateway's process handed the caller's principal directly, with no assertion signed, verified or recorded against replay (a second door, which ADR 0026 declines): 0.05–0.10 ms less at concurrency 1 and 0.01–0.10 ms less CPU a call; a stored response's owner end not recorded in PostgreSQL (the decision cache bounds what it keeps by it): 0.06–0.31 ms less; `GOMAXPROCS=1` for the local SpiceDB: its Go threads' CPU per write 0.63–0.72 ms against 0.79–0.81 ms, and no change of its write's latency seen. None is worth what it gives up.",
    "- **The floor's CPU** (new at stop 66: the CPU table's last row): the bare Node proxy, held to the calls a second the one process answers, spends 0.07–0.16 ms of CPU a call on both of a call's HTTP exchanges; measured at stop 66 at 1,500 calls a second, 0.12 ms of it user time and 0.04 ms system (from /proc), against 0.63 ms user and 0.115 ms system for the gateway with the service in its process. So Node's `http` server and client are not what keeps a call's CPU above the 0.5 ms goal: the breakdown's HTTP row is mostly Express (in the one process, 23 router layers run and 58 paths are matched a call, for the gateway's routers and the service's), and the rest is spread thin over this code and its packages: ioredis's three commands, each a socket write that wakes Redis; the provider client; the assertion's HMACs; validation; metrics; the garbage of it all. At 1,500 calls a second the one process makes 4.4 socket writes a call (Redis twice, the provider, the answer, and a log line every few calls) and 2.4 reads.",
    "- **Kept at stop 66** (side by side: two one-process gateways, from the code before (883eca0) and from this code, alternating, six rounds of 5 s at 1,500 calls a second, then 200 calls each at concurrency 1 after each round): a provider call and the router follow the call's signal with a listener rather than `AbortSignal.any` (which makes a dependent signal, kept by weak reference with a finalizer, on every call); the UTC day of a call's usage remembered while the clock stays in it (a `Date` and its ISO string a call); paths' digests remembered by the internal assertion (gateway and service each hashed every request's path); the header every assertion is signed with not decoded again to be checked. CPU per call lower in every round, by 0.03–0.11 ms (median of the rounds 0.663 → 0.624 ms); p50 at concurrency 1 1.868 → 1.787 ms.",
    "- **Tried at stop 66 and not kept** (the same way, two one-process gateways from this code, one with the change): ioredis's auto-pipelining on the service's connection (the commands of calls answered in one turn of the event loop leave in one write): Redis's own CPU a call 0.088 → 0.048 ms, the process's not lower (median 0.559 → 0.588 ms), p50 0.016 ms higher, and a call's usage would no longer leave before its answer; a larger young generation (`--max-semi-space-size=32`): no gain (median 0.650 → 0.700 ms).",
    "- **What a call's parts cost, each turned off** (new at stop 67, side by side: two one-process gateways from this code, one with a part turned off by a temporary change, alternating, 6 rounds of 5 s at 16 connections held to 1,500 calls a second, then 200 calls each at concurrency 1; the process's CPU per call and Redis's apart, read in the later rounds, once the JIT has settled): usage's record is the largest part found, 0.04–0.06 ms of the process's CPU a call (0.516–0.525 → 0.460–0.476 ms) and 0.04 ms of Redis's (0.068 → 0.028 ms), and 0.09 ms of p50 at concurrency 1 (1.186 → 1.094 ms), with the three breakdowns it writes since this stop (below); what is left of it is the command itself, a script's call and the write that wakes Redis, in both processes. The access line costs 0.01–0.05 ms (`LOG_LEVEL=warn` beside `info`: median 0.537 → 0.499 ms); its writes batched (sonic-boom's `minLength: 4096` with a flush every 100 ms) changed nothing measurable (0.505 → 0.512 ms). The service's request basics and its probes' router, skipped in the one process: no difference (0.536 → 0.549 ms).",
    "- **Not kept at stop 67**: the access line's writes batched (no gain measured, and lines would reach the log up to 100 ms late, and those of a process killed would be lost).",
    "- **Kept at stop 67**: usage under 3 breakdowns (4 with the organization's own key) where a call wrote 9 (11): the end user's calls by key, by model and deployment, and by payer, and the key's by model and deployment; a report reads the day's hash whole, as it did, and adds the rest up from them (`withEveryBreakdown` in `packages/core/src/usage-days.ts`), the fields earlier versions wrote included. Side by side with the code before (two one-process gateways, eight rounds alternating as above): Redis's CPU a call 0.084 → 0.065 ms (lower in every round, by 0.011–0.024 ms), the process's median 0.533 → 0.516 ms, p50 at concurrency 1 1.116 → 1.108 ms; so the one process and Redis now spend about 0.58 ms a call, against the goal's 0.5. A day's usage takes less of Redis: 1,000 end users of one key and model, a call each, 20,025 fields and 1.98 MB (`MEMORY USAGE`) written as before, 10,005 fields and 1.11 MB now. And the response cache's and the lookup cursors' HMAC keys held as key objects: an HMAC under a string or a buffer imports its key on every call, 12 µs against 1.7 µs in a loop, on each cached call's path.",
    "- **Machine**: the load generator, the fake provider, Redis, PostgreSQL, the local SpiceDB and both processes share the machine's cores; on a shared 2-core machine the absolute figures carry noise of the other tenants' load, the side-by-side differences less so.",
  ])
    report.line(line);
}

if (import.meta.main) {
  const report = new Report();
  const startedAt = new Date();
  const { loadavg } = await import("node:os");
  const load0 = loadavg() as [number, number, number];
  await benchModelCalls(report);
  if (process.env.BENCH_OUTPUT) await report.write(process.env.BENCH_OUTPUT, startedAt, load0);
  process.exit(0);
}
