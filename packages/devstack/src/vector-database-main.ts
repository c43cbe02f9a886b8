/**
 * Runs the local vector database: `node packages/devstack/src/vector-database-main.ts`.
 * `pnpm start` runs it when `VECTOR_DATABASE_URL` is unset, keeping its data
 * in `$DATA_DIR/vectors`; the tests run it in memory on a port of their own.
 * See `vector-database.ts`.
 */
import { resolve } from "node:path";
import { setFlagsFromString } from "node:v8";
import { loadConfigOrExit } from "@gw/core/config";
import { createLogger } from "@gw/core/logger";
import { onShutdown, reportListening } from "@gw/core/process";
import { startVectorDatabase } from "./vector-database.ts";
import { localVectorDatabaseConfigSchema } from "./vector-database-config.ts";

/**
 * V8 optimises a WebAssembly function once it has run about this many bytes of code (V8's default:
 * 13,000,000). At the default, starting PGlite and running the migrations had TurboFan compile
 * hundreds of PostgreSQL's functions that run a few times at start: 3.0 s of CPU for a start, the
 * vector migrations and 200 queries, against 2.0 s at this budget. The hot loops of a search (HNSW,
 * distances) still pass it within the first searches: `vector-index.test.ts` used as much CPU either
 * way. Set before PGlite compiles its module, which the flag then applies to.
 */
const WASM_TIERING_BUDGET = 180_000_000;
setFlagsFromString(`--wasm-tiering-budget=${WASM_TIERING_BUDGET}`);

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
