import { type RunningNodeProcess, startGatewayProcess, startTestRedis } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { freshOrg, useGateway } from "./harness.ts";
import { tally } from "./tally.ts";

const WHOAMI = "/api/v1/authentication/whoami";
const count = tally;

describe("two gateway processes sharing one Redis", () => {
  let redisServer: Awaited<ReturnType<typeof startTestRedis>>;
  let replicas: RunningNodeProcess[] = [];

  beforeAll(async () => {
    redisServer = await startTestRedis();
    replicas = await Promise.all([
      startGatewayProcess({ REDIS_URL: redisServer.url }),
      startGatewayProcess({ REDIS_URL: redisServer.url }),
    ]);
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await redisServer?.stop();
  });

  it("admit exactly the quota in total", async () => {
    const { createRedis } = await import("@gw/core/redis");
    const { ApiKeyStore } = await import("../src/api-keys/store.ts");
    const redis = createRedis(redisServer.url, { connectionName: "test" });
    const { secret } = await new ApiKeyStore(redis).create({
      org: freshOrg(),
      owner: "a",
      limits: { minute: 20 },
    });
    redis.disconnect();
    const results = await Promise.all(
      Array.from({ length: 80 }, (_, i) =>
        fetch(`${replicas[i % 2]!.url}${WHOAMI}`, { headers: { authorization: `Bearer ${secret}` } }).then(
          (r) => r.status,
        ),
      ),
    );
    expect(count(results)).toEqual({ 200: 20, 429: 60 });
  });
});

describe("Redis fails mid-test (fail open: the insurance limiter)", () => {
  const gw = useGateway({ RATE_LIMIT_REDIS_TIMEOUT_MS: "200" });

  it("keeps refusing over-quota traffic from memory, counts it, and goes back to Redis when Redis is back", async () => {
    // Keys are looked up once while Redis is up and stay cached for the test (the cache is cleared on reconnect).
    const { secret } = await gw.createKey({ limits: { minute: 5 } });
    expect((await gw.call(WHOAMI, { bearer: secret })).status).toBe(200);

    await gw.redisServer.halt();
    try {
      const during = await Promise.all(Array.from({ length: 12 }, () => gw.call(WHOAMI, { bearer: secret })));
      const authFailures = during.filter((r) => r.status >= 500 || r.status === 401).length;
      expect(authFailures).toBe(0);
      expect(count(during.map((r) => r.status))).toEqual({ 200: 5, 429: 7 });
      // A key never seen before cannot be checked: 503, neither 401 nor 500.
      const unknown = await gw.call(WHOAMI, { bearer: "gwsk_never-seen-before-key-0000000000000000000" });
      expect(unknown.status).toBe(503);
      expect(await unknown.json()).toEqual({
        error: "Service Unavailable",
        message: expect.stringMatching(/authentication/i),
        code: "api_key_store_unavailable",
      });
      const metrics = await (await gw.call("/metrics")).text();
      expect(metrics).toMatch(/gateway_rate_limit_store_errors_total [1-9]/);
      expect(metrics).toMatch(/gateway_rate_limit_fallbacks_total\{mode="open"\} [1-9]/);
      // The first refusals come from memory; once a refusal is known, the rest are answered locally.
      const rejected = (store: string) =>
        Number(
          new RegExp(
            `gateway_rate_limit_decisions_total\\{outcome="rejected",window="minute",store="${store}"\\} (\\d+)`,
          ).exec(metrics)?.[1] ?? 0,
        );
      expect(rejected("memory")).toBeGreaterThanOrEqual(1);
      expect(rejected("memory") + rejected("local")).toBe(7);
    } finally {
      await gw.redisServer.restart();
    }
    // Once the gateway is back on Redis (after its retry pause and reconnect), decisions are made there again.
    await vi.waitFor(
      async () => {
        const { secret: fresh } = await gw.createKey({ limits: { minute: 2 } });
        const after = await Promise.all(Array.from({ length: 3 }, () => gw.call(WHOAMI, { bearer: fresh })));
        expect(count(after.map((r) => r.status))).toEqual({ 200: 2, 429: 1 });
        const metrics = await (await gw.call("/metrics")).text();
        expect(metrics).toMatch(
          /gateway_rate_limit_decisions_total\{outcome="rejected",window="minute",store="redis"\} [1-9]/,
        );
      },
      { timeout: 10_000, interval: 250 },
    );
  });
});

describe("Redis fails mid-test (fail closed)", () => {
  const gw = useGateway({ RATE_LIMIT_FAIL_MODE: "closed", RATE_LIMIT_REDIS_TIMEOUT_MS: "200" });

  it("answers 503 instead of guessing, and counts it", async () => {
    const { secret } = await gw.createKey({ limits: { minute: 50 } });
    expect((await gw.call(WHOAMI, { bearer: secret })).status).toBe(200);
    await gw.redisServer.halt();
    try {
      const res = await gw.call(WHOAMI, { bearer: secret });
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({
        error: "Service Unavailable",
        message: expect.stringMatching(/rate limit/i),
        code: "service_unavailable",
      });
      const metrics = await (await gw.call("/metrics")).text();
      expect(metrics).toMatch(/gateway_rate_limit_fallbacks_total\{mode="closed"\} [1-9]/);
    } finally {
      await gw.redisServer.restart();
    }
  });
});
