import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "@gw/core/config";
import { createLogger } from "@gw/core/logger";
import { newVaultKeys } from "@gw/core/mcp";
import { ApiKeyStore, generateSigningJwk } from "@gw/gateway";
import {
  acceptsConnections,
  spicedbEnv,
  startTestRedis,
  startTestSpiceDB,
  testRedisClient,
  useTestDatabase,
} from "@gw/test-kit";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { loadConfigs, type RunningGatewayWithService, startGatewayWithService } from "../src/index.ts";

describe("the one process's settings", () => {
  it("gives the service SERVICE_PORT and SERVICE_HOST, never the gateway's port, host or metrics port", () => {
    const { own, gateway, service } = loadConfigs({
      PORT: "9100",
      HOST: "0.0.0.0",
      METRICS_PORT: "9464",
      SERVICE_PORT: "9101",
    });
    expect(own).toEqual({ SERVICE_PORT: 9101, SERVICE_HOST: "127.0.0.1" });
    expect([gateway.PORT, gateway.HOST]).toEqual([9100, "0.0.0.0"]);
    expect([service.PORT, service.HOST]).toEqual([9101, "127.0.0.1"]);
    expect(service.metricsEndpoint.separatePort).toBeUndefined();
    // Hosted MCP tools reach the gateway's proxy on the gateway's own port, and know its public URL.
    expect(service.GATEWAY_URL).toBe("http://127.0.0.1:9100");
    expect(service.GATEWAY_PUBLIC_URL).toBe(gateway.GATEWAY_PUBLIC_URL);
    expect(service.GATEWAY_PUBLIC_URL).toBe("http://localhost:9100");
    expect(loadConfigs({ PORT: "9100", HOST: "10.1.2.3" }).service.GATEWAY_URL).toBe("http://10.1.2.3:9100");
    expect(loadConfigs({ PORT: "9100", GATEWAY_URL: "https://gw.internal" }).service.GATEWAY_URL).toBe(
      "https://gw.internal",
    );
  });

  it("names a bad value of its own settings", () => {
    expect(() => loadConfigs({ SERVICE_PORT: "abc" })).toThrow(ConfigError);
    expect(() => loadConfigs({ SERVICE_PORT: "abc" })).toThrow(/SERVICE_PORT.*"abc"/);
  });

  it("names every problem of every part at once, each once", () => {
    let refused: unknown;
    try {
      loadConfigs({ PORT: "abc", RESPONSE_RETENTION: "x", LOG_LEVEL: "loud" });
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(ConfigError);
    const problems = (refused as ConfigError).problems;
    // The gateway's port, the service's retention, and the log level both read (named once).
    expect(problems.filter((p) => p.startsWith("PORT: "))).toHaveLength(1);
    expect(problems.filter((p) => p.startsWith("RESPONSE_RETENTION: "))).toHaveLength(1);
    expect(problems.filter((p) => p.startsWith("LOG_LEVEL: "))).toHaveLength(1);
  });
});

describe("the gateway with the service in its process", () => {
  const database = useTestDatabase();
  let running: RunningGatewayWithService;
  let llm: FakeLLM;
  let key: string;
  let teardown: (() => Promise<void>) | undefined;
  let closed = false;

  beforeAll(async () => {
    const [redis, spicedb] = await Promise.all([startTestRedis(), startTestSpiceDB()]);
    llm = await startFakeLLM();
    const dataDir = await mkdtemp(join(tmpdir(), "gw-one-process-"));
    const configs = loadConfigs({
      PORT: "0",
      HOST: "127.0.0.1",
      SERVICE_PORT: "0",
      DATA_DIR: dataDir,
      REDIS_URL: redis.url,
      DATABASE_URL: database.url,
      INTERNAL_ASSERTION_SECRET: randomBytes(32).toString("hex"),
      VAULT_KEYS: newVaultKeys(),
      JWT_SIGNING_KEYS: JSON.stringify({ keys: [await generateSigningJwk()] }),
      LLM_BASE_URL: llm.baseUrl,
      LLM_API_KEY: "upstream-secret",
      LLM_DEFAULT_MODEL: "echo-small",
      SHUTDOWN_GRACE_MS: "10000",
      ...spicedbEnv(spicedb),
    });
    const silent = process.env.TEST_LOG_LEVEL ?? "silent";
    running = await startGatewayWithService(configs, {
      gateway: createLogger("gateway", silent),
      service: createLogger("service", silent),
    });
    const client = testRedisClient(redis.url);
    key = (await new ApiKeyStore(client).create({ org: "one-process", owner: "backend" })).secret;
    client.disconnect();
    teardown = async () => {
      await Promise.all([redis.stop(), spicedb.close(), llm.close()]);
      await rm(dataDir, { recursive: true, force: true });
    };
  });
  afterAll(async () => {
    if (running && !closed) await running.close();
    await teardown?.();
  });

  const openai = () =>
    new OpenAI({
      apiKey: key,
      baseURL: `${running.gateway.url}/api/v1/llm`,
      defaultHeaders: { "x-on-behalf-of": "alice" },
      maxRetries: 0,
    });

  it("answers a model call with the openai SDK, and each part keeps its own metrics", async () => {
    const completion = await openai().chat.completions.create({
      model: "echo-small",
      messages: [{ role: "user", content: "one process" }],
    });
    expect(completion.choices[0]?.message.content).toBe("Echo: one process");
    // The provider got the service's key, never the caller's.
    expect(llm.requests.at(-1)?.authorization).toBe("Bearer upstream-secret");
    const gatewayMetrics = await (await fetch(running.gateway.metricsUrl)).text();
    expect(gatewayMetrics).toContain('route="/api/v1/llm/chat/completions",status="200"');
    // The service's registry, on its own listener: the call it made.
    const serviceMetrics = await (await fetch(running.service.metricsUrl)).text();
    expect(serviceMetrics).toMatch(/service_llm_requests_total\{[^}]*\} 1/);
    expect((await fetch(`${running.service.url}/readyz`)).status).toBe(200);
    // The process's own series once, in the gateway's registry: not summed twice across the two jobs.
    expect(gatewayMetrics).toMatch(/^process_cpu_seconds_total \d/m);
    expect(serviceMetrics).not.toContain("process_cpu_seconds_total");
  });

  it("closes the gateway first: a call in flight is answered, then both listeners are gone", async () => {
    llm.mode = "hold";
    const before = llm.requests.length;
    const answer = openai().chat.completions.create({
      model: "echo-small",
      messages: [{ role: "user", content: "still answered" }],
    });
    await vi.waitFor(() => expect(llm.requests.length).toBe(before + 1));
    closed = true;
    const closing = running.close();
    // The gateway no longer takes connections while the call in flight goes on.
    await vi.waitFor(async () => expect(await acceptsConnections(running.gateway.port)).toBe(false));
    llm.release();
    expect((await answer).choices[0]?.message.content).toBe("Echo: still answered");
    await closing;
    expect(await acceptsConnections(running.service.port)).toBe(false);
  });
});
