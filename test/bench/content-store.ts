/**
 * `node test/bench/content-store.ts [total]`: what stored responses cost
 * where, through the whole path (gateway → service → PostgreSQL, SpiceDB,
 * Redis): Redis `used_memory` after 1k and after `total` responses (default
 * 10k), PostgreSQL bytes per response (table, TOAST and indexes), p50/p99 of
 * create response, get response and list input items, and the retention
 * sweep's deletion rate. Nothing is asserted; numbers depend on the machine.
 */
import { randomBytes } from "node:crypto";
import { ManualClock } from "@gw/core/clock";
import { loadConfig } from "@gw/core/config";
import { createLogger } from "@gw/core/logger";
import { newVaultKeys } from "@gw/core/mcp";
import { createPostgres } from "@gw/core/postgres";
import { createRedis } from "@gw/core/redis";
import { ApiKeyStore, gatewayConfigSchema, generateSigningJwk, startGateway } from "@gw/gateway";
import { spicedbEnv, startTestPostgres, startTestRedis, startTestSpiceDB } from "@gw/test-kit";
import { startFakeLLM } from "@gw/test-kit/llm-upstream";
import { serviceConfigSchema } from "../../packages/service/src/config.ts";
import { startService } from "../../packages/service/src/server.ts";

const TOTAL = Number(process.argv[2] ?? 10_000);
const CONCURRENCY = 8;

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
const summary = (latencies: number[]) => {
  const sorted = [...latencies].sort((a, b) => a - b);
  return `p50 ${quantile(sorted, 0.5).toFixed(1)} ms, p99 ${quantile(sorted, 0.99).toFixed(1)} ms (n=${sorted.length})`;
};

async function timed(count: number, call: (i: number) => Promise<Response>): Promise<number[]> {
  const latencies: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        const i = next++;
        const started = performance.now();
        const res = await call(i);
        if (!res.ok) throw new Error(`status ${res.status}: ${await res.text()}`);
        await res.arrayBuffer();
        latencies.push(performance.now() - started);
      }
    }),
  );
  return latencies;
}

const [postgres, redisServer, spicedb, llm] = await Promise.all([
  startTestPostgres(),
  startTestRedis(),
  startTestSpiceDB(),
  startFakeLLM(),
]);
const clock = new ManualClock();
const secret = randomBytes(32).toString("hex");
const common = { REDIS_URL: redisServer.url, INTERNAL_ASSERTION_SECRET: secret, ...spicedbEnv(spicedb) };
const silent = createLogger("bench", "silent");
const service = await startService(
  loadConfig(serviceConfigSchema, {
    PORT: "0",
    LLM_BASE_URL: llm.baseUrl,
    LLM_DEFAULT_MODEL: "echo-small",
    DATABASE_URL: postgres.url,
    RESPONSE_RETENTION: "30d",
    RETENTION_SWEEP_INTERVAL: "1d",
    ...common,
  }),
  silent,
  { clock },
);
const gateway = await startGateway(
  loadConfig(gatewayConfigSchema, {
    PORT: "0",
    HOST: "127.0.0.1",
    SERVICE_URL: service.url,
    // The audit trail.
    DATABASE_URL: postgres.url,
    JWT_SIGNING_KEYS: JSON.stringify({ keys: [await generateSigningJwk()] }),
    VAULT_KEYS: newVaultKeys(),
    ...common,
  }),
  silent,
);
const redis = createRedis(redisServer.url, { connectionName: "bench" });
const db = createPostgres(postgres.url, { connectionName: "bench" });
const { record, secret: key } = await new ApiKeyStore(redis).create({ org: "bench", owner: "backend" });
void record;
const headers = {
  authorization: `Bearer ${key}`,
  "x-on-behalf-of": "alice",
  "content-type": "application/json",
};
const ids: string[] = [];
const create = (i: number) =>
  fetch(`${gateway.url}/api/v1/llm/responses`, {
    method: "POST",
    headers,
    body: JSON.stringify({ input: `question number ${i}: what is the answer?` }),
  }).then(async (res) => {
    if (res.ok) ids.push(((await res.clone().json()) as { id: string }).id);
    return res;
  });
const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await redis.info("memory"))![1]);
const pgBytes = async () =>
  Number((await db.query<{ n: string }>("SELECT pg_total_relation_size('responses') AS n")).rows[0]!.n);

await timed(50, create); // warm-up
const before = await usedMemory();
const createLatencies = await timed(1_000, create);
const at1k = await usedMemory();
createLatencies.push(...(await timed(TOTAL - 1_000, (i) => create(i + 1_000))));
const atTotal = await usedMemory();
const keysAtTotal = await redis.dbsize();
const bytes = await pgBytes();
const rows = Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM responses")).rows[0]!.n);

const get = await timed(1_000, (i) =>
  fetch(`${gateway.url}/api/v1/llm/responses/${ids[i % ids.length]}`, { headers }),
);
const list = await timed(1_000, (i) =>
  fetch(`${gateway.url}/api/v1/llm/responses/${ids[i % ids.length]}/input_items`, { headers }),
);

clock.advance(31 * 86_400_000);
const sweepStarted = performance.now();
const report = await service.retention.sweep();
const sweepSeconds = (performance.now() - sweepStarted) / 1000;

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(2)} MB`;
console.log(`stored responses through the gateway: ${rows} (${ids.length} acknowledged)`);
console.log(`Redis used_memory: before ${mb(before)}, after 1k ${mb(at1k)}, after ${TOTAL} ${mb(atTotal)}`);
console.log(
  `  growth 1k → ${TOTAL}: ${mb(atTotal - at1k)} (${((atTotal - at1k) / (TOTAL - 1_000)).toFixed(0)} bytes per response; ${keysAtTotal} keys)`,
);
console.log(
  `PostgreSQL responses (table + TOAST + indexes): ${mb(bytes)}, ${(bytes / rows).toFixed(0)} bytes per response`,
);
console.log(`create response: ${summary(createLatencies)}`);
console.log(`get response: ${summary(get)}`);
console.log(`list input items: ${summary(list)}`);
console.log(
  `retention sweep: ${report?.responses} responses (rows, SpiceDB relationships, ZedTokens) in ${sweepSeconds.toFixed(1)} s, ${((report?.responses ?? 0) / sweepSeconds).toFixed(0)} per second`,
);
console.log(`Redis used_memory after the sweep: ${mb(await usedMemory())}, ${await redis.dbsize()} keys`);

redis.disconnect();
await db.close();
await gateway.close();
await service.close();
await Promise.all([postgres.stop(), redisServer.stop(), spicedb.close(), llm.close()]);
