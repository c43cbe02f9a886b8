import { Cluster } from "ioredis";
import { z } from "zod";
import { type Clock, systemClock } from "../clock.ts";
import { env } from "../config.ts";
import type { Logger } from "../logger.ts";
import type { GrpcClientMetrics } from "../metrics.ts";
import type { Queryable } from "../postgres.ts";
import type { RedisClient } from "../redis.ts";
import { type ConsistencyTokens, RedisConsistencyTokens, TOKEN_TTL_MARGIN_MS } from "./consistency-tokens.ts";
import { DecisionCache, type DecisionCacheMetrics } from "./decision-cache.ts";
import { type GrantExpiries, PostgresGrantExpiries } from "./grant-expiries.ts";
import {
  type AuthorizationHooks,
  type OwnershipLifetimes,
  ResourceAuthorization,
} from "./resource-authorization.ts";
import {
  DEFAULT_LOCAL_PRESHARED_KEY,
  DEFAULT_LOCAL_SPICEDB_PORT,
  SpiceDBClient,
  type SpiceDBClientOptions,
} from "./spicedb-client.ts";
import { TokenLeaseHolder, type TokenLeaseHooks } from "./token-leases.ts";

/** The SpiceDB variables gateway and service share; spread into each process's schema. */
export const spicedbEnvShape = {
  /** SpiceDB gRPC endpoint, host:port. Unset: the local SpiceDB server of `pnpm start`. */
  SPICEDB_ENDPOINT: z
    .string()
    .regex(/^[^\s/]+:\d+$/, "must be host:port")
    .optional(),
  /** Port of the local SpiceDB server, used when SPICEDB_ENDPOINT is unset. Default 50051. */
  SPICEDB_LOCAL_PORT: env.port(DEFAULT_LOCAL_SPICEDB_PORT),
  /** SpiceDB preshared key. Required with SPICEDB_ENDPOINT; the local server's development key otherwise. */
  SPICEDB_PRESHARED_KEY: z.string().min(1).optional(),
  /** Plaintext gRPC to SpiceDB. Default false with SPICEDB_ENDPOINT (TLS), true for the local server. */
  SPICEDB_INSECURE: env.optionalBoolean(),
  /** Deadline of each SpiceDB call, in milliseconds. Default 2000. */
  SPICEDB_DEADLINE_MS: env.positiveInt(2_000),
  /** How long after a write checks on that resource are fully consistent, and after a process (re)connects to Redis all its checks and lookups, in milliseconds. Default 6000. */
  SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS: z.coerce.number().int().min(0).max(600_000).default(6_000),
  /** Most check decisions a process keeps (valid while the resource's ZedToken is unchanged); 0 turns the cache off. Default 100000. The cache takes memory as it fills, not for its bound at start. */
  DECISION_CACHE_SIZE: z.coerce.number().int().min(0).max(10_000_000).default(100_000),
  /** Longest a kept check decision is served, in ms: SpiceDB's quantization window. Default 5000; 0 turns the cache off. */
  DECISION_CACHE_MAX_AGE_MS: z.coerce.number().int().min(0).max(60_000).default(5_000),
  /** How long a resource's last-write ZedToken stays in Redis after the write, a duration (`1h`, `10m`); at least the recent window plus the decision cache's age plus a minute, at most a day. Default 1h. */
  SPICEDB_ZEDTOKEN_TTL: env.duration("1h"),
};

type SpiceDBEnv = {
  SPICEDB_ENDPOINT?: string | undefined;
  SPICEDB_LOCAL_PORT: number;
  SPICEDB_PRESHARED_KEY?: string | undefined;
  SPICEDB_INSECURE?: boolean | undefined;
  SPICEDB_DEADLINE_MS: number;
  SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS: number;
  DECISION_CACHE_SIZE: number;
  DECISION_CACHE_MAX_AGE_MS: number;
  SPICEDB_ZEDTOKEN_TTL: number;
};

/** For a schema's `superRefine`: a remote SpiceDB needs its key. */
export function checkSpiceDBEnv(c: SpiceDBEnv, ctx: z.RefinementCtx): void {
  if (c.SPICEDB_ENDPOINT && !c.SPICEDB_PRESHARED_KEY) {
    ctx.addIssue({
      code: "custom",
      path: ["SPICEDB_PRESHARED_KEY"],
      message: "required when SPICEDB_ENDPOINT is set",
    });
  }
  // A decision or cached answer kept under "no token" must never outlive a token written after it was asked.
  const least = c.SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS + c.DECISION_CACHE_MAX_AGE_MS + TOKEN_TTL_MARGIN_MS;
  if (c.SPICEDB_ZEDTOKEN_TTL < least || c.SPICEDB_ZEDTOKEN_TTL > 86_400_000) {
    ctx.addIssue({
      code: "custom",
      path: ["SPICEDB_ZEDTOKEN_TTL"],
      message: `${c.SPICEDB_ZEDTOKEN_TTL / 1000}s is not between ${least / 1000}s (SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS + DECISION_CACHE_MAX_AGE_MS + a minute) and a day`,
    });
  }
}

