/**
 * `node test/bench/mcp.ts`: an MCP `tools/call` through the gateway's proxy
 * beside the same call made directly to the upstream (the test-kit's MCP
 * server), both with the official SDK client: the latency the proxy adds at
 * concurrency 1 (p50, p99) and the throughput ratio at 16. Prints one JSON
 * line. Nothing is asserted; numbers depend on the machine.
 */
import { randomBytes } from "node:crypto";
import { createLogger } from "@gw/core/logger";
import { newVaultKeys } from "@gw/core/mcp";
import { createRedis } from "@gw/core/redis";
import { ApiKeyStore, gatewayConfigSchema, generateSigningJwk, startGateway } from "@gw/gateway";
import { spicedbEnv, startTestPostgres, startTestRedis, startTestSpiceDB } from "@gw/test-kit";
import { startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const DURATION_MS = Number(process.env.BENCH_MS ?? 2_000);

const [postgres, redisServer, spicedb, upstream] = await Promise.all([
  startTestPostgres(),
  startTestRedis(),
  startTestSpiceDB(),
  startFakeMcpServer(),
]);
const gateway = await startGateway(
  gatewayConfigSchema.parse({
    PORT: "0",
    HOST: "127.0.0.1",
    SERVICE_URL: "http://127.0.0.1:9",
    REDIS_URL: redisServer.url,
    DATABASE_URL: postgres.url,
    JWT_SIGNING_KEYS: JSON.stringify({ keys: [await generateSigningJwk()] }),
    INTERNAL_ASSERTION_SECRET: randomBytes(32).toString("hex"),
    VAULT_KEYS: newVaultKeys(),
    MCP_ALLOW_PRIVATE_UPSTREAMS: "true",
    ...spicedbEnv(spicedb),
  }),
  createLogger("bench", "silent"),
);
const redis = createRedis(redisServer.url, { connectionName: "bench" });
const { secret } = await new ApiKeyStore(redis).create({ org: "bench", owner: "alice" });
const created = await fetch(`${gateway.url}/api/v1/mcp/servers`, {
  method: "POST",
  headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
  body: JSON.stringify({ name: "bench", url: upstream.url }),
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
const direct = await connect(upstream.url);
const proxied = await connect(`${gateway.url}/api/v1/mcp/servers/${id}/mcp`, {
  authorization: `Bearer ${secret}`,
});
const call = (client: Client) => client.callTool({ name: "search", arguments: { query: "bench" } });

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

for (let i = 0; i < 200; i++) await Promise.all([call(direct), call(proxied)]); // warm up
const result: Record<string, number> = {};
// Alternating, so both see the same machine.
for (const [name, client] of [
  ["direct", direct],
  ["proxy", proxied],
] as const) {
  const one = await run(client, 1);
  result[`${name}_p50_ms`] = q(one, 0.5);
  result[`${name}_p99_ms`] = q(one, 0.99);
}
for (const [name, client] of [
  ["direct", direct],
  ["proxy", proxied],
] as const) {
  result[`${name}_rps_16`] = (await run(client, 16)).length / (DURATION_MS / 1000);
}
process.stdout.write(`${JSON.stringify(result)}\n`);
await Promise.all([direct.close(), proxied.close()]);
redis.disconnect();
await gateway.close();
await Promise.all([upstream.close(), spicedb.close(), redisServer.stop(), postgres.stop()]);
process.exit(0);
