import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "@gw/core/config";
import { createLogger } from "@gw/core/logger";
import { newVaultKeys } from "@gw/core/mcp";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { ApiKeyStore, gatewayConfigSchema, generateSigningJwk, startGateway } from "@gw/gateway";
import {
  REDIS_TOPOLOGIES,
  redisStartedEarly,
  scanKeys,
  spicedbEnv,
  startTestSpiceDB,
  useTestDatabase,
} from "@gw/test-kit";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { serviceConfigSchema } from "../src/config.ts";
import { startService } from "../src/server.ts";

describe.each(REDIS_TOPOLOGIES)(
  "one cooldown shared by two gateways and two services on %s Redis",
  (topology) => {
    let a: FakeLLM;
    let b: FakeLLM;
    let redis: RedisClient;
    let gatewayUrls: string[] = [];
    let metricsUrls: string[] = [];
    let secret = "";
    let teardown: () => Promise<void> = async () => undefined;
    const database = useTestDatabase();
    const redisStarted = redisStartedEarly(topology);

    beforeAll(async () => {
      const [server, spicedb, fakeA, fakeB] = await Promise.all([
        redisStarted(),
        startTestSpiceDB(),
        startFakeLLM(),
        startFakeLLM(),
      ]);
      [a, b] = [fakeA, fakeB];
      const dir = await mkdtemp(join(tmpdir(), "gw-cooldown-replicas-"));
      const file = join(dir, "models.yaml");
      // A first; B only while A fails or cools down. Two failures within a minute cool A down for ten.
      await writeFile(
        file,
        `models:
  - name: gpt-4o
    deployments:
      - {provider: openai, base_url: "${a.baseUrl}", model: gpt-4o-a, timeout_ms: 10000}
      - {provider: openai, base_url: "${b.baseUrl}", model: gpt-4o-b, priority: 1, timeout_ms: 10000}
routing:
  retries: 1
  cooldown: {failures: 2, window_s: 60, seconds: 600}
`,
      );
      const common = {
        REDIS_URL: server.url,
        DATABASE_URL: database.url,
        INTERNAL_ASSERTION_SECRET: randomBytes(32).toString("hex"),
        ...spicedbEnv(spicedb),
      };
      const logger = createLogger("cooldown-replicas-test", "silent");
      const services = await Promise.all(
        [0, 1].map(() =>
          startService(
            loadConfig(serviceConfigSchema, {
              PORT: "0",
              MODELS_FILE: file,
              LLM_RETRY_BACKOFF_MS: "0",
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
              ...common,
            }),
            logger,
          ),
        ),
      );
      gatewayUrls = gateways.map((g) => g.url);
      metricsUrls = services.map((s) => s.metricsUrl);
      redis = createRedis(server.url, { connectionName: "test" });
      secret = (
        await new ApiKeyStore(redis).create({
          org: `org-${randomBytes(4).toString("hex")}`,
          owner: "backend",
        })
      ).secret;
      teardown = async () => {
        redis.disconnect();
        await Promise.all(gateways.map((g) => g.close()));
        await Promise.all(services.map((s) => s.close()));
        await Promise.all([server.stop(), spicedb.close(), a.close(), b.close()]);
        await rm(dir, { recursive: true, force: true });
      };
    });
    afterAll(() => teardown());

    /** A chat completion through replica `replica` (0 or 1); its answer's `model` says which deployment served it. */
    const call = async (replica: number) => {
      const res = await fetch(`${gatewayUrls[replica]}/api/v1/llm/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: "hello" }] }),
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { model: string }).model;
    };
    const cooling = async (replica: number) => {
      const text = await (await fetch(metricsUrls[replica]!)).text();
      const line =
        /^service_llm_deployment_cooling\{model="gpt-4o",deployment="gpt-4o#0",provider="openai"\} (\d+)$/m;
      return Number(line.exec(text)?.[1]);
    };

    it("leaves a deployment cooled down through one replica alone on the other, which never saw it fail", async () => {
      a.mode = "fail";
      expect(await call(0)).toBe("gpt-4o-b-2026-01-01");
      expect(await call(0)).toBe("gpt-4o-b-2026-01-01");
      expect(a.requests).toHaveLength(2);
      expect(await cooling(1)).toBe(1);
      a.mode = "ok"; // answers again, but cools down still
      expect(await call(1)).toBe("gpt-4o-b-2026-01-01");
      expect(await call(0)).toBe("gpt-4o-b-2026-01-01");
      expect(a.requests).toHaveLength(2);
    });

    it("then takes one probe, from whichever replica comes first, before traffic returns to it on both", async () => {
      // The cooldown ends when its key expires in Redis: the test ends it by deleting the key.
      for (const key of await scanKeys(redis, "gw:llm:cooldown:{gpt-4o}:0:cool")) await redis.del(key);
      expect(await cooling(0)).toBe(0);
      a.mode = "hold";
      const probe = call(0);
      await vi.waitFor(() => expect(a.requests).toHaveLength(3));
      // While replica 0's probe is in flight, replica 1 does not send A a second one.
      expect(await call(1)).toBe("gpt-4o-b-2026-01-01");
      expect(a.requests).toHaveLength(3);
      a.release();
      expect(await probe).toBe("gpt-4o-a-2026-01-01");
      // The probe answered: both replicas send A traffic again.
      expect(await call(1)).toBe("gpt-4o-a-2026-01-01");
      expect(await call(0)).toBe("gpt-4o-a-2026-01-01");
      expect(a.requests).toHaveLength(5);
    });
  },
);
