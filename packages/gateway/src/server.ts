import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { AuditLog } from "@gw/core/audit";
import {
  type AuthorizationHooks,
  connectAuthorization,
  type ResourceAuthorization,
  type TokenLeaseHooks,
} from "@gw/core/authz";
import { type Clock, systemClock } from "@gw/core/clock";
import { ConfigError } from "@gw/core/config";
import { closeGracefully, listen, listenForMetrics, type RouteTemplate, routesOf } from "@gw/core/http";
import { assertionSecret, InternalAssertions } from "@gw/core/internal-assertion";
import { createLogger, type Logger, redactUrl } from "@gw/core/logger";
import {
  CredentialStore,
  McpReadCache,
  McpServerStore,
  McpToolAuthorization,
  type Resolver,
  UpstreamClients,
  UpstreamPolicy,
  Vault,
  vaultKeysOf,
} from "@gw/core/mcp";
import { RedisKeyOwners } from "@gw/core/on-behalf-of";
import { createPostgres, migrateWhenReachable } from "@gw/core/postgres";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { CountingWindows } from "@gw/core/windows";
import { ensureBootstrapAdminKey } from "./api-keys/bootstrap.ts";
import { CachedApiKeyLookup, createKeyEventsSubscriber } from "./api-keys/lookup.ts";
import { OrgLimitsStore } from "./api-keys/org-limits.ts";
import { ApiKeyStore } from "./api-keys/store.ts";
import { createGatewayApp } from "./app.ts";
import type { GatewayConfig } from "./config.ts";
import { ConsoleSessions } from "./console/sessions.ts";
import { SignInLimits } from "./console/sign-in-limits.ts";
import type { ServiceHandler } from "./forward/forward.ts";
import { createGatewayMetrics } from "./metrics.ts";
import { OAuthClients } from "./oauth/clients.ts";
import { ConsentGrants } from "./oauth/grants.ts";
import { IdentityProviders } from "./oauth/identity-providers.ts";
import { OidcRelyingParty } from "./oauth/oidc.ts";
import { RefreshTokens } from "./oauth/refresh-tokens.ts";
import { RegistrationLimits } from "./oauth/registration-limits.ts";
import { AuthorizationRequests } from "./oauth/requests.ts";
import { RevokedFamilies } from "./oauth/revoked-families.ts";
import { RequestWindows } from "./rate-limit/request-windows.ts";
import { LookupCursors } from "./routes/authorization/lookup-cursor.ts";
import {
  developmentSigningKeys,
  loadSigningKeys,
  SigningKeyConfigError,
  type SigningKeys,
} from "./tokens/signing-keys.ts";
import { CLOCK_TOLERANCE_SECONDS, TokenService } from "./tokens/tokens.ts";

/** How often expired audit records are deleted (each replica; the sweeps skip each other's rows). */
const AUDIT_SWEEP_INTERVAL_MS = 60_000;

export interface RunningGateway {
  url: string;
  port: number;
  /** Where Prometheus scrapes this gateway. */
  metricsUrl: string;
  logger: Logger;
  /** The same authorization model the routes use, e.g. for the ownership of new resources. */
  authorization: ResourceAuthorization;
  /** The lookups' cursors. */
  lookupCursors: LookupCursors;
  tokens: TokenService;
  /** The endpoints it serves (the OpenAPI document must list each). */
  routes: RouteTemplate[];
  close(): Promise<void>;
}

/** What a test injects into a gateway it starts in process. */
export interface GatewaySeams {
  /** Awaited between the authorization model's checks and the writes they guard, and before a check's decision is kept. */
  authorizationHooks?: AuthorizationHooks;
  /** Awaited before a told write of an MCP server's token is applied here (`MCP_TOKEN_LEASE_MS`). */
  tokenLeaseHooks?: TokenLeaseHooks;
  /** The process's one clock, which a test moves instead of waiting; the system clock by default. */
  clock?: Clock;
  /** How upstream MCP servers' names resolve. */
  resolver?: Resolver;
  /** Certificates trusted for OAuth client metadata documents instead of the system's. */
  clientMetadataCa?: string;
}

