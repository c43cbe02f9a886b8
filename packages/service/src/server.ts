import type { IncomingMessage, ServerResponse } from "node:http";
import { join } from "node:path";
import { AuditLog } from "@gw/core/audit";
import { connectAuthorization, TOKEN_TTL_MARGIN_MS, WriterDeletion } from "@gw/core/authz";
import { type Clock, systemClock } from "@gw/core/clock";
import { closeGracefully, listen, listenForMetrics, type RouteTemplate, routesOf } from "@gw/core/http";
import { assertionSecret, InternalAssertions } from "@gw/core/internal-assertion";
import { createLogger, type Logger, redactUrl } from "@gw/core/logger";
import { type Resolver, Vault, vaultKeysOf } from "@gw/core/mcp";
import { createMetrics } from "@gw/core/metrics";
import { createPostgres, migrateWhenReachable } from "@gw/core/postgres";
import { createRedis } from "@gw/core/redis";
import { LEASE_KEEPING_MS } from "@gw/core/windows";
import { createServiceApp } from "./app.ts";
import { budgetDeps, chatProvider, modelGuardrailsOf } from "./calls/deps.ts";
import type { GuardrailDeps } from "./calls/guardrails.ts";
import { ResponseCache } from "./calls/response-cache.ts";
import { PostgresCompletionStore } from "./completions/store.ts";
import type { ServiceConfig } from "./config.ts";
import { ConversationStore } from "./conversations/store.ts";
import { startEvalsFromConfig } from "./evals/index.ts";
import { type FileHooks, Files } from "./files/files.ts";
import { type Guardrails, guardrailsOf } from "./guardrails/index.ts";
import type { ResolverHooks } from "./guardrails/resolve.ts";
import { ids } from "./ids.ts";
import { configureTokenCounting } from "./llm/tokens.ts";
import { providerKeyStore } from "./provider-keys/deps.ts";
import { startBackgroundResponses } from "./responses/background/index.ts";
import type { BackgroundRunDeps } from "./responses/background/run.ts";
import { type ApprovalHooks, hostedMcpClients } from "./responses/hosted-mcp-proxy.ts";
import { ResponseStore } from "./responses/store.ts";
import { OrphanReconciler } from "./retention/reconciler.ts";
import { RetentionSweeper } from "./retention/sweeper.ts";
import { Sandbox } from "./sandbox/sandbox.ts";
import { UsageStore, usageLost } from "./usage/store.ts";
import {
  startIngestion,
  type VectorStoreTestOptions,
  vectorIndexOf,
  vectorStoresOf,
} from "./vector-stores/index.ts";
import { pipelineEmbedder } from "./vector-stores/ingestion/embedder.ts";
import type { VectorStores } from "./vector-stores/vector-stores.ts";

/** How long the service keeps an idle connection open (the gateway's, mostly), in ms. */
export const SERVICE_KEEP_ALIVE_MS = 65_000;

export interface RunningService {
  url: string;
  port: number;
  /** Where Prometheus scrapes this service. */
  metricsUrl: string;
  /** The endpoints it serves (the gateway labels forwarded requests with them: `SERVICE_ROUTES`). */
  routes: RouteTemplate[];
  logger: Logger;
  /** Deletes expired content; runs by itself every `RETENTION_SWEEP_INTERVAL`. */
  retention: RetentionSweeper;
  /** Removes relationships without content; runs by itself every `ORPHAN_RECONCILE_INTERVAL`. */
  reconciler: OrphanReconciler;
  /** Uploaded files: what is made from a file listens here for its removal (`Files.onRemove`). */
  files: Files;
  /** Vector stores: records, chunks, ingestion queue. */
  vectorStores: VectorStores;
  /** Guardrails: records, attachments, and which apply to a call. */
  guardrails: Guardrails;
  /** The service's application, for a gateway that runs it in its own process (`@gw/gateway-with-service`). */
  handler: (req: IncomingMessage, res: ServerResponse) => void;
  close(): Promise<void>;
}

export interface ServiceOptions {
  /** The process's one clock (tests pass their own); the system clock by default. */
  clock?: Clock;
  /** For tests: holds answers to hosted MCP approval requests between their steps. */
  approvalHooks?: ApprovalHooks;
  /** For tests: how the host names of organizations' provider `base_url`s resolve. */
  resolver?: Resolver;
  /** For tests: holds uploads between their steps. */
  fileHooks?: FileHooks;
  /** For tests: where the guardrails of calls come from, how they are checked and audited (unset: the real ones). */
  modelGuardrails?: Partial<Pick<GuardrailDeps, "source" | "evaluate" | "audit">>;
  /** For tests: the ingestion's embedder, hooks and BullMQ timings. */
  vectorStores?: VectorStoreTestOptions;
  /** For tests: a step between loading an organization's guardrails and keeping them. */
  guardrailHooks?: ResolverHooks;
  /** For tests: a step of background responses' runs (once in progress, before the turn). */
  backgroundHooks?: BackgroundRunDeps["hooks"];
  /**
   * The service runs in the gateway's process (`@gw/gateway-with-service`): its registry leaves the
   * process's own series (`process_*`, `nodejs_*`) to the gateway's.
   */
  inGatewayProcess?: boolean;
}

