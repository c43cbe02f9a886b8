import type { ApiOperation } from "@gw/core/openapi";
import { TAG } from "./schemas.ts";

/**
 * The MCP proxy (`src/mcp/proxy.ts`) is middleware mounted before the API
 * router, with its own authentication, 401 and 403: not a declared route.
 * Its operations are described here, for the OpenAPI document.
 */
export const MCP_PROXY_OPERATIONS: ApiOperation[] = [
  {
    method: "POST",
    path: "/api/v1/mcp/servers/:id/mcp",
    operationId: "mcpProxy",
    summary:
      "Streamable HTTP MCP endpoint in front of the server (JSON-RPC; protocol 2025-06-18, 2025-11-25)",
    description:
      "An OAuth 2.1 protected resource: a JWT is accepted when its `aud` is this URL or the gateway's. `tools/list` lists only the tools the principal may call.",
    tag: TAG,
    permission: "mcp:call",
    body: { type: "object", description: "One JSON-RPC 2.0 message" },
    responses: {
      200: { description: "The JSON-RPC answer", schema: { type: "object" } },
      202: { description: "A notification, accepted" },
    },
    errors: ["not_found"],
  },
  ...(["GET", "DELETE"] as const).map(
    (method): ApiOperation => ({
      method,
      path: "/api/v1/mcp/servers/:id/mcp",
      operationId: `mcpProxy${method === "GET" ? "Stream" : "EndSession"}`,
      summary: "Not offered: 405 (no SSE stream, no sessions to end)",
      tag: TAG,
      permission: "mcp:call",
      responses: { 405: { description: "Method Not Allowed" } },
    }),
  ),
];
