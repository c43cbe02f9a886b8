/**
 * Runs the local SpiceDB server: `node packages/spicedb-local/src/main.ts`.
 * `pnpm start` runs it when `SPICEDB_ENDPOINT` is unset.
 */
import { resolve } from "node:path";
import {
  createLogger,
  DEFAULT_LOCAL_PRESHARED_KEY,
  DEFAULT_LOCAL_SPICEDB_PORT,
  env,
  loadConfigOrExit,
  onShutdown,
} from "@gw/core";
import { z } from "zod";
import { startSpiceDBLocal } from "./server.ts";

const config = loadConfigOrExit(
  z.object({
    /** Interface to bind. Default 127.0.0.1. */
    SPICEDB_LOCAL_HOST: z.string().default("127.0.0.1"),
    /** gRPC port. Default 50051, SpiceDB's own. */
    SPICEDB_LOCAL_PORT: env.port(DEFAULT_LOCAL_SPICEDB_PORT),
    /** Preshared key clients must present. Default: the documented development key. */
    SPICEDB_PRESHARED_KEY: z.string().min(1).default(DEFAULT_LOCAL_PRESHARED_KEY),
    /** Schema written at start. Default spicedb/schema.zed of this repository. */
    SPICEDB_SCHEMA_FILE: z.string().default(resolve(import.meta.dirname, "../../../spicedb/schema.zed")),
    LOG_LEVEL: env.logLevel(),
  }),
);
const logger = createLogger("spicedb-local", config.LOG_LEVEL);
const server = await startSpiceDBLocal({
  host: config.SPICEDB_LOCAL_HOST,
  port: config.SPICEDB_LOCAL_PORT,
  presharedKey: config.SPICEDB_PRESHARED_KEY,
  schemaFile: config.SPICEDB_SCHEMA_FILE,
  log: (message, fields) => logger.info(fields ?? {}, message),
});
onShutdown(() => server.close());
