import { AuditLog } from "@gw/core/audit";
import { connectAuthorization } from "@gw/core/authz";
import { systemClock } from "@gw/core/clock";
import { closeGracefully, listen, listenForMetrics, registerProbes, useRequestBasics } from "@gw/core/http";
import { type Logger, redactUrl } from "@gw/core/logger";
import { Vault, vaultKeysOf } from "@gw/core/mcp";
import { createMetrics } from "@gw/core/metrics";
import { createPostgres, migrateWhenReachable, postgresReady } from "@gw/core/postgres";
import { createRedis, redisReady } from "@gw/core/redis";
import { LEASE_KEEPING_MS } from "@gw/core/windows";
import express from "express";
import { budgetDeps, chatProvider, modelGuardrailsOf } from "./calls/deps.ts";
import type { ServiceConfig } from "./config.ts";
import { ConversationStore } from "./conversations/store.ts";
import { startEvalsFromConfig } from "./evals/index.ts";
import { Files } from "./files/files.ts";
import { GuardrailResolver, guardrailsChanged } from "./guardrails/resolve.ts";
import { GuardrailStore } from "./guardrails/store.ts";
import { ids } from "./ids.ts";
import { configureTokenCounting } from "./llm/tokens.ts";
import { providerKeyStore } from "./provider-keys/deps.ts";
import { startBackgroundResponses } from "./responses/background/index.ts";
import { ResponseStore } from "./responses/store.ts";
import { UsageStore } from "./usage/store.ts";
import { startIngestion, vectorIndexOf, vectorStoresOf } from "./vector-stores/index.ts";
import { pipelineEmbedder } from "./vector-stores/ingestion/embedder.ts";

/**
 * An eval worker on its own: runs from the shared queue, `EVAL_WORKER_CONCURRENCY`
 * at a time, files of vector stores to index, `VECTOR_STORE_INGEST_CONCURRENCY` at a
 * time, and background responses, `BACKGROUND_RESPONSE_CONCURRENCY` at a time, with the service's configuration. It serves only `/healthz`,
 * `/readyz` and `/metrics` on `PORT`.
 */
export async function startEvalWorkerProcess(config: ServiceConfig, logger: Logger) {
  if (config.EVAL_WORKER_CONCURRENCY < 1)
    throw new Error("EVAL_WORKER_CONCURRENCY must be at least 1 for a worker");
  // Before anything starts, as the service: production refuses to run without them.
  const vault = new Vault(await vaultKeysOf(config.VAULT_KEYS, config.DATA_DIR, logger));
  const metrics = createMetrics("service");
  configureTokenCounting(config.tokenCounting);
  const redis = createRedis(config.REDIS_URL, {
    connectionName: "eval-worker",
    metrics: metrics.redisCommands,
  });
  redis.on("error", (err) => logger.warn({ err: err.message }, "redis error"));
  await migrateWhenReachable(config.DATABASE_URL, logger);
  const db = createPostgres(config.DATABASE_URL, {
    connectionName: "eval-worker",
    onIdleError: (err) => logger.warn({ err: err.message }, "postgres connection error"),
  });
  // The process's one clock.
  const clock = systemClock;
  const budgets = budgetDeps(config, redis, metrics, logger, clock);
  // The runs' budget reservations are leases this process renews (and it settles those of processes that died).
  const stopLeases = budgets.windows.keepLeases(LEASE_KEEPING_MS, {
    swept: (holders) => logger.warn({ holders }, "budget leases of processes that died were settled"),
    error: (err) => logger.warn({ err: (err as Error).message }, "budget leases could not be kept"),
  });
  // A run's calls reach `byok` deployments with the organization's own key, as the service's calls do.
  const providerKeys = providerKeyStore(config, vault, { db, logger, clock });
  const provider = chatProvider(config, { metrics, ids: ids(clock), redis, clock, logger, providerKeys });
  const usage = new UsageStore(redis, clock);
  // A run's calls are checked by the guardrails attached for its creator key, as the service's calls are.
  const audit = new AuditLog(db, { retentionMs: undefined, logger, clock });
  const resolver = new GuardrailResolver(
    new GuardrailStore(db, audit, { clock, changed: (org) => guardrailsChanged(redis, org) }),
    redis,
    { clock },
  );
  const modelGuardrails = modelGuardrailsOf(
    config,
    { metrics, logger, audit, provider, usage },
    {
      source: { policiesFor: (principal, model) => resolver.resolve(principal.org, principal.keyId, model) },
    },
  );
  const evals = startEvalsFromConfig(config, {
    redis,
    db,
    provider,
    usage,
    budgets,
    modelGuardrails,
    logger,
    metrics,
    clock,
  });
  // Files of vector stores are indexed here too (VECTOR_STORE_INGEST_CONCURRENCY at a time).
  const vectorIndex = vectorIndexOf(config, logger);
  const files = new Files(db, { clock, options: config.files, logger });
  const ingestion = startIngestion(config, {
    db,
    redis,
    index: vectorIndex,
    files,
    clock,
    logger,
    embedding: { provider, usage, budgets },
  });
  // Background responses run here too (BACKGROUND_RESPONSE_CONCURRENCY at a time), through the same turn
  // as in the service: their checks need SpiceDB, their context and answers PostgreSQL.
  const { spicedb, authorization } = connectAuthorization(config, redis, logger, {
    metrics: metrics.grpcClient,
    cacheMetrics: metrics.decisionCache,
    clock,
    db,
  });
  const issuer = ids(clock);
  const vectors = vectorStoresOf(config, {
    db,
    clock,
    index: vectorIndex,
    files,
    authorization,
    ids: issuer,
    logger,
  });
  const background = startBackgroundResponses(config, {
    provider,
    authorization,
    usage,
    budgets,
    modelGuardrails,
    logger,
    metrics,
    clock,
    ids: issuer,
    redis,
    conversations: new ConversationStore(db, {
      clock,
      idleExpiryMs: config.retention.conversationIdleExpiryMs,
    }),
    responses: new ResponseStore(db, { clock, retentionMs: config.retention.responseRetentionMs }),
    context: { maxItems: config.LLM_CONTEXT_MAX_ITEMS, maxTokens: config.LLM_CONTEXT_MAX_TOKENS },
    files,
    vectorIndex,
    vectorStores: vectors.vectorStores,
    embedder: pipelineEmbedder({ provider, usage, budgets }),
    embeddingModel: config.VECTOR_STORE_EMBEDDING_MODEL,
  });
  const app = express();
  useRequestBasics(app, logger, metrics);
  registerProbes(
    app,
    { redis: () => redisReady(redis), postgres: () => postgresReady(db) },
    metrics,
    config.metricsEndpoint,
  );
  const { server, port } = await listen(app, config.PORT, config.HOST);
  const metricsListener = await listenForMetrics(config.metricsEndpoint, metrics, config.HOST, logger);
  logger.info(
    {
      port,
      concurrency: config.EVAL_WORKER_CONCURRENCY,
      llm: config.LLM_BASE_URL ? redactUrl(config.LLM_BASE_URL) : null,
    },
    "eval worker started",
  );
  return {
    port,
    async close() {
      await Promise.all([closeGracefully(server, 5_000), metricsListener?.close()]);
      await Promise.all([evals.close(), background.close()]);
      await ingestion.close();
      await vectors.close();
      await vectorIndex.close();
      spicedb.close();
      stopLeases();
      redis.disconnect();
      await providerKeys.close();
      await db.close();
    },
  };
}
