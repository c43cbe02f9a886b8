import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "@gw/core/config";
import { ERROR_CATALOGUE, type ErrorCode } from "@gw/core/errors";
import type { RouteTemplate } from "@gw/core/http";
import { createLogger } from "@gw/core/logger";
import { newVaultKeys } from "@gw/core/mcp";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import type { RedisClient } from "@gw/core/redis";
import {
  ApiKeyStore,
  type CreateApiKeyInput,
  gatewayConfigSchema,
  generateSigningJwk,
  startGateway,
} from "@gw/gateway";
import {
  capturingLogger,
  type RedisTopology,
  redisStartedEarly,
  spicedbEnv,
  startTestSpiceDB,
  type TestDatabase,
  type TestRedisStore,
  testRedisClient,
  UNHURRIED_SPICEDB_DEADLINE_MS,
  useTestDatabase,
} from "@gw/test-kit";
import { watchApi } from "@gw/test-kit/api-conformance";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { afterAll, beforeAll, beforeEach, expect } from "vitest";
import { serviceConfigSchema } from "../src/config.ts";
import type { Files } from "../src/files/files.ts";
import type { Guardrails } from "../src/guardrails/guardrails.ts";
import type { SweepReport } from "../src/retention/sweeper.ts";
import { type ServiceOptions, startService } from "../src/server.ts";
import type { VectorStores } from "../src/vector-stores/vector-stores.ts";

export interface Stack {
  gatewayUrl: string;
  serviceUrl: string;
  redisUrl: string;
  /** The service's own PostgreSQL database, and a pool of it. */
  database: TestDatabase;
  db: Postgres;
  /** The endpoints the service registered. */
  serviceRoutes: RouteTemplate[];
  /** The endpoints the gateway registered (its own; the service's are forwarded). */
  gatewayRoutes: RouteTemplate[];
  /** The Redis behind the stack (one server or a cluster), e.g. to watch the commands it runs. */
  redisServer: TestRedisStore;
  llm: FakeLLM;
  redis: RedisClient;
  store: ApiKeyStore;
  assertionSecret: string;
  /** The `VAULT_KEYS` the service and the gateway share, for another process of the stack (an eval worker). */
  vaultKeys: string;
  /** The service's log lines at warn and above (JSON objects), so tests can see what reached the log. */
  serviceLogs: Record<string, unknown>[];
  /** A key in a fresh organization (its owner `backend`), unless told otherwise. */
  createKey(input?: Partial<CreateApiKeyInput>): Promise<{ id: string; org: string; secret: string }>;
  /** fetch against the gateway as `user` (X-On-Behalf-Of) with `secret`. */
  call(
    secret: string,
    path: string,
    init?: { method?: string; json?: unknown; user?: string; headers?: Record<string, string> },
  ): Promise<Response>;
  /** The SpiceDB behind the stack, to read its relationships as `zed` would. */
  spicedb: { endpoint: string; presharedKey: string };
  /** One retention sweep of the service, now. */
  sweep(): Promise<SweepReport | undefined>;
  /** The service's files (their removal listeners, an organization's usage). */
  files: Files;
  /** The service's vector stores (their records and the vector index). */
  vectorStores: VectorStores;
  /** The service's guardrails (`resolveGuardrails`). */
  guardrails: Guardrails;
  stopService(): Promise<void>;
}

/** Where a stack's service runs (`useStack`). */
export type StackDeployment = "separate" | "in-gateway";

/** The events of a `text/event-stream` body, in order. */
export function parseEvents(text: string) {
  return text
    .split("\n\n")
    .filter(Boolean)
    .map((block) => {
      const type = /^event: (.+)$/m.exec(block)?.[1];
      const data = JSON.parse(/^data: (.+)$/m.exec(block)?.[1] ?? "null");
      return { type, data };
    });
}

/**
 * The whole path per test file: a real redis-server, the local SpiceDB, the
 * fake model provider, the service and the gateway in front of it.
 */
