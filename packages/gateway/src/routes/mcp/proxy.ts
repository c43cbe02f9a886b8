import { MCP_CALL, MCP_PROXY_ROUTE, MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSIONS } from "@gw/core/mcp";
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
    path: MCP_PROXY_ROUTE,
    operationId: "mcpProxy",
    summary: `Streamable HTTP MCP endpoint in front of the server (JSON-RPC; protocol ${[...PROTOCOL_VERSIONS].reverse().join(", ")})`,
    description: `An OAuth 2.1 protected resource: a JWT is accepted when its \`aud\` is this URL or the gateway's. \`tools/list\` lists only the tools the principal may call. A ${MODERN_PROTOCOL_VERSIONS.join(" or ")} request (version in \`params._meta\`) is checked against its \`MCP-Protocol-Version\`, \`Mcp-Method\` and \`Mcp-Name\` headers (400, -32020). A 401 or 403 to a JSON-RPC request is a JSON-RPC error response.`,
    tag: TAG,
    permission: MCP_CALL,
    body: { type: "object", description: "One JSON-RPC 2.0 message" },
    responses: {
      200: { description: "The JSON-RPC answer", schema: { type: "object" } },
      202: { description: "A notification, accepted" },
      400: {
        description: "HeaderMismatch (-32020) or UnsupportedProtocolVersion (-32022), as a JSON-RPC error",
        schema: { type: "object" },
      },
    },
    errors: ["not_found"],
  },
  ...(["GET", "DELETE"] as const).map(
    (method): ApiOperation => ({
      method,
      path: MCP_PROXY_ROUTE,
      operationId: `mcpProxy${method === "GET" ? "Stream" : "EndSession"}`,
      summary: "Not offered: 405 (no SSE stream, no sessions to end)",
      tag: TAG,
      permission: MCP_CALL,
      responses: { 405: { description: "Method Not Allowed" } },
    }),
  ),
];
