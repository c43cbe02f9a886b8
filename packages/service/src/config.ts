import { env, localRedisUrl } from "@gw/core";
import { z } from "zod";

/** The service's environment. Each variable is documented in the README's configuration table. */
export const serviceConfigSchema = z
  .object({
    /** TCP port the service listens on. Default 8081. */
    PORT: env.port(8081),
    /** Interface to bind. Default 127.0.0.1: only the gateway should reach it. */
    HOST: z.string().default("127.0.0.1"),
    /** pino log level. Default info. */
    LOG_LEVEL: env.logLevel(),
    /** Redis for service records. Unset: the local redis-server that `pnpm start` runs. */
    REDIS_URL: env.redisUrl(),
  })
  .transform((c) => ({ ...c, REDIS_URL: c.REDIS_URL ?? localRedisUrl() }));

export type ServiceConfig = z.output<typeof serviceConfigSchema>;