export function useStack(
  serviceEnv: Record<string, string> = {},
  gatewayEnv: Record<string, string> = {},
  /** Collects every log line of service and gateway (at info), for tests that look for what must not be logged. */
  logLines?: string[],
  redisTopology: RedisTopology = "single",
  /** The service's clock, for retention tests. */
  serviceOptions: ServiceOptions = {},
  /**
   * Where the service runs: behind its own HTTP server, as two processes have it (the default), or
   * in the gateway's process (`@gw/gateway-with-service`). `TEST_SERVICE_IN_GATEWAY=true` makes the
   * second the default, to run any test file through it.
   */
  deployment: StackDeployment = process.env.TEST_SERVICE_IN_GATEWAY === "true" ? "in-gateway" : "separate",
): Stack {
  const stack = {} as Stack;
  /** Gateway's and service's log lines at warn and above, as they come. */
  const warnings: string[] = [];
  const database = useTestDatabase();
  let teardown: () => Promise<void> = async () => undefined;
  const redisStarted = redisStartedEarly(redisTopology);
  beforeAll(async () => {
    const [redisServer, spicedb, llm] = await Promise.all([
      redisStarted(),
      startTestSpiceDB(),
      startFakeLLM(),
    ]);
    const assertionSecret = randomBytes(32).toString("hex");
    const vaultKeys = newVaultKeys();
    // Never the repository's .data, which a `pnpm start` on this machine may be using.
    const dataDir = await mkdtemp(join(tmpdir(), "gw-stack-data-"));
    const common = {
      DATA_DIR: dataDir,
      REDIS_URL: redisServer.url,
      // The service's content and the gateway's audit trail, in one database as `pnpm start` has them.
      DATABASE_URL: database.url,
      INTERNAL_ASSERTION_SECRET: assertionSecret,
      // One vault for both, as `pnpm start` has it: MCP credentials in the gateway, provider keys in the service.
      VAULT_KEYS: vaultKeys,
      ...spicedbEnv(spicedb),
      SPICEDB_DEADLINE_MS: UNHURRIED_SPICEDB_DEADLINE_MS,
    };
    const wanted = process.env.TEST_LOG_LEVEL ?? "silent";
    const verbose = ["trace", "debug", "info"].includes(wanted);
    const serviceLogs: Record<string, unknown>[] = [];
    /** Where `name`'s lines go: its warnings and errors kept (`onWarning` too), each line to `onLine`, and shown with TEST_LOG_LEVEL. */
    const sink = (
      name: string,
      onWarning?: (entry: Record<string, unknown>) => void,
      onLine?: (line: string) => void,
    ) => ({
      write(line: string) {
        const entry = JSON.parse(line) as Record<string, unknown>;
        if (Number(entry.level) >= 40) {
          warnings.push(`${name} ${line.trimEnd()}`);
          onWarning?.(entry);
        }
        onLine?.(line);
        if (process.env.TEST_LOG_LEVEL) process.stdout.write(line);
      },
    });
    // The gateway's warnings and errors too, for a failed test's report (below); every line with `logLines`.
    const logger = logLines
      ? capturingLogger("info", logLines).logger
      : createLogger("gateway", verbose ? wanted : "warn", sink("gateway"));
    // Warnings are always kept (tests read them); more when TEST_LOG_LEVEL or logLines asks for it.
    const serviceLogger = createLogger(
      "service",
      verbose ? wanted : logLines ? "info" : "warn",
      sink(
        "service",
        (entry) => serviceLogs.push(entry),
        (line) => logLines?.push(line),
      ),
    );
    const service = await startService(
      loadConfig(serviceConfigSchema, {
        PORT: "0",
        LLM_BASE_URL: llm.baseUrl,
        LLM_API_KEY: "upstream-secret",
        LLM_DEFAULT_MODEL: "echo-small",
        // Longer than any test's steps while the fake provider holds an answer, on a loaded machine too (1 s
        // once failed a held background response before the test cancelled it); a test of the timeout sets
        // its own.
        LLM_TIMEOUT_MS: "30000",
        // Tests watch eval schedules fire every second.
        EVAL_MIN_INTERVAL_SECONDS: "1",
        ...common,
        ...serviceEnv,
      }),
      serviceLogger,
      serviceOptions,
    );
    const gateway = await startGateway(
      loadConfig(gatewayConfigSchema, {
        PORT: "0",
        HOST: "127.0.0.1",
        // In the gateway's process nothing may reach the service over HTTP: a hop would fail, not pass.
        SERVICE_URL: deployment === "in-gateway" ? "http://127.0.0.1:1" : service.url,
        GATEWAY_PUBLIC_URL: "https://gateway.test",
        JWT_SIGNING_KEYS: JSON.stringify({ keys: [await generateSigningJwk()] }),
        ...common,
        ...gatewayEnv,
      }),
      logger,
      {},
      deployment === "in-gateway" ? service.handler : undefined,
    );
    // Every answer a test gets from the gateway must be what the OpenAPI document declares.
    const unwatch = watchApi(gateway.url);
    const redis = testRedisClient(redisServer.url);
    const db = createPostgres(database.url, { connectionName: "test" });
    const store = new ApiKeyStore(redis);
    let serviceUp = true;
    Object.assign(stack, {
      gatewayUrl: gateway.url,
      serviceUrl: service.url,
      redisUrl: redisServer.url,
      database,
      db,
      redisServer,
      serviceRoutes: service.routes,
      gatewayRoutes: gateway.routes,
      llm,
      redis,
      store,
      assertionSecret,
      vaultKeys,
      serviceLogs,
      spicedb: { endpoint: spicedb.endpoint, presharedKey: spicedb.presharedKey },
      sweep: () => service.retention.sweep(),
      files: service.files,
      vectorStores: service.vectorStores,
      guardrails: service.guardrails,
      async createKey(input: Partial<CreateApiKeyInput> = {}) {
        const org = input.org ?? `org-${randomBytes(5).toString("hex")}`;
        const { record, secret } = await store.create({ org, owner: "backend", ...input });
        return { id: record.id, org, secret };
      },
      call(
        secret: string,
        path: string,
        init: { method?: string; json?: unknown; user?: string; headers?: Record<string, string> } = {},
      ) {
        const headers: Record<string, string> = { authorization: `Bearer ${secret}`, ...init.headers };
        if (init.user) headers["x-on-behalf-of"] = init.user;
        if (init.json !== undefined) headers["content-type"] = "application/json";
        return fetch(`${gateway.url}${path}`, {
          method: init.method ?? (init.json !== undefined ? "POST" : "GET"),
          headers,
          body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
        });
      },
      async stopService() {
        if (serviceUp) await service.close();
        serviceUp = false;
      },
    } satisfies Stack);
    teardown = async () => {
      unwatch();
      redis.disconnect();
      await db.close();
      await gateway.close();
      await stack.stopService();
      await Promise.all([redisServer.stop(), spicedb.close(), llm.close()]);
      await rm(dataDir, { recursive: true, force: true });
    };
  });
  afterAll(() => teardown());
  // A failed test's report shows what gateway and service warned of while it ran: the 503 a test did not
  // expect names its cause there.
  beforeEach(({ onTestFailed }) => {
    const from = warnings.length;
    onTestFailed(() => {
      const logged = warnings.slice(from);
      if (logged.length > 0)
        process.stderr.write(`gateway and service warnings during the test:\n${logged.join("\n")}\n`);
    });
  });
  return stack;
}

/** The body of an error on the `/api/v1/llm` surface: OpenAI's shape, with the catalogue's code and message. */
export function llmError(
  code: ErrorCode,
  message: unknown = expect.any(String),
  param: string | null = null,
) {
  return { error: { message, type: ERROR_CATALOGUE[code].type, param, code } };
}
