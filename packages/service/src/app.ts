import type { ResourceAuthorization, SpiceDBClient, WriterDeletion } from "@gw/core/authz";
import type { Clock } from "@gw/core/clock";
import {
  errorHandler,
  jsonBody,
  type MetricsEndpoint,
  notFoundHandler,
  RouteLabels,
  registerProbes,
  registerRoutes,
  useRequestBasics,
} from "@gw/core/http";
import type { InternalAssertions } from "@gw/core/internal-assertion";
import type { Logger } from "@gw/core/logger";
import type { Metrics } from "@gw/core/metrics";
import { type Postgres, postgresReady } from "@gw/core/postgres";
import { type RedisClient, redisReady } from "@gw/core/redis";
import express, { Router } from "express";
import type { BudgetDeps } from "./budgets/admit-model-call.ts";
import type { ModelGuardrails } from "./calls/guardrails.ts";
import type { ResponseCache } from "./calls/response-cache.ts";
import type { CompletionStore } from "./completions/store.ts";
import type { ConversationStore } from "./conversations/store.ts";
import type { Evals } from "./evals/index.ts";
import type { Files } from "./files/files.ts";
import type { Guardrails } from "./guardrails/guardrails.ts";
import { checkedByGuardrails } from "./http/model-route.ts";
import { verifyAssertion } from "./http/verify-assertion.ts";
import type { Ids } from "./ids.ts";
import type { ContextBudget } from "./llm/context.ts";
import type { ChatProvider } from "./llm/provider.ts";
import type { ProviderKeyStore } from "./provider-keys/store.ts";
import type { BackgroundResponses } from "./responses/background/index.ts";
import type { HostedMcpConfig } from "./responses/hosted-mcp-proxy.ts";
import type { ResponseStore } from "./responses/store.ts";
import { serviceRoutes } from "./routes.ts";
import type { Sandbox } from "./sandbox/sandbox.ts";
import type { UsageStore } from "./usage/store.ts";
import type { Embedder } from "./vector-stores/ingestion/embedder.ts";
import type { VectorIndex } from "./vector-stores/vector-index.ts";
import type { VectorStores } from "./vector-stores/vector-stores.ts";

export interface ServiceDeps {
  logger: Logger;
  /** The process's one clock: the `created_at` of what the service creates. */
  clock: Clock;
  /** The ids the service issues, stamped with the clock's wall time (as the orphan reconciler reads them). */
  ids: Ids;
  metrics: Metrics;
  redis: RedisClient;
  /** PostgreSQL: the platform's content. */
  db: Postgres;
  spicedb: SpiceDBClient;
  assertions: InternalAssertions;
  authorization: ResourceAuthorization;
  /** Deletes a resource's relationships for its writers too (responses). */
  deletion: WriterDeletion;
  provider: ChatProvider;
  conversations: ConversationStore;
  responses: ResponseStore;
  /** Stored chat completions (`store: true`). */
  completions: CompletionStore;
  /** Uploaded files: records, bytes, quota. */
  files: Files;
  /** Vector stores: records, chunks, ingestion queue. */
  vectorStores: VectorStores;
  /** The chunks of vector stores' files and their embeddings (`VECTOR_DATABASE_URL`), for searches. */
  vectorIndex: VectorIndex;
  /** Embeds search queries through the model-call pipeline, charged to the searching key. */
  embedder: Embedder;
  /** `VECTOR_STORE_EMBEDDING_MODEL`: search queries are embedded with the model the stores' files were. */
  embeddingModel: string;
  usage: UsageStore;
  context: ContextBudget;
  budgets: BudgetDeps;
  /** The guardrails model calls run (calls/guardrails.ts); none: calls are not checked. */
  modelGuardrails?: ModelGuardrails | undefined;
  /** The response cache (calls/response-cache.ts); none: every model call bypasses it. */
  responseCache?: ResponseCache | undefined;
  evals: Evals;
  sandbox: Sandbox;
  /** Where `/metrics` is served, and its token. */
  metricsEndpoint?: MetricsEndpoint;
  /** How hosted MCP tools of responses reach the gateway's MCP proxy. */
  hostedMcp?: HostedMcpConfig;
  /** Organizations' own provider keys (BYOK): their routes, and `keyFor` for the router. */
  providerKeys: ProviderKeyStore;
  /** Guardrails: their routes, and `resolveGuardrails` for the model-call pipeline. */
  guardrails: Guardrails;
  /** Background responses (`background: true`): their queue, events, cancels and slots. */
  background?: BackgroundResponses;
}

/**
 * The service behind the gateway: every `/api/v1` request must carry the
 * gateway's assertion (→ principal), then the route's permission, then the
 * resource's role in SpiceDB. Every route is declared once, in its
 * feature's `routes/` folder (`routes.ts` lists them).
 */
export function createServiceApp(deps: ServiceDeps): express.Express {
  const app = express();
  // The gateway writes the access line of every request it forwards: the service's own is at debug.
  useRequestBasics(app, deps.logger, deps.metrics, [], "debug");
  const probes = Router();
  registerProbes(
    probes,
    {
      redis: () => redisReady(deps.redis),
      postgres: () => postgresReady(deps.db),
      spicedb: () => deps.spicedb.readSchema().then(() => true),
    },
    deps.metrics,
    deps.metricsEndpoint,
  );
  app.use(probes);

  const api = Router();
  // A model call resolves its organization's guardrails by their version in Redis, read beside the replay
  // guard, whose answer its route's handler waits for (parsing and validating overlap it).
  const modelRoutes = new RouteLabels(serviceRoutes.filter((route) => route.callsModel));
  const guardrailed = new RouteLabels(serviceRoutes.filter(checkedByGuardrails));
  api.use(
    verifyAssertion(deps.assertions, deps.redis, {
      matches: (req) => modelRoutes.label(req.method, req.originalUrl) !== "unmatched",
      beside: (req, res, principal) => {
        if (guardrailed.label(req.method, req.originalUrl) !== "unmatched")
          res.locals.guardrailVersion = deps.guardrails.readVersion(principal.org);
      },
    }),
  );
  // A route that reads its own body as it arrives (a multipart upload) comes before the JSON parser,
  // which refuses any other body on every other route.
  const streamed = (route: (typeof serviceRoutes)[number]) => route.bodyContentType === "multipart/form-data";
  registerRoutes<ServiceDeps>(api, serviceRoutes.filter(streamed), deps);
  api.use(jsonBody);
  registerRoutes<ServiceDeps>(
    api,
    serviceRoutes.filter((route) => !streamed(route)),
    deps,
  );
  app.use("/api/v1", api);

  app.use(notFoundHandler);
  app.use(errorHandler(deps.logger));
  return app;
}
