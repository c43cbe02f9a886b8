import { resolve } from "node:path";
import { DEFAULT_LOCAL_PRESHARED_KEY, DEFAULT_LOCAL_SPICEDB_PORT } from "@gw/core/authz";
import { env } from "@gw/core/config";
import { z } from "zod";

/** The local SpiceDB server's environment. Each variable's comment is its entry in docs/configuration.md (`pnpm docs:config`). */
export const spicedbLocalConfigSchema = z.object({
  /** Interface to bind. Default 127.0.0.1. */
  SPICEDB_LOCAL_HOST: z.string().default("127.0.0.1"),
  /** gRPC port. Default 50051, SpiceDB's own. */
  SPICEDB_LOCAL_PORT: env.port(DEFAULT_LOCAL_SPICEDB_PORT),
  /** Preshared key clients must present. Default: the documented development key. */
  SPICEDB_PRESHARED_KEY: z.string().min(1).default(DEFAULT_LOCAL_PRESHARED_KEY),
  /** Schema written at start. Default spicedb/schema.zed of this repository. */
  SPICEDB_SCHEMA_FILE: z.string().default(resolve(import.meta.dirname, "../../../spicedb/schema.zed")),
  /** Local data; relationships are kept in its `spicedb` folder. Default .data. */
  DATA_DIR: z.string().default(".data"),
  /** Port of SpiceDB's own Prometheus metrics (`/metrics`). Unset: none. */
  SPICEDB_LOCAL_METRICS_PORT: z.coerce.number().int().min(1).max(65535).optional(),
  /** After this many writes the engine is replaced by a fresh one restored from the data directory, so its memory follows the relationships it holds, not every write since it started; writes wait only while it catches up with those made during its fill (off with SPICEDB_LOCAL_METRICS_PORT). Default 0: never. */
  SPICEDB_LOCAL_RECYCLE_WRITES: z.coerce.number().int().min(0).default(0),
  LOG_LEVEL: env.logLevel(),
});
