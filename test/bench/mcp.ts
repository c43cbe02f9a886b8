/**
 * `node test/bench/mcp.ts`: an MCP `tools/call` through the gateway's proxy
 * beside the same call made directly to the upstream (the test-kit's MCP
 * server) and through a Node proxy with no logic (the floor,
 * `bare-proxy.ts`), all with the official SDK client: the latency the proxy adds at
 * concurrency 1 (p50, p99), the throughput ratio at 16, and the gateway's
 * CPU per call. As deployed: the gateway, the upstream and SpiceDB each run
 * in their own process (the gateway as `pnpm start` runs it, logging one
 * line per request), the client in this one. Prints one JSON line. Nothing
 * is asserted; numbers depend on the machine.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRedis } from "@gw/core/redis";
import { freePort, REPO_ROOT, startNodeProcess, startSpiceDBLocalProcess } from "@gw/devstack";
import { ApiKeyStore } from "@gw/gateway";
import { startTestPostgres, startTestRedis } from "@gw/test-kit";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { benchStackEnv, cpuMs, startBareProxy } from "./http.ts";

const DURATION_MS = Number(process.env.BENCH_MS ?? 2_000);

const [postgres, redisServer] = await Promise.all([startTestPostgres(), startTestRedis()]);
const dataDir = await mkdtemp(join(tmpdir(), "gw-bench-mcp-"));
const spicedbPort = await freePort();
const spicedb = await startSpiceDBLocalProcess({
  port: spicedbPort,
  env: { PATH: process.env.PATH, LOG_LEVEL: "warn", DATA_DIR: dataDir },
});
const upstreamPort = await freePort();
const upstream = await startNodeProcess({
  name: "mcp-upstream",
  entry: join(REPO_ROOT, "packages/test-kit/src/mcp-upstream.ts"),
  port: upstreamPort,
  env: { PATH: process.env.PATH },
  isReady: () =>
    fetch(`http://127.0.0.1:${upstreamPort}/healthz`).then(
      () => true,
      () => false,
    ),
  outputFile: join(dataDir, "mcp-upstream.log"),
});
const upstreamUrl = `http://127.0.0.1:${upstreamPort}/mcp`;
// The floor: the same upstream behind a Node proxy with no logic (test/bench/bare-proxy.ts).
const bare = await startBareProxy(`http://127.0.0.1:${upstreamPort}`, join(dataDir, "bare-proxy.log"));
const gateway = await startNodeProcess({
  name: "gateway",
  entry: join(REPO_ROOT, "packages/gateway/src/main.ts"),
  port: await freePort(),
  env: {
    ...benchStackEnv({
      redis: redisServer.url,
      postgres: postgres.url,
      spicedbPort,
      dataDir,
      logLevel: "info",
    }),
    SERVICE_URL: "http://127.0.0.1:9",
    MCP_ALLOW_PRIVATE_UPSTREAMS: "true",
    // BENCH_PROFILE_DIR=<dir>: the gateway writes a V8 CPU profile there when it stops.
    ...(process.env.BENCH_PROFILE_DIR
      ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}` }
      : {}),
  },
  outputFile: join(dataDir, "gateway.log"),
});
const redis = createRedis(redisServer.url, { connectionName: "bench" });
const { secret } = await new ApiKeyStore(redis).create({ org: "bench", owner: "alice" });
const created = await fetch(`${gateway.url}/api/v1/mcp/servers`, {
  method: "POST",
  headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
  body: JSON.stringify({ name: "bench", url: upstreamUrl }),
});
const { id } = (await created.json()) as { id: string };
await fetch(`${gateway.url}/api/v1/mcp/servers/${id}/credentials/shared`, {
  method: "PUT",
  headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
  body: JSON.stringify({ type: "bearer", token: "bench-token" }),
});

async function connect(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: "bench", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  await client.listTools();
  return client;
}
const direct = await connect(upstreamUrl);
const floor = await connect(`${bare.url}/mcp`);
const proxied = await connect(`${gateway.url}/api/v1/mcp/servers/${id}/mcp`, {
  authorization: `Bearer ${secret}`,
});
const call = (client: Client) => client.callTool({ name: "search", arguments: { query: "bench" } });
const clients = [
  ["direct", direct],
  ["bare", floor],
  ["proxy", proxied],
] as const;

/** Calls for DURATION_MS with `concurrency` callers; the latencies, in ms. */
async function run(client: Client, concurrency: number): Promise<number[]> {
  const latencies: number[] = [];
  const end = performance.now() + DURATION_MS;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const started = performance.now();
        await call(client);
        latencies.push(performance.now() - started);
      }
    }),
  );
  return latencies.sort((a, b) => a - b);
}
const q = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;

// Steady state: for SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS (6 s) after the server's registration, and
// after the gateway connected to Redis, every check asks SpiceDB rather than a kept decision.
await new Promise((resolve) => setTimeout(resolve, 6_500));
for (let i = 0; i < 200; i++) await Promise.all(clients.map(([, c]) => call(c))); // warm up
const result: Record<string, number> = {};
// Concurrency 1: the three in turn, one call each, so all see the same moments of the machine.
const one: Record<string, number[]> = { direct: [], bare: [], proxy: [] };
const endOne = performance.now() + DURATION_MS * clients.length;
while (performance.now() < endOne)
  for (const [name, client] of clients) {
    const started = performance.now();
    await call(client);
    one[name]!.push(performance.now() - started);
  }
for (const [name] of clients) {
  const sorted = one[name]!.sort((a, b) => a - b);
  result[`${name}_p50_ms`] = q(sorted, 0.5);
  result[`${name}_p99_ms`] = q(sorted, 0.99);
}
// Concurrency 16: one after the other.
// The CPU per call of the proxy in front: the gateway's, or the bare proxy's.
const inFront: Record<string, number | undefined> = { bare: bare.process.pid, proxy: gateway.process.pid };
for (const [name, client] of clients) {
  const pid = inFront[name];
  const cpuBefore = pid === undefined ? 0 : cpuMs(pid);
  const calls = (await run(client, 16)).length;
  result[`${name}_rps_16`] = calls / (DURATION_MS / 1000);
  if (pid !== undefined) result[`${name}_cpu_ms_per_call`] = (cpuMs(pid) - cpuBefore) / calls;
}
process.stdout.write(`${JSON.stringify(result)}\n`);
await Promise.all(clients.map(([, c]) => c.close()));
redis.disconnect();
await gateway.stop();
await Promise.all([bare.stop(), upstream.stop(), spicedb.stop(), redisServer.stop(), postgres.stop()]);
await rm(dataDir, { recursive: true, force: true });
process.exit(0);
