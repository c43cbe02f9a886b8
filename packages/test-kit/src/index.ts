/**
 * The harness every package's tests share, one file per concern: Redis
 * (`redis.ts`, `redis-cluster.ts`, `redis-topology.ts`), PostgreSQL
 * (`postgres.ts`, `postgres-global-setup.ts`), the vector database, SpiceDB,
 * processes, ports, logs and assertions. This file only re-exports them.
 */
export {
  freePort,
  processRunning,
  REPO_ROOT,
  type RunningNodeProcess,
  startNodeProcess,
  startSpiceDBLocalProcess,
} from "@gw/devstack";
export { expectJsonError } from "./assertions.ts";
export { capturingLogger } from "./logs.ts";
export { acceptsConnections, startNothingListener } from "./ports.ts";
export { createTestDatabase, type TestDatabase, useTestDatabase } from "./postgres.ts";
export { startTestPostgres, type TestPostgres } from "./postgres-global-setup.ts";
export {
  type Exited,
  RUN_TO_EXIT_TEST_TIMEOUT_MS,
  runToExit,
  startGatewayProcess,
  survivors,
} from "./processes.ts";
export { type RawResponse, rawHttp } from "./raw-http.ts";
export {
  monitorCommands,
  type RedisTopology,
  scanKeys,
  socketWritesDuring,
  startTestRedis,
  type TestRedis,
  type TestRedisStore,
  testRedisClient,
} from "./redis.ts";
export { startTestRedisCluster } from "./redis-cluster.ts";
export {
  describeEachTopology,
  REDIS_TOPOLOGIES,
  redisStartedEarly,
  startTestRedisOf,
  useTestRedis,
} from "./redis-topology.ts";
export {
  readRelationshipLines,
  spicedbEnv,
  startTestSpiceDB,
  type TestSpiceDB,
  UNHURRIED_SPICEDB_DEADLINE_MS,
} from "./test-spicedb.ts";
export {
  startTestVectorDatabase,
  type TestVectorDatabase,
  useTestVectorDatabase,
  workerTestVectorDatabase,
} from "./vector-database.ts";
