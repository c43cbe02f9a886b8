import {
  closeGracefully,
  connectAuthorization,
  createLogger,
  createMetrics,
  createPostgres,
  createRedis,
  internalAssertions,
  type Logger,
  listen,
  listenForMetrics,
  type Metrics,
  migrate,
  type RouteTemplate,
  redactUrl,
  routesOf,
  WriterDeletion,
} from "@gw/core";
import { createServiceApp } from "./app.ts";
import type { ServiceConfig } from "./config.ts";
import { ConversationStore } from "./conversations/store.ts";
import { evalLimits, evalRetention, startEvals } from "./evals/index.ts";
import type { ChatProvider } from "./llm/provider.ts";
import { createProviderMetrics, MeteredProvider } from "./llm/provider-metrics.ts";
import { ResponseStore } from "./responses/store.ts";
import { Sandbox } from "./sandbox/sandbox.ts";
import { UsageStore } from "./usage/store.ts";

export interface RunningService {
  url: string;
  port: number;
  /** Where Prometheus scrapes this service. */
  metricsUrl: string;
  /** The endpoints it serves (the gateway labels forwarded requests with them: `SERVICE_ROUTES`). */
  routes: RouteTemplate[];
  logger: Logger;
  close(): Promise<void>;
}

/** The model provider the configuration names (responses and eval runs share it), its calls in `metrics`. */
export function chatProvider(config: ServiceConfig, metrics: Metrics): ChatProvider {
  return new MeteredProvider(
    {
      baseUrl: config.LLM_BASE_URL,
      apiKey: config.LLM_API_KEY,
      defaultModel: config.LLM_DEFAULT_MODEL,
      allowedModels: config.LLM_MODELS,
      timeoutMs: config.LLM_TIMEOUT_MS,
      maxResponseBytes: config.LLM_MAX_RESPONSE_BYTES,
      maxEventChars: config.LLM_MAX_EVENT_CHARS,
    },
    createProviderMetrics(metrics),
  );
}

/** Wires the service's dependencies and starts listening. */
export async function startService(
  config: ServiceConfig,
  logger = createLogger("service", config.LOG_LEVEL),
): Promise<RunningService> {
  const metrics = createMetrics("service");
  const redis = createRedis(config.REDIS_URL, { connectionName: "service", metrics: metrics.redisCommands });
  redis.on("error", (err) => logger.warn({ err: err.message }, "redis error"));
  // Before anything serves: the schema this code expects (one process at a time; the others wait, then find it done).
  const applied = await migrate(config.DATABASE_URL);
  if (applied.length > 0) logger.info({ applied }, "database migrations applied");
  const db = createPostgres(config.DATABASE_URL, {
    connectionName: "service",
    onIdleError: (err) => logger.warn({ err: err.message }, "postgres connection error"),
  });
  const { spicedb, authorization, tokens } = connectAuthorization(config, redis, logger, metrics.grpcClient);
  const assertions = await internalAssertions(config.INTERNAL_ASSERTION_SECRET, config.DATA_DIR, logger);
  const provider = chatProvider(config, metrics);
  if (!config.LLM_BASE_URL)
    logger.warn("no model provider configured: responses answer 503 until LLM_BASE_URL is set");

  const usage = new UsageStore(redis);
  const evals = startEvals(
    {
      redisUrl: config.REDIS_URL,
      redis,
      db,
      retention: evalRetention(config),
      provider,
      usage,
      logger,
      metrics,
    },
    config.EVAL_WORKER_CONCURRENCY,
    evalLimits(config),
  );
  const sandbox = await Sandbox.create(config.sandbox, { redis, db }, logger);

  const app = createServiceApp({
    logger,
    metrics,
    redis,
    db,
    spicedb,
    assertions,
    authorization,
    deletion: new WriterDeletion(spicedb, tokens, logger),
    provider,
    conversations: new ConversationStore(redis),
    responses: new ResponseStore(redis),
    usage,
    context: { maxItems: config.LLM_CONTEXT_MAX_ITEMS, maxTokens: config.LLM_CONTEXT_MAX_TOKENS },
    evals,
    sandbox,
    metricsEndpoint: config.metricsEndpoint,
  });
  const { server, port } = await listen(app, config.PORT, config.HOST);
  const metricsListener = await listenForMetrics(config.metricsEndpoint, metrics, config.HOST, logger);
  logger.info(
    {
      port,
      llm: config.LLM_BASE_URL ? redactUrl(config.LLM_BASE_URL) : null,
      spicedb: config.spicedb.endpoint,
      database: redactUrl(config.DATABASE_URL),
    },
    "service listening",
  );
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    metricsUrl: `http://127.0.0.1:${metricsListener?.port ?? port}/metrics`,
    routes: routesOf(app),
    logger,
    async close() {
      await Promise.all([closeGracefully(server, 5_000), metricsListener?.close()]);
      await evals.close();
      spicedb.close();
      redis.disconnect();
      await sandbox.close();
      await db.close();
    },
  };
}
