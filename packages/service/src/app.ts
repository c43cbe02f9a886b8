import type { ResourceAuthorization, SpiceDBClient, WriterDeletion } from "@gw/core/authz";
import {
  errorHandler,
  jsonBody,
  type MetricsEndpoint,
  notFoundHandler,
  registerProbes,
  useRequestBasics,
} from "@gw/core/http";
import type { InternalAssertions } from "@gw/core/internal-assertion";
import type { Logger } from "@gw/core/logger";
import type { Metrics } from "@gw/core/metrics";
import { type Postgres, postgresReady } from "@gw/core/postgres";
import { type RedisClient, redisReady } from "@gw/core/redis";
import express, { Router } from "express";
import { verifyAssertion } from "./authenticate/verify-assertion.ts";
import type { BudgetDeps } from "./budgets/admit-model-call.ts";
import type { CompletionStore } from "./completions/store.ts";
import type { ConversationStore } from "./conversations/store.ts";
import type { Evals } from "./evals/index.ts";
import type { ContextBudget } from "./llm/context.ts";
import type { ChatProvider } from "./llm/provider.ts";
import type { HostedMcpConfig } from "./responses/hosted-mcp.ts";
import type { ResponseStore } from "./responses/store.ts";
import { registerCreateCompletion } from "./routes/chat/create-completion.ts";
import { registerDeleteCompletion } from "./routes/chat/delete-completion.ts";
import { registerGetCompletion } from "./routes/chat/get-completion.ts";
import { registerListCompletionMessages } from "./routes/chat/list-completion-messages.ts";
import { registerListCompletions } from "./routes/chat/list-completions.ts";
import { registerUpdateCompletion } from "./routes/chat/update-completion.ts";
import { registerAddItems } from "./routes/conversations/add-items.ts";
import { registerCreateConversation } from "./routes/conversations/create-conversation.ts";
import { registerDeleteConversation } from "./routes/conversations/delete-conversation.ts";
import { registerDeleteItem } from "./routes/conversations/delete-item.ts";
import { registerGetConversation } from "./routes/conversations/get-conversation.ts";
import { registerGetItem } from "./routes/conversations/get-item.ts";
import { registerListItems } from "./routes/conversations/list-items.ts";
import { registerUpdateConversation } from "./routes/conversations/update-conversation.ts";
import { registerEvalRoutes } from "./routes/evals/index.ts";
import { registerGetModel } from "./routes/models/get-model.ts";
import { registerListModels } from "./routes/models/list-models.ts";
import { registerCancelResponse } from "./routes/responses/cancel-response.ts";
import { registerCountInputTokens } from "./routes/responses/count-input-tokens.ts";
import { registerCreateResponse } from "./routes/responses/create-response.ts";
import { registerDeleteResponse } from "./routes/responses/delete-response.ts";
import { registerGetResponse } from "./routes/responses/get-response.ts";
import { registerListInputItems } from "./routes/responses/list-input-items.ts";
import { registerSandboxRoutes } from "./routes/sandbox/index.ts";
import { registerGetUsage } from "./routes/usage/get-usage.ts";
import type { Sandbox } from "./sandbox/sandbox.ts";
import type { UsageStore } from "./usage/store.ts";

export interface ServiceDeps {
  logger: Logger;
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
  usage: UsageStore;
  context: ContextBudget;
  budgets: BudgetDeps;
  evals: Evals;
  sandbox: Sandbox;
  /** Where `/metrics` is served, and its token. */
  metricsEndpoint?: MetricsEndpoint;
  /** How hosted MCP tools of responses reach the gateway's MCP proxy. */
  hostedMcp?: HostedMcpConfig;
}

/**
 * The service behind the gateway: every `/api/v1` request must carry the
 * gateway's assertion (→ principal), then the route's permission, then the
 * resource's role in SpiceDB.
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
  api.use(verifyAssertion(deps.assertions, deps.redis), jsonBody);
  const conversations = { store: deps.conversations, authorization: deps.authorization };
  registerCreateConversation(api, conversations);
  registerGetConversation(api, conversations);
  registerUpdateConversation(api, conversations);
  registerDeleteConversation(api, conversations);
  registerListItems(api, conversations);
  registerAddItems(api, conversations);
  registerGetItem(api, conversations);
  registerDeleteItem(api, conversations);
  registerCreateResponse(api, deps);
  registerCountInputTokens(api, deps);
  registerGetResponse(api, deps);
  registerListInputItems(api, deps);
  registerDeleteResponse(api, deps);
  registerCancelResponse(api, deps);
  registerCreateCompletion(api, deps);
  registerListCompletions(api, deps);
  registerGetCompletion(api, deps);
  registerListCompletionMessages(api, deps);
  registerUpdateCompletion(api, deps);
  registerDeleteCompletion(api, deps);
  registerListModels(api, deps);
  registerGetModel(api, deps);
  registerGetUsage(api, deps);
  registerEvalRoutes(api, deps);
  registerSandboxRoutes(api, deps.sandbox);
  app.use("/api/v1", api);

  app.use(notFoundHandler);
  app.use(errorHandler(deps.logger));
  return app;
}
