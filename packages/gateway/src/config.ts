import { env, localRedisUrl } from "@gw/core";
import { z } from "zod";

/** The gateway's environment. Each variable is documented in the README's configuration table. */
export const gatewayConfigSchema = z
  .object({
    /** TCP port the gateway listens on. Default 8080. */
    PORT: env.port(8080),
    /** Interface to bind. Default 0.0.0.0. */
    HOST: z.string().default("0.0.0.0"),
    /** pino log level. Default info. */
    LOG_LEVEL: env.logLevel(),
    /** Redis for keys and counters. Unset: the local redis-server that `pnpm start` runs. */
    REDIS_URL: env.redisUrl(),
    /** Deadline of one Redis command, in milliseconds. Default 2000. */
    REDIS_COMMAND_TIMEOUT_MS: env.positiveInt(2_000),
    /** How long a looked-up API key is cached in process, in milliseconds; 0 disables. Default 1000. */
    API_KEY_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(1_000),
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
  })
  .transform((c) => ({ ...c, REDIS_URL: c.REDIS_URL ?? localRedisUrl() }));

export type GatewayConfig = z.output<typeof gatewayConfigSchema>;
