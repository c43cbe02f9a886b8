import { randomBytes } from "node:crypto";
import type { AuthorizationHooks, ResourceAuthorization } from "@gw/core/authz";
import type { Clock } from "@gw/core/clock";
import { createLogger } from "@gw/core/logger";
import { newVaultKeys } from "@gw/core/mcp";
import type { RedisClient } from "@gw/core/redis";
import {
  type RedisTopology,
  redisStartedEarly,
  spicedbEnv,
  startNothingListener,
  startTestSpiceDB,
  type TestDatabase,
  type TestRedisStore,
  testRedisClient,
  UNHURRIED_SPICEDB_DEADLINE_MS,
  useTestDatabase,
} from "@gw/test-kit";
import { watchApi } from "@gw/test-kit/api-conformance";
import type { JWK } from "jose";
import { afterAll, beforeAll } from "vitest";
import type { CreateApiKeyInput } from "../src/api-keys/schema.ts";
import { ApiKeyStore } from "../src/api-keys/store.ts";
import type { ApiKeyRecord } from "../src/api-keys/types.ts";
import { type GatewayConfig, gatewayConfigSchema } from "../src/config.ts";
import type { ServiceHandler } from "../src/forward/forward.ts";
import type { LookupCursors } from "../src/routes/authorization/lookup-cursor.ts";
import { startGateway } from "../src/server.ts";
import { generateSigningJwk } from "../src/tokens/signing-keys.ts";

export const TEST_PUBLIC_URL = "https://gateway.test";

export interface GatewayHarness {
  /** Base URL of an in-process gateway. */
  url: string;
  /** Where its metrics are served (`METRICS_PORT`, else its own port). */
  metricsUrl: string;
  redisUrl: string;
  /** The Redis behind this gateway (one server or a cluster), to stop and restart it. */
  redisServer: TestRedisStore;
  /** A direct Redis connection, for assertions on what is stored. */
  redis: RedisClient;
  store: ApiKeyStore;
  /** The gateway's own authorization model, e.g. to make a user owner of a new resource. */
  authorization: ResourceAuthorization;
  /** The seams injected into that model: set one to hold a write between its check and its write. */
  authorizationHooks: AuthorizationHooks;
  /** The gateway's lookup cursors. */
  lookupCursors: LookupCursors;
  /** The private JWK the gateway signs tokens with, to forge tokens in tests. */
  signingJwk: JWK;
  /** `iss` of the gateway's tokens, and the audience it accepts. */
  publicUrl: string;
  /** The gateway's PostgreSQL database (the audit trail), unless `DATABASE_URL` was given. */
  database: TestDatabase;
  /** The local SpiceDB server behind this gateway. */
  spicedb: Awaited<ReturnType<typeof startTestSpiceDB>>;
  /** Creates a key in a fresh organization unless one is given. */
  createKey(input?: Partial<CreateApiKeyInput>): Promise<{ record: ApiKeyRecord; secret: string }>;
  /** `fetch` against the gateway with an optional bearer credential. */
  call(path: string, init?: RequestInit & { bearer?: string; json?: unknown }): Promise<Response>;
}

/** A fresh organization id, so tests never see each other's keys. */
export const freshOrg = () => `org-${randomBytes(5).toString("hex")}`;

/**
 * Per test file: a real redis-server on a free port (or a three-master Redis
 * Cluster) and a gateway on another, torn down afterwards. Use inside a
 * `describe` or at the top of a file.
 */