/** Wires the service's dependencies and starts listening. */
export async function startService(
  config: ServiceConfig,
  logger = createLogger("service", config.LOG_LEVEL),
  options: ServiceOptions = {},
): Promise<RunningService> {
  const clock = options.clock ?? systemClock;
  // Before anything starts: production refuses to run without them. The process's one vault seals
  // organizations' provider keys and sandbox connections.
  const vault = new Vault(await vaultKeysOf(config.VAULT_KEYS, config.DATA_DIR, logger));
  configureTokenCounting(config.tokenCounting);
  const metrics = createMetrics("service", { processMetrics: !options.inGatewayProcess });
  const redis = createRedis(config.REDIS_URL, { connectionName: "service", metrics: metrics.redisCommands });
  redis.on("error", (err) => logger.warn({ err: err.message }, "redis error"));
  // Before anything serves: the schema this code expects (one process at a time; the others wait, then find it done).
  await migrateWhenReachable(config.DATABASE_URL, logger);
  const db = createPostgres(config.DATABASE_URL, {
    connectionName: "service",
    metrics: metrics.postgresQueries,
    onIdleError: (err) => logger.warn({ err: err.message }, "postgres connection error"),
  });
  const { spicedb, authorization, tokens, expiries } = connectAuthorization(config, redis, logger, {
    metrics: metrics.grpcClient,
    cacheMetrics: metrics.decisionCache,
    db,
    // Owners of stored responses and completions expire with them (RESPONSE_RETENTION), in SpiceDB's time.
    ownership: {
      lifetimes: {
        response: config.retention.responseRetentionMs,
        completion: config.retention.responseRetentionMs,
      },
    },
    clock,
  });
  const secret = await assertionSecret(
    config.INTERNAL_ASSERTION_SECRET,
    join(config.DATA_DIR, "internal-assertion-secret"),
    logger,
  );
  const assertions = new InternalAssertions(secret);
  const responseCache = new ResponseCache({
    redis,
    secret,
    ttlMs: config.RESPONSE_CACHE_TTL,
    maxBytes: config.RESPONSE_CACHE_MAX_BYTES,
    maxEntryBytes: config.RESPONSE_CACHE_MAX_ENTRY_BYTES,
    versions: (org, resources) => authorization.versions(org, resources),
    tokenlessTtlMs: config.SPICEDB_ZEDTOKEN_TTL - TOKEN_TTL_MARGIN_MS,
    metrics,
    logger,
  });
  const issuer = ids(clock);
  const providerKeys = providerKeyStore(config, vault, { db, logger, clock, resolver: options.resolver });
  const provider = chatProvider(config, { metrics, ids: issuer, redis, clock, logger, providerKeys });
  if (!config.catalogue.configured)
    logger.warn(
      "no model provider configured: model calls answer 503 until MODELS_FILE or LLM_BASE_URL is set",
    );

  const usage = new UsageStore(redis, clock, usageLost(metrics, logger));
  const budgets = budgetDeps(config, redis, metrics, logger, clock);
  const guardrails = guardrailsOf({
    db,
    redis,
    authorization,
    ids: issuer,
    clock,
    logger,
    ...(options.guardrailHooks ? { hooks: options.guardrailHooks } : {}),
  });
  const modelGuardrails = modelGuardrailsOf(
    config,
    { metrics, logger, audit: new AuditLog(db, { retentionMs: undefined, logger, clock }), provider, usage },
    {
      source: {
        policiesFor: (principal, model, version) =>
          guardrails.resolveGuardrails(principal.org, principal.keyId, model, version),
      },
      ...options.modelGuardrails,
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
  const sandbox = await Sandbox.create(config.sandbox, { redis, db, clock, vault }, logger);
  const hostedMcp = hostedMcpClients({
    gatewayUrl: config.GATEWAY_URL,
    // Longer than the gateway's own deadline for an upstream, whose failure it then names.
    timeoutMs: Math.max(config.LLM_TIMEOUT_MS, 60_000),
    maxAnswerBytes: config.MCP_MAX_ANSWER_BYTES,
    logger,
  });

  const conversations = new ConversationStore(db, {
    clock,
    idleExpiryMs: config.retention.conversationIdleExpiryMs,
  });
  const files = new Files(db, { clock, options: config.files, hooks: options.fileHooks, logger });
  const vectorIndex = vectorIndexOf(config, logger);
  const vectors = vectorStoresOf(config, {
    db,
    clock,
    index: vectorIndex,
    files,
    authorization,
    ids: issuer,
    logger,
  });
  const ingestion = startIngestion(
    config,
    { db, redis, index: vectorIndex, files, clock, logger, embedding: { provider, usage, budgets } },
    options.vectorStores,
  );
  const retention = new RetentionSweeper({
    db,
    spicedb,
    tokens,
    expiries,
    logger,
    clock,
    options: config.retention,
    files,
    vectorStores: vectors.vectorStores,
  });
  retention.start();
  const reconciler = new OrphanReconciler({
    db,
    redis,
    spicedb,
    tokens,
    logger,
    clock,
    options: config.reconcile,
  });
  reconciler.start();

  // Budget reservations are leases: this process renews its own and settles those of processes that died.
  const stopLeases = budgets.windows.keepLeases(LEASE_KEEPING_MS, {
    swept: (holders) => logger.warn({ holders }, "budget leases of processes that died were settled"),
    error: (err) => logger.warn({ err: (err as Error).message }, "budget leases could not be kept"),
  });

  const serviceDeps = {
    logger,
    clock,
    ids: issuer,
    metrics,
    redis,
    db,
    spicedb,
    assertions,
    authorization,
    deletion: new WriterDeletion(spicedb, tokens, logger),
    provider,
    conversations,
    responses: new ResponseStore(db, { clock, retentionMs: config.retention.responseRetentionMs }),
    completions: new PostgresCompletionStore(db, {
      clock,
      retentionMs: config.retention.responseRetentionMs,
    }),
    files,
    vectorStores: vectors.vectorStores,
    vectorIndex,
    // A search embeds its query through the same pipeline as the ingestion, charged to the caller's key.
    embedder: options.vectorStores?.embedder ?? pipelineEmbedder({ provider, usage, budgets }),
    embeddingModel: config.VECTOR_STORE_EMBEDDING_MODEL,
    usage,
    context: { maxItems: config.LLM_CONTEXT_MAX_ITEMS, maxTokens: config.LLM_CONTEXT_MAX_TOKENS },
    budgets,
    modelGuardrails,
    responseCache,
    evals,
    sandbox,
    hostedMcp: {
      gatewayUrl: config.GATEWAY_URL,
      gatewayPublicUrl: config.GATEWAY_PUBLIC_URL,
      assertions,
      clients: hostedMcp,
      hooks: options.approvalHooks,
      maxAnswerBytes: config.MCP_MAX_ANSWER_BYTES,
    },
    metricsEndpoint: config.metricsEndpoint,
    providerKeys,
    guardrails,
  };
  // Background responses run the same turn as a foreground one, with the same deps.
  const background = startBackgroundResponses(config, {
    ...serviceDeps,
    hooks: options.backgroundHooks,
  });
  const app = createServiceApp({ ...serviceDeps, background });
  // The gateway keeps its connections to the service open between requests, and Node's agent does not
  // read `Keep-Alive: timeout=…`: with Node's 5 s default, a request sent just as the service closed an
  // idle connection failed as a 502 "service unreachable" (seen in the suite, where gaps of seconds are
  // common). Idle connections held 65 s make that edge rare: the gateway must stay idle on one that long.
  const { server, port } = await listen(app, config.PORT, config.HOST, {
    keepAliveTimeout: SERVICE_KEEP_ALIVE_MS,
  });
  const metricsListener = await listenForMetrics(config.metricsEndpoint, metrics, config.HOST, logger);
  logger.info(
    {
      port,
      llm: config.LLM_BASE_URL ? redactUrl(config.LLM_BASE_URL) : null,
      models: config.MODELS_FILE
        ? { file: config.MODELS_FILE, names: config.catalogue.names.length }
        : undefined,
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
    retention,
    reconciler,
    files,
    vectorStores: vectors.vectorStores,
    guardrails,
    handler: app,
    async close() {
      stopLeases();
      await Promise.all([retention.close(), reconciler.close()]);
      await Promise.all([closeGracefully(server, 5_000), metricsListener?.close()]);
      await Promise.all([evals.close(), background.close()]);
      await ingestion.close();
      await vectors.close();
      await vectorIndex.close();
      spicedb.close();
      // Usage sent beside answers already given: answered (or timed out) before the client goes.
      await usage.drain();
      redis.disconnect();
      await sandbox.close();
      await hostedMcp.close();
      await providerKeys.close();
      await db.close();
    },
  };
}
