import { operationsOf } from "@gw/core/http";
import type { ApiOperation } from "@gw/core/openapi";
import { completionRoutes } from "./completions/routes/index.ts";
import { conversationRoutes } from "./conversations/routes/index.ts";
import { embeddingRoutes } from "./embeddings/routes/index.ts";
import { evalRoutes } from "./evals/routes/index.ts";
import { fileRoutes } from "./files/routes/index.ts";
import { guardrailRoutes } from "./guardrails/routes/index.ts";
import { modelRoutes } from "./models/routes/index.ts";
import { providerKeyRoutes } from "./provider-keys/routes/index.ts";
import { responseRoutes } from "./responses/routes/index.ts";
import { sandboxRoutes } from "./sandbox/routes/index.ts";
import { getUsage } from "./usage/routes/get-usage.ts";
import { vectorStoreRoutes } from "./vector-stores/routes/index.ts";
import { searchVectorStore } from "./vector-stores/routes/search-vector-store.ts";

/**
 * Every route the service serves (under `/api/v1`, through the gateway),
 * each declared once in its feature's `routes/` folder: `app.ts` registers
 * them, and the OpenAPI document (`pnpm openapi`) describes them.
 */
export const serviceRoutes = [
  ...conversationRoutes,
  ...responseRoutes,
  ...completionRoutes,
  ...fileRoutes,
  ...vectorStoreRoutes,
  searchVectorStore,
  ...embeddingRoutes,
  ...modelRoutes,
  getUsage,
  ...evalRoutes,
  ...sandboxRoutes,
  ...providerKeyRoutes,
  ...guardrailRoutes,
];

/**
 * The service's routes as the OpenAPI document describes them, each marked
 * `x-gw-upstream: service` (the gateway forwards it) and, when it calls a
 * model, `x-gw-calls-model: true`: the gateway reads its knowledge of the
 * service's routes from the document (`packages/gateway/src/forward/service-routes.ts`).
 */
export const SERVICE_OPERATIONS: ApiOperation[] = operationsOf(serviceRoutes, (route) => ({
  "x-gw-upstream": "service",
  ...(route.callsModel ? { "x-gw-calls-model": true } : {}),
})).map((operation) => ({
  ...operation,
  // What the gateway answers in the service's stead: unreachable (502), or no answer in time (504).
  errors: [...new Set([...(operation.errors ?? []), "bad_gateway", "gateway_timeout"] as const)],
}));
