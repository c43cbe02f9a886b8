import { env } from "@gw/core/config";
import { z } from "zod";
import { DEFAULT_LOCAL_VECTOR_DATABASE_PORT } from "./config.ts";

/** The local vector database's own settings (`vector-database-main.ts`), which `pnpm start` and the tests run. */
export const localVectorDatabaseConfigSchema = z.object({
  /** Port on 127.0.0.1 of the local vector database (PGlite with pgvector, PostgreSQL's wire protocol) that `pnpm start` runs when VECTOR_DATABASE_URL is unset; 0: any free port. Default 5434. */
  LOCAL_VECTOR_DATABASE_PORT: env.port(DEFAULT_LOCAL_VECTOR_DATABASE_PORT),
  /** Local data: the vectors are kept in its `vectors` folder (PGlite's data directory). Default .data. */
  DATA_DIR: z.string().default(".data"),
  /** `true`: keep the vectors in memory only, gone when the process stops (the tests). Default false. */
  LOCAL_VECTOR_DATABASE_IN_MEMORY: env.boolean(false),
  /** A file holding a new cluster that a new database starts from, in memory or in a data directory with no cluster yet (loading it takes a second, making one several), written there first if missing. A new data directory is a copy of `<file>.data`, the cluster as a data directory, made from the file once. `pnpm start` sets it to a file under node_modules/.cache. Unset: initdb for each new database. */
  LOCAL_VECTOR_DATABASE_TEMPLATE: z.string().min(1).optional(),
  /** pino log level. Default info. */
  LOG_LEVEL: env.logLevel(),
});
