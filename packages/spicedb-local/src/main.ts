/**
 * Runs the local SpiceDB server: `node packages/spicedb-local/src/main.ts`.
 * `pnpm start` runs it when `SPICEDB_ENDPOINT` is unset. Its relationships
 * are kept in `$DATA_DIR/spicedb`.
 */
import { resolve } from "node:path";
import { loadConfigOrExit } from "@gw/core/config";
import { createLogger } from "@gw/core/logger";
import { onShutdown, reportListening } from "@gw/core/process";
import { spicedbLocalConfigSchema } from "./config.ts";
import { startSpiceDBLocal } from "./server.ts";

const config = loadConfigOrExit(spicedbLocalConfigSchema);
const logger = createLogger("spicedb-local", config.LOG_LEVEL);
const server = await startSpiceDBLocal({
  host: config.SPICEDB_LOCAL_HOST,
  port: config.SPICEDB_LOCAL_PORT,
  presharedKey: config.SPICEDB_PRESHARED_KEY,
  schemaFile: config.SPICEDB_SCHEMA_FILE,
  dataDir: resolve(config.DATA_DIR, "spicedb"),
  metricsPort: config.SPICEDB_LOCAL_METRICS_PORT,
  recycleAfterWrites: config.SPICEDB_LOCAL_RECYCLE_WRITES,
  recycleFraction: config.SPICEDB_LOCAL_RECYCLE_FRACTION,
  logger,
}).catch((err: Error) => {
  logger.fatal({ err: err.message }, "SpiceDB (local) could not start");
  process.exit(1);
});
reportListening(server.port);
onShutdown(() => server.close());
