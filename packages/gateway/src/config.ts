import { checkSpiceDBEnv, spicedbClientOptions, spicedbEnvShape } from "@gw/core/authz";
import { env } from "@gw/core/config";
import { metricsEndpointOf, metricsEnvShape } from "@gw/core/http";
import { type Limits, WINDOWS } from "@gw/core/limits";
import { MAX_TOOL_NAME_BYTES, vaultKeysSchema } from "@gw/core/mcp";
import { localDatabaseUrl } from "@gw/core/postgres";
import { localRedisUrl } from "@gw/core/redis";
import { tracingEnvShape } from "@gw/core/tracing";
import { z } from "zod";

/** The gateway's environment. Each variable's comment is its entry in docs/configuration.md (`pnpm docs:config`). */
/** `second=20,day=100000` → `{second: 20, day: 100000}` (`DEFAULT_LIMITS`). */
export const limitsList = z.string().transform((value, ctx): Limits => {
  const limits: Limits = {};
  for (const part of value
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [window, amount] = part.split("=");
    const quota = Number(amount);
    if (!WINDOWS.includes(window as never) || !Number.isInteger(quota) || quota < 1) {
      ctx.addIssue({
        code: "custom",
        message: `'${part}' is not WINDOW=N with WINDOW one of ${WINDOWS.join(", ")}`,
      });
      return z.NEVER;
    }
    limits[window as keyof Limits] = quota;
  }
  return limits;
});

