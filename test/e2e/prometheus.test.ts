import { type ChildProcess, spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { LATENCY_BUCKETS } from "@gw/core/metrics";
import { createRedis } from "@gw/core/redis";
import { freePort, prometheusInstalled, REPO_ROOT } from "@gw/devstack";
import { ApiKeyStore } from "@gw/gateway";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { newDataDir, removeDataDir, userPath } from "./pnpm-start.ts";

const installed = await prometheusInstalled();
if (!installed) {
  process.stderr.write(
    "SKIPPED the Prometheus test: the prometheus binary is missing (apt-get install -y prometheus; .ci/run does)\n",
  );
}

const WHOAMI = "/api/v1/authentication/whoami";
const METRICS_TOKEN = "scraper-token-for-the-test";

interface Panel {
  title: string;
  targets: { expr: string }[];
}

/**
 * `pnpm start` with PROMETHEUS_PORT, as an operator runs it: Debian's
 * Prometheus on the deployment's jobs and rules scrapes the gateway (its
 * metrics on METRICS_PORT, behind METRICS_TOKEN), the service and the local
 * SpiceDB's own metrics. Traffic of every kind goes through; then every
 * dashboard query must return data and every alert rule evaluate cleanly.
 */
describe.runIf(installed)("the pnpm start stack under a real Prometheus", () => {
  let stack: ChildProcess;
  let output = "";
  let dataDir: string;
  let gatewayUrl: string;
  let prometheusUrl: string;
  let llm: FakeLLM;

  const query = async (expr: string) => {
    const res = await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const body = (await res.json()) as {
      status: string;
      error?: string;
      data: { result: { metric: Record<string, string>; value: [number, string] }[] };
    };
    if (body.status !== "success") throw new Error(`${expr}: ${body.error}`);
    return body.data.result;
  };
  const value = async (expr: string) => Number((await query(expr))[0]?.value[1] ?? Number.NaN);

  beforeAll(async () => {
    dataDir = await newDataDir("gw-prometheus-");
    llm = await startFakeLLM();
    // A catalogue with a fallback, so the providers' panels (fallbacks, cooldowns) have series too.
    const modelsFile = join(dataDir, "models.yaml");
    await writeFile(
      modelsFile,
      `models:
  - name: echo-small
    fallbacks: [echo-large]
    deployments: [{provider: openai, base_url: "${llm.baseUrl}", model: echo-small}]
  - name: echo-large
    deployments: [{provider: openai, base_url: "${llm.baseUrl}", model: echo-large}]
`,
    );
    const [
      port,
      servicePort,
      redisPort,
      spicedbPort,
      spicedbMetricsPort,
      metricsPort,
      promPort,
      postgresPort,
    ] = await Promise.all(Array.from({ length: 8 }, () => freePort()));
    gatewayUrl = `http://127.0.0.1:${port}`;
    prometheusUrl = `http://127.0.0.1:${promPort}`;
    stack = spawn("pnpm", ["start"], {
      cwd: REPO_ROOT,
      env: {
        PATH: userPath,
        PORT: String(port),
        SERVICE_PORT: String(servicePort),
        LOCAL_REDIS_PORT: String(redisPort),
        LOCAL_POSTGRES_PORT: String(postgresPort),
        SPICEDB_LOCAL_PORT: String(spicedbPort),
        SPICEDB_LOCAL_METRICS_PORT: String(spicedbMetricsPort),
        LOCAL_VECTOR_DATABASE_PORT: String(await freePort()),
        METRICS_PORT: String(metricsPort),
        METRICS_TOKEN,
        PROMETHEUS_PORT: String(promPort),
        DATA_DIR: dataDir,
        MODELS_FILE: modelsFile,
      },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    stack.stdout?.on("data", (c: Buffer) => (output += c));
    stack.stderr?.on("data", (c: Buffer) => (output += c));
    const deadline = Date.now() + 60_000;
    while (!output.includes("prometheus started")) {
      if (stack.exitCode !== null || Date.now() > deadline)
        throw new Error(`stack did not come up:\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await driveTraffic(gatewayUrl, redisPort!, metricsPort!);
  }, 120_000);

  afterAll(async () => {
    if (stack?.pid && stack.exitCode === null) {
      const exited = new Promise((r) => stack.once("exit", r));
      process.kill(-stack.pid, "SIGINT");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
      try {
        process.kill(-stack.pid, "SIGKILL");
      } catch {
        // the whole group is gone already
      }
    }
    await llm?.close();
    if (dataDir) await removeDataDir(dataDir);
  });

  it("scrapes every job of the deployment's configuration: gateway (with its token), service, SpiceDB's own", async () => {
    await vi.waitFor(
      async () => {
        const up = Object.fromEntries((await query("up")).map((r) => [r.metric.job, r.value[1]]));
        expect(up).toEqual({ gateway: "1", service: "1", spicedb: "1" });
      },
      { timeout: 20_000, interval: 500 },
    );
  });

  it("has data for every query of every dashboard panel once the traffic has been scraped", async () => {
    const dashboard = JSON.parse(
      await readFile(join(REPO_ROOT, "deploy/grafana/dashboards/gateway.json"), "utf8"),
    ) as { panels: Panel[] };
    const queries = dashboard.panels.flatMap((p) => p.targets.map((t) => ({ panel: p.title, expr: t.expr })));
    expect(queries.length).toBeGreaterThan(30);
    await vi.waitFor(
      async () => {
        const empty: string[] = [];
        for (const { panel, expr } of queries) {
          if ((await query(expr)).length === 0) empty.push(`${panel}: ${expr}`);
        }
        expect(empty).toEqual([]);
      },
      { timeout: 30_000, interval: 1_000 },
    );
  });

  it("labels every outcome of an endpoint with its one route template, forwarded ones included", async () => {
    await vi.waitFor(
      async () => {
        const statuses = async (route: string) =>
          (await query(`sum by (status) (gateway_http_requests_total{route="${route}"}) > 0`))
            .map((r) => r.metric.status)
            .sort();
        expect(await statuses(WHOAMI)).toEqual(["200", "401", "429"]);
        expect(await statuses("/api/v1/authorization/llm/grant")).toEqual(["204", "403", "422"]);
        expect(await statuses("/api/v1/llm/conversations/:id")).toEqual(["200", "401"]);
      },
      { timeout: 20_000, interval: 500 },
    );
    expect(await query('gateway_http_requests_total{route=~".*/api/v1/api/.*|/authorization/.*"}')).toEqual(
      [],
    );
  });

  it("shows whoami's real p50: the bucket of the true median is at most twice as wide as it is low, and the estimate is in it", async () => {
    const durations = () =>
      output
        .split("\n")
        .filter((line) => line.includes('"msg":"request"') && line.includes(`"route":"${WHOAMI}"`))
        .map((line) => (JSON.parse(line) as { durationMs: number }).durationMs / 1000);
    const count = `sum(gateway_http_request_duration_seconds_count{route="${WHOAMI}"})`;
    // Wait until Prometheus has scraped every whoami request the gateway logged.
    await vi.waitFor(async () => expect(await value(count)).toBe(durations().length), {
      timeout: 20_000,
      interval: 500,
    });
    const sorted = durations().sort((a, b) => a - b);
    expect(sorted.length).toBeGreaterThan(200);
    const median = sorted[Math.floor(sorted.length / 2)]!;
    const upper = LATENCY_BUCKETS.find((le) => median <= le)!;
    const lower = LATENCY_BUCKETS[LATENCY_BUCKETS.indexOf(upper) - 1]!;
    expect(lower).toBeGreaterThan(0);
    expect(upper / lower).toBeLessThanOrEqual(2);
    const p50 = await value(
      `histogram_quantile(0.5, sum by (le) (gateway_http_request_duration_seconds_bucket{route="${WHOAMI}"}))`,
    );
    expect(p50).toBeGreaterThanOrEqual(lower);
    expect(p50).toBeLessThanOrEqual(upper);
  });

  it("evaluates every alert rule without error", async () => {
    await vi.waitFor(
      async () => {
        const res = await fetch(`${prometheusUrl}/api/v1/rules`);
        const { data } = (await res.json()) as {
          data: { groups: { rules: { name: string; health: string; lastError?: string }[] }[] };
        };
        const rules = data.groups.flatMap((g) => g.rules);
        expect(rules.length).toBeGreaterThanOrEqual(10);
        expect(
          rules.filter((r) => r.health !== "ok").map((r) => `${r.name}: ${r.health} ${r.lastError}`),
        ).toEqual([]);
      },
      { timeout: 20_000, interval: 500 },
    );
  });
});

/** Requests of every kind the dashboard shows, with every outcome the route labels must keep together. */
async function driveTraffic(gatewayUrl: string, redisPort: number, metricsPort: number): Promise<void> {
  const redis = createRedis(`redis://127.0.0.1:${redisPort}`, { connectionName: "prometheus-test" });
  const store = new ApiKeyStore(redis);
  const org = `org-prom-${Date.now()}`;
  const { secret } = await store.create({ org, owner: "alice" });
  const { record: limitedRecord, secret: limited } = await store.create({
    org,
    owner: "alice",
    limits: { second: 1 },
  });
  // Its second window opened for a minute: the 429 below cannot meet a fresh window on a slow machine.
  await redis.set(`gw:rl:{${limitedRecord.id}}:second`, 0, "PX", 60_000);
  const { secret: usageOnly } = await store.create({ org, owner: "alice", permissions: ["usage:read"] });
  redis.disconnect();

  const call = (
    path: string,
    bearer: string,
    init: { method?: string; json?: unknown; user?: string } = {},
  ) =>
    fetch(`${gatewayUrl}${path}`, {
      method: init.method ?? (init.json === undefined ? "GET" : "POST"),
      headers: {
        authorization: `Bearer ${bearer}`,
        "x-on-behalf-of": init.user ?? "alice",
        ...(init.json === undefined ? {} : { "content-type": "application/json" }),
      },
      body: init.json === undefined ? undefined : JSON.stringify(init.json),
    });
  const expectStatus = async (res: Promise<Response>, status: number) => {
    const answered = await res;
    await answered.arrayBuffer();
    expect(answered.status).toBe(status);
  };

  // The gateway's /metrics is on METRICS_PORT, behind the token; not on the public port.
  await expectStatus(fetch(`${gatewayUrl}/metrics`), 404);
  await expectStatus(fetch(`http://127.0.0.1:${metricsPort}/metrics`), 401);

  for (let i = 0; i < 300; i++) await expectStatus(call(WHOAMI, secret), 200);
  await expectStatus(call(WHOAMI, "gwsk_not-a-key"), 401);
  await expectStatus(call(WHOAMI, limited), 200);
  await expectStatus(call(WHOAMI, limited), 429);

  const conversation = await call("/api/v1/llm/conversations", secret, { json: {} });
  expect(conversation.status).toBe(200);
  const { id } = (await conversation.json()) as { id: string };
  await expectStatus(call(`/api/v1/llm/conversations/${id}`, secret), 200);
  await expectStatus(call(`/api/v1/llm/conversations/${id}`, "gwsk_not-a-key"), 401);
  await expectStatus(
    call("/api/v1/llm/responses", secret, { json: { input: "hello", conversation: id } }),
    200,
  );

  const grant = { resourceType: "conversation", resourceId: id, userId: "bob", role: "reader" };
  await expectStatus(call("/api/v1/authorization/llm/grant", secret, { json: grant }), 204);
  await expectStatus(call("/api/v1/authorization/llm/grant", secret, { json: grant, user: "bob" }), 403);
  await expectStatus(
    call("/api/v1/authorization/llm/grant", secret, { json: { ...grant, role: "boss" } }),
    422,
  );
  await expectStatus(
    call(`/api/v1/authorization/llm/check?resourceType=conversation&resourceId=${id}&role=reader`, usageOnly),
    403,
  );

  const exchanged = await call("/api/v1/authentication/api-keys/exchange-token", secret, {
    json: { audience: gatewayUrl.replace("127.0.0.1", "localhost"), externalUserId: "alice" },
  });
  expect(exchanged.status).toBe(200);
  const { token } = (await exchanged.json()) as { token: string };
  await expectStatus(call(WHOAMI, token), 200);
}
