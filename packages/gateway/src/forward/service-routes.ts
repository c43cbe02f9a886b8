import type { RouteTemplate } from "@gw/core/http";
import document from "../generated/openapi.json" with { type: "json" };

/**
 * What the gateway knows of the service's routes, read from the OpenAPI
 * document (`pnpm openapi` writes it from the service's route declarations,
 * and `pnpm check:config` fails when the committed one is stale): the
 * operations marked `x-gw-upstream: service`, and among them those marked
 * `x-gw-calls-model`. The gateway cannot import the service (the service
 * depends on it for its tests), so the document is where the one
 * declaration of each route reaches it.
 */
interface DocumentedOperation {
  "x-gw-upstream"?: string;
  "x-gw-calls-model"?: boolean;
}

/** `/api/v1/llm/conversations/{id}` → `/api/v1/llm/conversations/:id`, the template Express and route labels use. */
const expressPath = (path: string) => path.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, ":$1");

function serviceOperations(filter: (operation: DocumentedOperation) => boolean): RouteTemplate[] {
  const paths = document.paths as Record<string, Record<string, DocumentedOperation>>;
  return Object.entries(paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([, operation]) => operation["x-gw-upstream"] === "service" && filter(operation))
      .map(([method]) => ({ method: method.toUpperCase(), path: expressPath(path) })),
  );
}

/**
 * The service's endpoints, which the gateway forwards: the gateway labels
 * their requests (and the ones it refuses before forwarding: 401, 403, 429)
 * with these templates.
 */
export const SERVICE_ROUTES: readonly RouteTemplate[] = serviceOperations(() => true);

/** The service's endpoints that call a model (declared `callsModel` in the service). */
export const MODEL_ROUTES: readonly RouteTemplate[] = serviceOperations(
  (o) => o["x-gw-calls-model"] === true,
);
