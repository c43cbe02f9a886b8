import { randomBytes } from "node:crypto";
import { loadConfig } from "@gw/core/config";
import { createLogger } from "@gw/core/logger";
import { newVaultKeys } from "@gw/core/mcp";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { CountingWindows } from "@gw/core/windows";
import { ApiKeyStore, gatewayConfigSchema, generateSigningJwk, startGateway } from "@gw/gateway";
import {
  REDIS_TOPOLOGIES,
  redisStartedEarly,
  spicedbEnv,
  startTestSpiceDB,
  useTestDatabase,
} from "@gw/test-kit";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { serviceConfigSchema } from "../src/config.ts";
import { countPromptTokens } from "../src/llm/tokens.ts";
import { startService } from "../src/server.ts";

const MODEL = "gpt-4o-mini";
const BUDGET = 10_000;
const MAX_OUTPUT = 300;
const CALLS = 100;

describe.each(REDIS_TOPOLOGIES)(
  "a 10,000 tokens-per-minute key through two gateways and two services on %s Redis",
  (topology) => {
    let llm: FakeLLM;
    let redis: RedisClient;
    let gatewayUrls: string[] = [];
    let teardown: () => Promise<void> = async () => undefined;
    const database = useTestDatabase();

    const redisStarted = redisStartedEarly(topology);
    beforeAll(async () => {
      const [server, spicedb, fake] = await Promise.all([redisStarted(), startTestSpiceDB(), startFakeLLM()]);
      llm = fake;
      const common = {
        REDIS_URL: server.url,
        DATABASE_URL: database.url,
        INTERNAL_ASSERTION_SECRET: randomBytes(32).toString("hex"),
        ...spicedbEnv(spicedb),
      };
      const logger = createLogger("replicas-test", "silent");
      const services = await Promise.all(
        [0, 1].map(() =>
          startService(
            loadConfig(serviceConfigSchema, {
              PORT: "0",
              LLM_BASE_URL: fake.baseUrl,
              LLM_DEFAULT_MODEL: MODEL,
              LLM_MODELS: `${MODEL}=0.15/0.075/0.6`,
              LLM_TIMEOUT_MS: "60000",
              ...common,
            }),
            logger,
          ),
        ),
      );
      const signing = JSON.stringify({ keys: [await generateSigningJwk()] });
      const gateways = await Promise.all(
        services.map((service) =>
          startGateway(
            loadConfig(gatewayConfigSchema, {
              PORT: "0",
              HOST: "127.0.0.1",
              SERVICE_URL: service.url,
              GATEWAY_PUBLIC_URL: "https://gateway.test",
              JWT_SIGNING_KEYS: signing,
              VAULT_KEYS: newVaultKeys(),
              SERVICE_TIMEOUT_MS: "60000",
              ...common,
            }),
            logger,
          ),
        ),
      );
      gatewayUrls = gateways.map((g) => g.url);
      redis = createRedis(server.url, { connectionName: "test" });
      teardown = async () => {
        redis.disconnect();
        await Promise.all(gateways.map((g) => g.close()));
        await Promise.all(services.map((s) => s.close()));
        await Promise.all([server.stop(), spicedb.close(), fake.close()]);
      };
    });
    afterAll(() => teardown());

    it("never has more than 10,000 tokens reserved, and charges exactly the provider's usage", async () => {
      const limits = { tokens: { minute: BUDGET } };
      const { record, secret } = await new ApiKeyStore(redis).create({
        org: `org-${randomBytes(4).toString("hex")}`,
        owner: "backend",
        limits,
      });
      const windows = new CountingWindows(redis);
      const [counter] = windows.counters(record.id, "backend", limits, { requests: 0, tokens: 0, spend: 0 });
      const reservation =
        (await countPromptTokens({ model: MODEL, messages: [{ role: "user", content: "hello there" }] })) +
        MAX_OUTPUT;
      const fits = Math.floor(BUDGET / reservation);

      // Sample the counter the script keeps, as often as Redis answers, for the whole run.
      const samples: number[] = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling) samples.push(Number((await redis.get(counter!.key)) ?? 0));
      })();

      // The provider holds every answer: admitted calls keep their reservations while the rest arrive.
      llm.mode = "hold";
      const before = llm.requests.length;
      let answered = 0;
      const calls = Array.from({ length: CALLS }, (_, i) =>
        fetch(`${gatewayUrls[i % 2]}/api/v1/llm/responses`, {
          method: "POST",
          headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
          body: JSON.stringify({ model: MODEL, input: "hello there", max_output_tokens: MAX_OUTPUT }),
        }).then(async (res) => {
          answered++;
          return { status: res.status, body: await res.json() };
        }),
      );
      await vi.waitFor(
        () => {
          expect(llm.requests.length - before).toBe(fits);
          expect(answered).toBe(CALLS - fits);
        },
        { timeout: 50_000, interval: 20 },
      );
      expect(Number(await redis.get(counter!.key))).toBe(fits * reservation);
      llm.release();
      const results = await Promise.all(calls);
      sampling = false;
      await sampler;

      const ok = results.filter((r) => r.status === 200);
      expect(ok).toHaveLength(fits);
      expect(results.filter((r) => r.status === 429)).toHaveLength(CALLS - fits);
      expect(Math.max(...samples)).toBeLessThanOrEqual(BUDGET);
      expect(samples.length).toBeGreaterThan(10);
      const reported = ok.reduce((n, r) => n + r.body.usage.total_tokens, 0);
      expect(Number(await redis.get(counter!.key))).toBe(reported);
      // Held answers wait for every call to arrive: on a loaded machine that may take tens of seconds, so the
      // provider and service timeouts above are a minute (a timed-out attempt would be retried and counted).
    }, 120_000);
  },
);