/** Wires the gateway's dependencies, applies the bootstrap key and starts listening. */
export async function startGateway(
  config: GatewayConfig,
  logger = createLogger("gateway", config.LOG_LEVEL),
  /** What tests inject (none in production). */
  seams: GatewaySeams = {},
  /** The service in this process (`@gw/gateway-with-service`): requests go to it instead of `SERVICE_URL`. */
  service?: ServiceHandler,
): Promise<RunningGateway> {
  const clock = seams.clock ?? systemClock;
  const vaultKeys = await vaultKeysOf(config.VAULT_KEYS, config.DATA_DIR, logger);
  // Read before anything is connected: a key set that does not read stops the start (exit 78) at once.
  const jwtKeys = await signingKeys(config, logger);
  const metrics = createGatewayMetrics();
  // No offline queue: while Redis is away, commands fail at once instead of piling up behind a timeout.
  const redis = createRedis(config.REDIS_URL, {
    connectionName: "gateway",
    commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS,
    metrics: metrics.redisCommands,
    extra: { enableOfflineQueue: false },
  });
  const subscriber = createKeyEventsSubscriber(config.REDIS_URL, { logger, metrics: metrics.redisCommands });
  redis.on("error", (err) => logger.warn({ err: err.message }, "redis error"));

  await untilReady(redis, logger);
  const keyOwners = new RedisKeyOwners(redis, { staleIfErrorMs: config.API_KEY_STALE_IF_ERROR_MS, clock });
  const store = new ApiKeyStore(redis, clock, keyOwners);
  const keys = new CachedApiKeyLookup({
    store,
    subscriber,
    ttlMs: config.API_KEY_CACHE_TTL_MS,
    staleIfErrorMs: config.API_KEY_STALE_IF_ERROR_MS,
    logger,
    clock,
  });
  await keys.start();
  // What every proxied MCP call reads from PostgreSQL, kept here and dropped on a change (on any replica).
  const mcpReads = new McpReadCache({ publisher: redis, subscriber, logger, clock });
  await mcpReads.start();
  if (config.GATEWAY_BOOTSTRAP_ADMIN_KEY) {
    await ensureBootstrapAdminKey(
      store,
      config.GATEWAY_BOOTSTRAP_ADMIN_KEY,
      { org: config.GATEWAY_BOOTSTRAP_ORG, user: config.GATEWAY_BOOTSTRAP_OWNER },
      logger,
    );
  }

  // The audit trail: the schema first (one process at a time), then the pool.
  await migrateWhenReachable(config.DATABASE_URL, logger);
  const db = createPostgres(config.DATABASE_URL, {
    connectionName: "gateway",
    onIdleError: (err) => logger.warn({ err: err.message }, "postgres connection error"),
  });
  const {
    spicedb,
    authorization,
    tokens: zedTokens,
    leases,
  } = connectAuthorization(config, redis, logger, {
    metrics: metrics.grpcClient,
    cacheMetrics: metrics.decisionCache,
    hooks: seams.authorizationHooks,
    clock,
    db,
    leases: { subscriber, leaseMs: config.MCP_TOKEN_LEASE_MS, hooks: seams.tokenLeaseHooks },
  });
  await leases?.start();
  if (leases) metrics.watchLease(() => leases.holds());
  const audit = new AuditLog(db, {
    retentionMs: config.AUDIT_RETENTION,
    logger,
    clock,
    onLost: (count, err) => {
      metrics.auditWriteErrors.inc(count);
      logger.error({ err: err.message, count }, "could not record MCP tool calls in the audit trail");
    },
  });
  const revokedFamilies = new RevokedFamilies(
    redis,
    config.MCP_OAUTH_ACCESS_TOKEN_TTL,
    CLOCK_TOLERANCE_SECONDS,
  );
  const refreshTokens = new RefreshTokens(
    db,
    clock,
    Math.floor(config.MCP_OAUTH_REFRESH_TOKEN_TTL / 1000),
    revokedFamilies,
  );
  const oauthClients = new OAuthClients(db, {
    policy: new UpstreamPolicy({
      allowPrivate: config.MCP_OAUTH_ALLOW_PRIVATE_CLIENT_METADATA,
      allowPrivateSetting: "MCP_OAUTH_ALLOW_PRIVATE_CLIENT_METADATA",
      ...(seams.resolver ? { resolver: seams.resolver } : {}),
    }),
    clock,
    cacheSize: config.MCP_OAUTH_CLIENT_METADATA_CACHE_SIZE,
    cacheTtlMs: config.MCP_OAUTH_CLIENT_METADATA_CACHE_TTL,
    timeoutMs: config.MCP_UPSTREAM_TIMEOUT_MS,
    ca: seams.clientMetadataCa,
    maxUnusedClients: config.MCP_OAUTH_MAX_UNUSED_CLIENTS,
    onDocument: (outcome) => metrics.oauthRegistrations.inc({ kind: "metadata_document", outcome }),
  });
  const auditSweep = setInterval(() => {
    audit.sweep().then(
      (deleted) => deleted > 0 && logger.info({ deleted }, "expired audit records deleted"),
      (err: unknown) => logger.warn({ err: (err as Error).message }, "audit retention sweep failed"),
    );
    refreshTokens.sweep().then(
      (deleted) => deleted > 0 && logger.info({ deleted }, "expired MCP client refresh tokens deleted"),
      (err: unknown) => logger.warn({ err: (err as Error).message }, "refresh token sweep failed"),
    );
    oauthClients.sweep().then(
      (deleted) => deleted > 0 && logger.info({ deleted }, "MCP client registrations never used deleted"),
      (err: unknown) => logger.warn({ err: (err as Error).message }, "MCP client registration sweep failed"),
    );
  }, AUDIT_SWEEP_INTERVAL_MS);
  auditSweep.unref();

  // Its own connection: auto-pipelining sends all windows of a decision in one round trip, and a
  // short deadline with no offline queue hands a Redis failure to the insurance limiter at once.
  const rateLimitRedis = createRedis(config.REDIS_URL, {
    connectionName: "gateway-rate-limit",
    commandTimeoutMs: config.RATE_LIMIT_REDIS_TIMEOUT_MS,
    metrics: metrics.redisCommands,
    extra: { enableAutoPipelining: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 },
  });
  rateLimitRedis.on("error", (err) => logger.debug({ err: err.message }, "rate-limit redis error"));
  const limiter = new RequestWindows(new CountingWindows(rateLimitRedis, { clock }), {
    mode: config.RATE_LIMIT_FAIL_MODE,
    metrics,
    logger,
    clock,
    onGiveBackError: (err) =>
      logger.debug({ err: (err as Error).message }, "unused lease points could not be given back"),
  });

  const tokens = new TokenService(jwtKeys, config.GATEWAY_PUBLIC_URL, clock);

  const secret = await assertionSecret(
    config.INTERNAL_ASSERTION_SECRET,
    resolve(config.DATA_DIR, "internal-assertion-secret"),
    logger,
  );
  const assertions = new InternalAssertions(secret);
  const lookupCursors = new LookupCursors(secret, config.LOOKUP_CURSOR_TTL, clock);

  const policy = new UpstreamPolicy({
    allowPrivate: config.MCP_ALLOW_PRIVATE_UPSTREAMS,
    ...(seams.resolver ? { resolver: seams.resolver } : {}),
  });
  const upstreams = new UpstreamClients({
    policy,
    timeoutMs: config.MCP_UPSTREAM_TIMEOUT_MS,
    maxAnswerBytes: config.MCP_MAX_ANSWER_BYTES,
    maxTools: config.MCP_MAX_TOOLS_PER_SERVER,
    onLimit: (limit) => metrics.mcpUpstreamLimits.inc({ limit }),
    logger,
  });
  const vault = new Vault(vaultKeys);
  const credentials = new CredentialStore(db, vault, {
    clock,
    cache: mcpReads,
    onUnreadable: (reason) => logger.error({ reason }, "an MCP credential could not be opened"),
  });

  const identityPolicy = new UpstreamPolicy({
    allowPrivate: config.MCP_OAUTH_ALLOW_PRIVATE_IDENTITY_PROVIDERS,
    allowPrivateSetting: "MCP_OAUTH_ALLOW_PRIVATE_IDENTITY_PROVIDERS",
    ...(seams.resolver ? { resolver: seams.resolver } : {}),
  });

  const app = createGatewayApp({
    oauth: {
      identityProviders: new IdentityProviders(db, vault, audit, {
        clock,
        onUnreadable: (org, reason) =>
          logger.error({ org, reason }, "an organization's OpenID provider secret could not be opened"),
      }),
      oidc: new OidcRelyingParty({ policy: identityPolicy, timeoutMs: config.MCP_UPSTREAM_TIMEOUT_MS }),
      clients: oauthClients,
      registrationLimits: new RegistrationLimits(redis, {
        perAddress: config.MCP_OAUTH_REGISTRATIONS_PER_ADDRESS,
        windowMs: config.MCP_OAUTH_REGISTRATION_WINDOW,
      }),
      requests: new AuthorizationRequests(redis),
      refreshTokens,
      revokedFamilies,
      grants: new ConsentGrants(db, clock),
      accessTokenTtlSeconds: config.MCP_OAUTH_ACCESS_TOKEN_TTL,
    },
    mcp: {
      servers: new McpServerStore(db, clock, mcpReads),
      credentials,
      tools: new McpToolAuthorization(spicedb, zedTokens, authorization),
      upstreams,
      policy,
      limits: {
        answerBytes: config.MCP_MAX_ANSWER_BYTES,
        toolsPerServer: config.MCP_MAX_TOOLS_PER_SERVER,
        toolNameBytes: config.MCP_MAX_TOOL_NAME_BYTES,
        newToolsPerListing: config.MCP_MAX_NEW_TOOLS_PER_LISTING,
      },
    },
    logger,
    metrics,
    clock,
    redis,
    store,
    keys,
    keyOwners,
    spicedb,
    authorization,
    audit,
    grantMaxTtlSeconds: config.GRANT_MAX_TTL,
    lookupCursors,
    metricsEndpoint: config.metricsEndpoint,
    limiter,
    defaultLimits: config.DEFAULT_LIMITS,
    orgLimits: new OrgLimitsStore(redis, undefined, clock),
    consoleSessions: new ConsoleSessions(redis, {
      idleMs: config.CONSOLE_SESSION_IDLE_TIMEOUT,
      maxAgeMs: config.CONSOLE_SESSION_MAX_AGE,
      clock,
    }),
    consoleSignInLimits: new SignInLimits(redis, {
      perAddress: config.CONSOLE_SIGN_IN_FAILURES_PER_ADDRESS,
      perOrg: config.CONSOLE_SIGN_IN_FAILURES_PER_ORG,
      windowMs: config.CONSOLE_SIGN_IN_WINDOW,
    }),
    tokens,
    publicUrl: config.GATEWAY_PUBLIC_URL,
    forward: {
      serviceUrl: config.SERVICE_URL,
      ...(service ? { inProcess: service } : {}),
      assertions,
      timeoutMs: config.SERVICE_TIMEOUT_MS,
      idleTimeoutMs: config.SERVICE_IDLE_TIMEOUT_MS,
      logger,
    },
  });
  const { server, port } = await listen(app, config.PORT, config.HOST);
  const metricsListener = await listenForMetrics(config.metricsEndpoint, metrics, config.HOST, logger);
  logger.info(
    {
      port,
      redis: redactUrl(config.REDIS_URL),
      database: redactUrl(config.DATABASE_URL),
      spicedb: config.spicedb.endpoint,
      spicedbTls: !config.spicedb.insecure,
      metricsPort: metricsListener?.port ?? port,
    },
    "gateway listening",
  );

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    metricsUrl: `http://127.0.0.1:${metricsListener?.port ?? port}/metrics`,
    logger,
    authorization,
    lookupCursors,
    tokens,
    routes: routesOf(app),
    async close() {
      await Promise.all([closeGracefully(server, config.SHUTDOWN_GRACE_MS), metricsListener?.close()]);
      clearInterval(auditSweep);
      // The records of the last calls answered before the server closed.
      await audit.flush();
      await upstreams.close();
      await leases?.close();
      subscriber.disconnect();
      await limiter.close();
      rateLimitRedis.disconnect();
      spicedb.close();
      await redis.quit().catch(() => redis.disconnect());
      await db.close();
    },
  } satisfies RunningGateway;
}

