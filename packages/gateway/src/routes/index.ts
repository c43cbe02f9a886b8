import { operationsOf } from "@gw/core/http";
import type { ApiOperation } from "@gw/core/openapi";
import { adminReadRoutes, apiKeyRoutes } from "./admin/index.ts";
import { authenticationRoutes } from "./authentication/index.ts";
import { authorizationRoutes } from "./authorization/index.ts";
import { mcpRoutes } from "./mcp/index.ts";
import { MCP_PROXY_OPERATIONS } from "./mcp/proxy.ts";
import { wellKnownRoutes } from "./well-known/index.ts";

export {
  adminReadRoutes,
  apiKeyRoutes,
  authenticationRoutes,
  authorizationRoutes,
  mcpRoutes,
  wellKnownRoutes,
};

/**
 * What the gateway itself serves, for the OpenAPI document (`pnpm openapi`):
 * the operations of its declared routes, and the MCP proxy's (middleware,
 * described apart). `app.ts` registers the same declarations.
 */
export const GATEWAY_OPERATIONS: ApiOperation[] = [
  ...operationsOf([
    ...wellKnownRoutes,
    ...authenticationRoutes,
    ...authorizationRoutes,
    ...mcpRoutes,
    ...adminReadRoutes,
    ...apiKeyRoutes,
  ]),
  ...MCP_PROXY_OPERATIONS,
];
