import { MCP_CALL, MCP_PROXY_ROUTE, MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSIONS } from "@gw/core/mcp";
import type { ApiOperation, JsonSchema } from "@gw/core/openapi";
import { TAG } from "./schemas.ts";

/**
 * The MCP proxy (`src/mcp/proxy.ts`) is middleware mounted before the API
 * router, with its own authentication, 401 and 403: not a declared route.
 * Its operations are described here, for the OpenAPI document.
 */
/**
 * A JSON-RPC 2.0 error response, as the proxy answers a JSON-RPC request it
 * refuses; a 401 or 403 keeps the catalogue's `message` and `code` at the top level.
 */
const JSON_RPC_ERROR: JsonSchema = {
  type: "object",
  properties: {
    jsonrpc: { const: "2.0" },
    id: { type: ["string", "integer", "null"] },
    error: {
      type: "object",
      properties: { code: { type: "integer" }, message: { type: "string" }, data: {} },
      required: ["code", "message"],
    },
    message: { type: "string" },
    code: { type: "string" },
  },
  required: ["jsonrpc", "id", "error"],
};

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
        schema: JSON_RPC_ERROR,
      },
      401: { description: "To a JSON-RPC request: a JSON-RPC error (-32001)", schema: JSON_RPC_ERROR },
      403: { description: "To a JSON-RPC request: a JSON-RPC error (-32003)", schema: JSON_RPC_ERROR },
      404: {
        description: "A method this revision does not offer (-32601), as a JSON-RPC error",
        schema: JSON_RPC_ERROR,
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
      responses: {},
      errors: ["method_not_allowed"],
    }),
  ),
];