/** Configured keys (env or file), else the development key under DATA_DIR. */
async function signingKeys(config: GatewayConfig, logger: Logger): Promise<SigningKeys> {
  // A key set that does not read is a bad setting (exit 78, the variable named), not a crash.
  const named = async (variable: string, read: () => Promise<string>) => {
    let text: string;
    try {
      text = await read();
    } catch (err) {
      throw new ConfigError([`${variable}: cannot be read (${(err as NodeJS.ErrnoException).code ?? err})`]);
    }
    try {
      return await loadSigningKeys(text, config.JWT_ACTIVE_KID);
    } catch (err) {
      if (!(err instanceof SigningKeyConfigError)) throw err;
      const about = err.activeKid ? "JWT_ACTIVE_KID" : variable;
      throw new ConfigError([`${about}: ${err.message}`]);
    }
  };
  if (config.JWT_SIGNING_KEYS) {
    const keys = config.JWT_SIGNING_KEYS;
    return named("JWT_SIGNING_KEYS", async () => keys);
  }
  if (config.JWT_SIGNING_KEYS_FILE) {
    const file = config.JWT_SIGNING_KEYS_FILE;
    return named("JWT_SIGNING_KEYS_FILE", () => readFile(file, "utf8"));
  }
  return developmentSigningKeys(resolve(config.DATA_DIR, "jwt", "development-signing-keys.json"), logger);
}

/** Start-up waits for Redis (commands fail fast without an offline queue), but not forever. */
async function untilReady(redis: RedisClient, logger: Logger, timeoutMs = 10_000): Promise<void> {
  if (redis.status === "ready") return;
  const ready = await Promise.race([
    new Promise<boolean>((resolve) => redis.once("ready", () => resolve(true))),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref()),
  ]);
  if (!ready) logger.warn("Redis is not reachable yet; starting anyway, /readyz reports it");
}
