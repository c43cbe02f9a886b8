import { env } from "@gw/core/config";
import { DEFAULT_LOCAL_POSTGRES_PORT } from "@gw/core/postgres";
import { DEFAULT_LOCAL_REDIS_PORT } from "@gw/core/redis";
import { z } from "zod";
import { COMPILE_CACHE_SETTING } from "./node-process.ts";

/** Where `pnpm start` runs its local vector database unless LOCAL_VECTOR_DATABASE_PORT says otherwise (after the local PostgreSQL's 5433). */
export const DEFAULT_LOCAL_VECTOR_DATABASE_PORT = 5434;

/** Where `pnpm start` runs its development model provider unless DEVELOPMENT_PROVIDER_PORT says otherwise. */
export const DEFAULT_DEVELOPMENT_PROVIDER_PORT = 8082;

/**
 * What `pnpm start` reads besides the variables it passes on to the
 * processes it runs (whose schemas document them).
 */
export const devstackConfigSchema = z.object({
  /** Port of the service that `pnpm start` runs (the service's `PORT`; with SERVICE_IN_GATEWAY, its probes' and `/metrics`' port). */
  SERVICE_PORT: env.port(8081),
  /** When true, `pnpm start` runs the gateway with the service in its process (`packages/gateway-with-service`: no HTTP hop between them) instead of two processes. Default false. */
  SERVICE_IN_GATEWAY: env.boolean(false),
  /** Port of the local redis-server that `pnpm start` runs when REDIS_URL is unset, and where `pnpm keys` looks for it. */
  LOCAL_REDIS_PORT: env.port(DEFAULT_LOCAL_REDIS_PORT),
  /** Port (on 127.0.0.1) of the local PostgreSQL that `pnpm start` runs when DATABASE_URL is unset (cluster in `$DATA_DIR/postgres`), and where `pnpm keys`, `pnpm authz` and `pnpm migrate` look for it. */
  LOCAL_POSTGRES_PORT: env.port(DEFAULT_LOCAL_POSTGRES_PORT),
  /** Port (on 127.0.0.1) of the development model provider that `pnpm start` runs when neither MODELS_FILE nor LLM_BASE_URL is set: model `echo` (and `auto`) answers with what it is sent (with NODE_ENV=production, `pnpm start` refuses to start instead). Default 8082. */
  DEVELOPMENT_PROVIDER_PORT: env.port(DEFAULT_DEVELOPMENT_PROVIDER_PORT),
  /** Local development data: Redis's (`redis/`), PostgreSQL's (`postgres/`), SpiceDB's relationships (`spicedb/`), the local vector database's (`vectors/`), development keys and sandbox workspaces. */
  DATA_DIR: z.string().default(".data"),
  /** When set, `pnpm start` also runs Debian's prometheus on this port with deploy/prometheus's jobs and alert rules, scraping the stack every second (data in `$DATA_DIR/prometheus`). */
  PROMETHEUS_PORT: z.coerce.number().int().min(1).max(65535).optional(),
  /** Node's compile cache for every Node process of the stack, `pnpm start`'s own included (and `pnpm keys`, `pnpm authz`, `pnpm migrate`): the modules they load, type-stripped and compiled, kept for the next start (a third of a process's start). Node's own setting; `NODE_DISABLE_COMPILE_CACHE=1` turns it off. Default node_modules/.cache/node-compile. */
  NODE_COMPILE_CACHE: z.string().min(1).default(COMPILE_CACHE_SETTING),
  /** pino level of `pnpm start`'s own lines. */
  LOG_LEVEL: env.logLevel(),
});