export const gatewayConfigSchema = z
  .object({
    /** TCP port the gateway listens on. Default 8080. */
    PORT: env.port(8080),
    /** Interface to bind. Default 0.0.0.0. */
    HOST: z.string().default("0.0.0.0"),
    /** pino log level. Default info. */
    LOG_LEVEL: env.logLevel(),
    /** Redis for API keys, rate-limit and budget counters, ZedTokens: `redis://` or `rediss://` for one server, `redis+cluster://[user:password@]host:port,host:port…` (`rediss+cluster://` for TLS) for a Redis Cluster, naming some of its nodes. Unset: the local redis-server that `pnpm start` runs (`redis://127.0.0.1:$LOCAL_REDIS_PORT`). */
    REDIS_URL: env.redisUrl(),
    /** PostgreSQL for the audit trail: `postgres://user:password@host:port/database` (the server SpiceDB uses may serve it, from a database and user of its own); missing migrations (`packages/core/migrations`) are applied at start under an advisory lock. Unset: the local PostgreSQL that `pnpm start` runs (`postgres://gateway@127.0.0.1:$LOCAL_POSTGRES_PORT/gateway`). */
    DATABASE_URL: env.databaseUrl(),
    /** Deadline of one Redis command, in milliseconds. Default 2000. */
    REDIS_COMMAND_TIMEOUT_MS: env.positiveInt(2_000),
    /** How long a looked-up API key is cached in process, in milliseconds; 0 disables. Default 1000. */
    API_KEY_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(1_000),
    /**
     * How long a cached key keeps working while Redis cannot be reached, in milliseconds; 0 fails closed.
     * A replica cut off from Redis may honour a key revoked elsewhere for this long. An organization's key owners
     * as last read (who no key may act as) likewise decide that long. Default 30000.
     */
    API_KEY_STALE_IF_ERROR_MS: z.coerce.number().int().min(0).max(3_600_000).default(30_000),
    /** When set, start-up makes sure a key with this secret and `admin:api-keys` exists. At least 32 characters. */
    GATEWAY_BOOTSTRAP_ADMIN_KEY: z.string().min(32, "must be at least 32 characters").max(256).optional(),
    /** Organization of the bootstrap key. Default `default`. */
    GATEWAY_BOOTSTRAP_ORG: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/)
      .default("default"),
    /** Owner user of the bootstrap key. Default `admin`. */
    GATEWAY_BOOTSTRAP_OWNER: z.string().min(1).max(256).default("admin"),
    /** Time given to in-flight requests on SIGTERM, in milliseconds. Default 10000. */
    SHUTDOWN_GRACE_MS: env.positiveInt(10_000),
    /** Request quotas for keys that have none of their own, e.g. `second=20,day=100000`; `pnpm keys usage` reads it too, to show them. Default: none (such keys are not limited). */
    DEFAULT_LIMITS: limitsList.default({}),
    /** When Redis fails: `open` keeps enforcing quotas per replica in memory, `closed` answers 503. Default open. */
    RATE_LIMIT_FAIL_MODE: z.enum(["open", "closed"]).default("open"),
    /** Deadline of one rate-limit decision in Redis, in milliseconds, before the fail mode applies. Default 250. */
    RATE_LIMIT_REDIS_TIMEOUT_MS: env.positiveInt(250),
    /** The gateway's public base URL: the `iss` of its tokens, the `aud` of tokens it accepts itself, and its MCP proxies' protected-resource URLs (an OAuth MCP client that connects by another host name refuses them; logged once per host). Default http://localhost:$PORT. */
    GATEWAY_PUBLIC_URL: z
      .url({ protocol: /^https?$/ })
      .transform((u) => u.replace(/\/+$/, ""))
      .optional(),
    /** JWT signing keys: a JWK Set (JSON) with private keys, ES256 or EdDSA, each with a kid. */
    JWT_SIGNING_KEYS: z.string().optional(),
    /** A file holding the JWK Set instead of JWT_SIGNING_KEYS. */
    JWT_SIGNING_KEYS_FILE: z.string().optional(),
    /** kid of the key that signs; the others only verify. Default: the first key with a private part. */
    JWT_ACTIVE_KID: z.string().optional(),
    /** Directory for local development data (the development signing key). Default .data. */
    DATA_DIR: z.string().default(".data"),
    ...spicedbEnvShape,
    ...metricsEnvShape,
    ...tracingEnvShape,
    /** Base URL of the service the gateway forwards to. Default http://127.0.0.1:8081. Not read with the service in the gateway's process (`packages/gateway-with-service`). */
    SERVICE_URL: z.url({ protocol: /^https?$/ }).default("http://127.0.0.1:8081"),
    /** Time allowed until the service's response headers arrive, in milliseconds. Default 120000. Not read with the service in the gateway's process. */
    SERVICE_TIMEOUT_MS: env.positiveInt(120_000),
    /** Once the service's answer has begun, the longest silence allowed before the gateway ends it, in milliseconds. Default 120000. Not read with the service in the gateway's process. */
    SERVICE_IDLE_TIMEOUT_MS: env.positiveInt(120_000),
    /** Shared secret for the gateway's assertions to the service (at least 32 characters). Unset: a development secret under DATA_DIR. */
    INTERNAL_ASSERTION_SECRET: z.string().min(32, "must be at least 32 characters").optional(),
    /** Longest lifetime of an expiring grant (`expiresAt`), in seconds. Default 31536000 (one year). */
    GRANT_MAX_TTL: env.positiveInt(31_536_000),
    /** How long a lookup's `next_cursor` stays valid, in seconds (at least 600). Default 3600. */
    LOOKUP_CURSOR_TTL: z.coerce.number().int().min(600).max(86_400).default(3_600),
    /** How long audit records are kept (in PostgreSQL), a duration with its unit. Default 400d. */
    AUDIT_RETENTION: env.duration("400d"),
    /** An admin console session unused this long ends, a duration with its unit. Default 30m. */
    CONSOLE_SESSION_IDLE_TIMEOUT: env.duration("30m"),
    /** An admin console session ends this long after sign-in however busy, a duration with its unit. Default 12h. */
    CONSOLE_SESSION_MAX_AGE: env.duration("12h"),
    /** Failed admin console sign-ins one client address (an IPv6 /64) may make per CONSOLE_SIGN_IN_WINDOW; past them its sign-ins answer 429. Default 10. */
    CONSOLE_SIGN_IN_FAILURES_PER_ADDRESS: env.positiveInt(10),
    /** Failed admin console sign-ins with keys of one organization (revoked, expired, without admin:console) per CONSOLE_SIGN_IN_WINDOW, from any address; past them that organization's keys answer 429. Default 50. */
    CONSOLE_SIGN_IN_FAILURES_PER_ORG: env.positiveInt(50),
    /** The window failed console sign-ins are counted in, a duration with its unit, counted in whole seconds (a fraction is rounded up). Default 15m. */
    CONSOLE_SIGN_IN_WINDOW: env.duration("15m"),
    /** Key-encryption keys of the vault (MCP credentials here; organizations' provider keys in the service, which must have the same value), `id:base64,id:base64…` (32 bytes each; the first wraps new secrets, the others still open old ones). Required when NODE_ENV=production; otherwise unset means a development key under DATA_DIR (`pnpm start` makes one). */
    VAULT_KEYS: vaultKeysSchema.optional(),
    /** Lets registered MCP servers use http and loopback, private or link-local addresses (development and tests only). Default false. */
    MCP_ALLOW_PRIVATE_UPSTREAMS: env.boolean(false),
    /** How long this gateway may answer MCP servers' last-write ZedTokens from memory after last hearing from Redis, in milliseconds (docs/adr/0027-leased-zedtokens.md): a proxied call then reads nothing from Redis, and a write of a server's roles waits for every gateway to apply it, or for a gateway that stopped answering for this long. 0: every call reads the token from Redis. Default 2000. */
    MCP_TOKEN_LEASE_MS: z.coerce.number().int().min(0).max(60_000).default(2_000),
    /** Deadline of one request to an upstream MCP server, in milliseconds. Default 30000. */
    MCP_UPSTREAM_TIMEOUT_MS: env.positiveInt(30_000),
    /** Largest answer read from an upstream MCP server (JSON or SSE, and a listing's pages together), and largest answer of the proxy, in bytes; past it the upstream's connection is dropped and the caller gets an error. Default 4194304 (4 MiB). */
    MCP_MAX_ANSWER_BYTES: z.coerce.number().int().min(1_024).max(1_073_741_824).default(4_194_304),
    /** Most tools an upstream MCP server may offer in one listing (more is refused), and most tools of a server given a role. Default 500. */
    MCP_MAX_TOOLS_PER_SERVER: z.coerce.number().int().min(1).max(10_000).default(500),
    /** Longest tool name, in bytes as encoded in its SpiceDB id (each byte outside A-Z, a-z, 0-9, _ and - takes 3), at most 900; longer names are refused. Default 384 (128 characters of MCP's tool-name alphabet). */
    MCP_MAX_TOOL_NAME_BYTES: z.coerce.number().int().min(16).max(MAX_TOOL_NAME_BYTES).default(384),
    /** Most new tools one listing gives their default role (SpiceDB writes of up to 250 each); the others are registered by later listings. Default 250. */
    MCP_MAX_NEW_TOOLS_PER_LISTING: z.coerce.number().int().min(1).max(1_000).default(250),
    /** Lifetime of the access tokens the OAuth authorization server gives MCP clients, in seconds (60 to 86400). Default 900. */
    MCP_OAUTH_ACCESS_TOKEN_TTL: z.coerce.number().int().min(60).max(86_400).default(900),
    /** Lifetime of an MCP client's refresh token (each is used once and replaced), a duration with its unit. Default 30d. */
    MCP_OAUTH_REFRESH_TOKEN_TTL: env.duration("30d"),
    /** Lets a Client ID Metadata Document (an https client id) be fetched from loopback, private or link-local addresses (development and tests only). Default false. */
    MCP_OAUTH_ALLOW_PRIVATE_CLIENT_METADATA: env.boolean(false),
    /** Most Client ID Metadata Documents kept in memory per gateway process. Default 1000. */
    MCP_OAUTH_CLIENT_METADATA_CACHE_SIZE: z.coerce.number().int().min(1).max(100_000).default(1_000),
    /** How long a fetched Client ID Metadata Document is used before it is fetched again, a duration with its unit. Default 5m. */
    MCP_OAUTH_CLIENT_METADATA_CACHE_TTL: env.duration("5m"),
    /** Dynamic client registrations (`POST /oauth/register`) one client address may make per `MCP_OAUTH_REGISTRATION_WINDOW` (counted in Redis; an IPv6 address as its /64); more are 429. Default 20. */
    MCP_OAUTH_REGISTRATIONS_PER_ADDRESS: z.coerce.number().int().min(1).max(100_000).default(20),
    /** The window of `MCP_OAUTH_REGISTRATIONS_PER_ADDRESS`, a duration with its unit. Default 1h. */
    MCP_OAUTH_REGISTRATION_WINDOW: env.duration("1h"),
    /** Most registered MCP clients not yet used (no token issued, registered within the day they are kept): past it, registration is 503 `temporarily_unavailable`. Default 10000. */
    MCP_OAUTH_MAX_UNUSED_CLIENTS: z.coerce.number().int().min(1).max(10_000_000).default(10_000),
    /** Lets an organization's OpenID Connect provider (its discovery document, keys and token endpoint) be reached at loopback, private or link-local addresses and over http (development and tests only). Default false. */
    MCP_OAUTH_ALLOW_PRIVATE_IDENTITY_PROVIDERS: env.boolean(false),
  })
  .superRefine((c, ctx) => {
    if (c.JWT_SIGNING_KEYS && c.JWT_SIGNING_KEYS_FILE) {
      ctx.addIssue({
        code: "custom",
        path: ["JWT_SIGNING_KEYS_FILE"],
        message: "set JWT_SIGNING_KEYS or JWT_SIGNING_KEYS_FILE, not both",
      });
    }
    checkSpiceDBEnv(c, ctx);
  })
  .transform((c) => ({
    ...c,
    REDIS_URL: c.REDIS_URL ?? localRedisUrl(),
    DATABASE_URL: c.DATABASE_URL ?? localDatabaseUrl(),
    GATEWAY_PUBLIC_URL: c.GATEWAY_PUBLIC_URL ?? `http://localhost:${c.PORT}`,
    spicedb: spicedbClientOptions(c),
    metricsEndpoint: metricsEndpointOf(c),
  }));

export type GatewayConfig = z.output<typeof gatewayConfigSchema>;
