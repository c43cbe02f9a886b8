import { accessSync, constants } from "node:fs";
import { resolve } from "node:path";
import { DEFAULT_LOCAL_PRESHARED_KEY, DEFAULT_LOCAL_SPICEDB_PORT } from "@gw/core/authz/local";
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
  SPICEDB_SCHEMA_FILE: z
    .string()
    .default(resolve(import.meta.dirname, "../../../spicedb/schema.zed"))
    .superRefine((file, ctx) => {
      // Read at start: a file that is not there is a bad setting (exit 78, named), not a failed start.
      try {
        accessSync(file, constants.R_OK);
      } catch (err) {
        ctx.addIssue({
          code: "custom",
          message: `${JSON.stringify(file)} cannot be read (${(err as NodeJS.ErrnoException).code ?? err})`,
        });
      }
    }),
  /** Local data; relationships are kept in its `spicedb` folder. Default .data. */
  DATA_DIR: z.string().default(".data"),
  /** Port of SpiceDB's own Prometheus metrics (`/metrics`). Unset: none. */
  SPICEDB_LOCAL_METRICS_PORT: z.coerce.number().int().min(1).max(65535).optional(),
  /** After this many writes (at least; see SPICEDB_LOCAL_RECYCLE_FRACTION) the engine, whose in-memory datastore keeps every write it ever committed, is replaced by a fresh one restored from the data directory, so its memory follows the relationships it holds; writes wait only while the last few changes are applied (off with SPICEDB_LOCAL_METRICS_PORT). 0: never. Default 5000. */
  SPICEDB_LOCAL_RECYCLE_WRITES: z.coerce.number().int().min(0).default(5000),
  /** The engine is replaced only after writes reach this fraction of the relationships it was filled with too, so a fill's cost is spread over as many writes and the history it keeps stays proportional to what it holds. Default 0.1. */
  SPICEDB_LOCAL_RECYCLE_FRACTION: z.coerce.number().min(0).max(100).default(0.1),
  LOG_LEVEL: env.logLevel(),
});