/** Client options from the variables: the local server (plaintext, development key) unless an endpoint is set. */
export function spicedbClientOptions(c: SpiceDBEnv): SpiceDBClientOptions {
  return {
    endpoint: c.SPICEDB_ENDPOINT ?? `127.0.0.1:${c.SPICEDB_LOCAL_PORT}`,
    presharedKey: c.SPICEDB_PRESHARED_KEY ?? DEFAULT_LOCAL_PRESHARED_KEY,
    insecure: c.SPICEDB_INSECURE ?? !c.SPICEDB_ENDPOINT,
    deadlineMs: c.SPICEDB_DEADLINE_MS,
  };
}

/** A process's one SpiceDB client and the authorization model on it, as the variables above configure them. */
export function connectAuthorization(
  config: SpiceDBEnv & { spicedb: SpiceDBClientOptions },
  redis: RedisClient,
  logger: Logger,
  options: {
    metrics?: GrpcClientMetrics | undefined;
    cacheMetrics?: DecisionCacheMetrics | undefined;
    /** The service's: owners of content that expires expire with it. */
    ownership?: OwnershipLifetimes | undefined;
    /** Test seams (none in production). */
    hooks?: AuthorizationHooks | undefined;
    /** The process's clock (the decision cache, owners' expiries); the system clock by default. */
    clock?: Clock | undefined;
    /**
     * The platform's database, where the ends of expiring grants are kept
     * (`GrantExpiries`). Every process that writes grants or keeps decisions
     * passes it; without it no decision to allow is kept.
     */
    db?: Queryable | undefined;
    /**
     * A lease on MCP servers' tokens (docs/adr/0027-leased-zedtokens.md):
     * this process then answers them from memory while it holds it. Started
     * and given back by the caller (`leases.start()`, `leases.close()`).
     */
    leases?: { subscriber: RedisClient; leaseMs: number; hooks?: TokenLeaseHooks | undefined } | undefined;
  } = {},
): {
  spicedb: SpiceDBClient;
  authorization: ResourceAuthorization;
  tokens: ConsistencyTokens;
  expiries: GrantExpiries | undefined;
  leases: TokenLeaseHolder | undefined;
} {
  const { metrics, cacheMetrics, ownership, hooks, clock = systemClock, db } = options;
  const spicedb = new SpiceDBClient({ ...config.spicedb, metrics });
  const tokens = new RedisConsistencyTokens(
    redis,
    config.SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS,
    clock,
    config.SPICEDB_ZEDTOKEN_TTL,
  );
  let leases: TokenLeaseHolder | undefined;
  if (options.leases && options.leases.leaseMs > 0 && !leasesUnsure(redis, logger)) {
    leases = new TokenLeaseHolder({
      redis,
      subscriber: options.leases.subscriber,
      leaseMs: options.leases.leaseMs,
      ...tokens.leaseSettings,
      logger,
      hooks: options.leases.hooks,
    });
    tokens.holdLeases(leases);
  }
  const decisions = decisionCacheOf(config, cacheMetrics, clock);
  const expiries = db ? new PostgresGrantExpiries(db) : undefined;
  const authorization = new ResourceAuthorization(spicedb, tokens, {
    logger,
    decisions,
    expiries,
    ownership,
    hooks,
    clock,
  });
  return { spicedb, authorization, tokens, expiries, leases };
}

/**
 * On Redis Cluster a message published on one node reaches the others over
 * the cluster bus, which keeps no order between nodes and may drop it (a
 * move of the client's subscriber to another node is noticed, `followChannel`;
 * that order is not): no lease is held there, and every check reads its
 * token from Redis (docs/adr/0027-leased-zedtokens.md).
 */
function leasesUnsure(redis: RedisClient, logger: Logger): boolean {
  if (!(redis instanceof Cluster)) return false;
  logger.info(
    "leased ZedTokens are not held on Redis Cluster: every MCP check reads its server's token from Redis",
  );
  return true;
}

/** The decision cache the variables configure; none when turned off. */
export function decisionCacheOf(
  c: SpiceDBEnv,
  metrics?: DecisionCacheMetrics,
  clock?: Clock,
): DecisionCache | undefined {
  if (c.DECISION_CACHE_SIZE === 0 || c.DECISION_CACHE_MAX_AGE_MS === 0) return undefined;
  return new DecisionCache({
    maxEntries: c.DECISION_CACHE_SIZE,
    maxAgeMs: c.DECISION_CACHE_MAX_AGE_MS,
    ...(metrics ? { metrics } : {}),
    ...(clock ? { clock } : {}),
  });
}