export function useGateway(
  env: Record<string, string> = {},
  /** Variables known only once other `beforeAll`s have run (e.g. a stand-in service's URL). */
  lateEnv: () => Record<string, string> = () => ({}),
  redisTopology: RedisTopology = "single",
  /** The gateway's clock (a `ManualClock` a test moves); the system clock by default. */
  clock?: Clock,
  /** A stand-in service in the gateway's process, handed what it forwards instead of `SERVICE_URL`. */
  inProcessService?: ServiceHandler,
): GatewayHarness {
  const harness = { authorizationHooks: {} } as GatewayHarness;
  const database = useTestDatabase();
  let stop: (() => Promise<void>) | undefined;
  const redisStarted = redisStartedEarly(redisTopology);
  beforeAll(async () => {
    const [redisServer, spicedb, noService] = await Promise.all([
      redisStarted(),
      startTestSpiceDB(),
      startNothingListener(),
    ]);
    const signingJwk = await generateSigningJwk();
    const config: GatewayConfig = gatewayConfigSchema.parse({
      PORT: "0",
      HOST: "127.0.0.1",
      SERVICE_URL: noService.url,
      REDIS_URL: redisServer.url,
      GATEWAY_PUBLIC_URL: TEST_PUBLIC_URL,
      JWT_SIGNING_KEYS: JSON.stringify({ keys: [signingJwk] }),
      INTERNAL_ASSERTION_SECRET: randomBytes(32).toString("hex"),
      VAULT_KEYS: newVaultKeys(),
      DATABASE_URL: database.url,
      ...spicedbEnv(spicedb),
      SPICEDB_DEADLINE_MS: UNHURRIED_SPICEDB_DEADLINE_MS,
      ...env,
      ...lateEnv(),
    });
    const gateway = await startGateway(
      config,
      createLogger("gateway-test", process.env.TEST_LOG_LEVEL ?? "silent"),
      { authorizationHooks: harness.authorizationHooks, ...(clock ? { clock } : {}) },
      inProcessService,
    );
    // Every answer a test gets from it must be what the OpenAPI document declares; what it forwards
    // to a stand-in service is that stand-in's answer, which only the test declares.
    const unwatch = watchApi(gateway.url, { gatewayOnly: true });
    const redis = testRedisClient(redisServer.url);
    const store = new ApiKeyStore(redis);
    Object.assign(harness, {
      url: gateway.url,
      metricsUrl: gateway.metricsUrl,
      redisUrl: redisServer.url,
      redisServer,
      redis,
      store,
      authorization: gateway.authorization,
      authorizationHooks: harness.authorizationHooks,
      lookupCursors: gateway.lookupCursors,
      signingJwk,
      publicUrl: config.GATEWAY_PUBLIC_URL,
      database,
      spicedb,
      createKey: (input: Partial<CreateApiKeyInput> = {}) =>
        store.create({ org: freshOrg(), owner: "alice", ...input }),
      call: (path: string, init: RequestInit & { bearer?: string; json?: unknown } = {}) => {
        const headers = new Headers(init.headers);
        if (init.bearer !== undefined) headers.set("authorization", `Bearer ${init.bearer}`);
        let body = init.body;
        if (init.json !== undefined) {
          headers.set("content-type", "application/json");
          body = JSON.stringify(init.json);
        }
        return fetch(`${gateway.url}${path}`, { ...init, headers, body });
      },
    } satisfies GatewayHarness);
    stop = async () => {
      unwatch();
      redis.disconnect();
      await gateway.close();
      await Promise.all([redisServer.stop(), spicedb.close(), noService.close()]);
    };
  });
  afterAll(async () => {
    await stop?.();
  });
  return harness;
}

/** The admin console's sign-in as a browser makes it: the form's CSRF token from its cookie, then the POST. */
export async function consoleSignIn(
  gatewayUrl: string,
  secret: string,
  origin = new URL(gatewayUrl).origin,
): Promise<Response> {
  const form = await fetch(`${gatewayUrl}/admin/sign-in`);
  const token = /name="csrf" value="([^"]+)"/.exec(await form.text())![1]!;
  const cookie = form.headers
    .getSetCookie()
    .map((c) => c.split(";")[0])
    .join("; ");
  return fetch(`${gatewayUrl}/admin/sign-in`, {
    method: "POST",
    redirect: "manual",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Cookie: cookie, Origin: origin },
    body: new URLSearchParams({ csrf: token, key: secret }),
  });
}

/** The console session's cookie (`gw_console=…`) a sign-in set, if it set one. */
export const consoleSessionCookie = (res: Response) =>
  res.headers
    .getSetCookie()
    .find((c) => c.startsWith("gw_console="))
    ?.split(";")[0];
