/**
 * Runs the local vector database: `node packages/devstack/src/vector-database-main.ts`.
 * `pnpm start` runs it when `VECTOR_DATABASE_URL` is unset, keeping its data
 * in `$DATA_DIR/vectors`; the tests run it in memory on a port of their own.
 * See `vector-database.ts`.
 */
import { resolve } from "node:path";
import { loadConfigOrExit } from "@gw/core/config";
import { createLogger } from "@gw/core/logger";
import { onShutdown, reportListening } from "@gw/core/process";
import { startVectorDatabase } from "./vector-database.ts";
import { localVectorDatabaseConfigSchema } from "./vector-database-config.ts";

const config = loadConfigOrExit(localVectorDatabaseConfigSchema);
const logger = createLogger("vector-database", config.LOG_LEVEL);
const dataDir = config.LOCAL_VECTOR_DATABASE_IN_MEMORY ? undefined : resolve(config.DATA_DIR, "vectors");
const database = await startVectorDatabase({
  port: config.LOCAL_VECTOR_DATABASE_PORT,
  ...(dataDir ? { dataDir } : {}),
  ...(config.LOCAL_VECTOR_DATABASE_TEMPLATE ? { templateFile: config.LOCAL_VECTOR_DATABASE_TEMPLATE } : {}),
  onError: (err) => logger.warn({ err: err.message }, "vector database connection failed"),
  onFatal: (err) => {
    logger.fatal({ err: err.message }, "the local vector database failed and stops");
    process.exit(1);
  },
}).catch((err: Error) => {
  logger.fatal({ err: err.message, dataDir }, "the local vector database could not start");
  process.exit(1);
});
logger.info(
  { port: database.port, dataDir: dataDir ?? "in memory" },
  "local vector database (PGlite with pgvector) listening",
);
reportListening(database.port);
onShutdown(() => database.stop());
