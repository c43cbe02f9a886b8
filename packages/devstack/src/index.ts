export { devstackConfigSchema } from "./config.ts";
export { freePort } from "./free-port.ts";
export {
  base64OfVector,
  DEFAULT_EMBEDDING_DIMENSIONS,
  hashedEmbedding,
  wordsOf,
} from "./hashed-embeddings.ts";
export { madeOnce } from "./made-once.ts";
export { compileCacheEnv, REPO_ROOT, type RunningNodeProcess, startNodeProcess } from "./node-process.ts";
export {
  ensureDatabase,
  localServerUrl,
  postgresBinDir,
  type RunningPostgres,
  startPostgresServer,
} from "./postgres-server.ts";
export { commandLine, processRunning, processState, startedAt } from "./process-table.ts";
export {
  PROMETHEUS_CONFIG,
  prometheusInstalled,
  type RunningPrometheus,
  startPrometheus,
} from "./prometheus.ts";
export { type RunningRedis, startRedisServer, stopProcess } from "./redis-server.ts";
export { startSpiceDBLocalProcess } from "./spicedb-process.ts";
export { type RunningVectorDatabase, startVectorDatabase, vectorDatabaseUrl } from "./vector-database.ts";
export { localVectorDatabaseConfigSchema } from "./vector-database-config.ts";
export {
  type RunningVectorDatabaseProcess,
  startVectorDatabaseProcess,
  vectorDatabaseTemplateFile,
} from "./vector-database-process.ts";
