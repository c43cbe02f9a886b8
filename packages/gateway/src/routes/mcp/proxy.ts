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
 * refuses; a refusal of the catalogue's keeps its `message` and `code` (a
 * 422 its `detail`) at the top level.
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
    detail: { type: "array", items: { type: "object" } },
  },
  required: ["jsonrpc", "id", "error"],
};

/** A refusal of the catalogue's, to a POST: a JSON-RPC error with `code` (docs/api/mcp.md). */
const refusal = (code: number, what: string) => ({
  description: `${what}: a JSON-RPC error (${code}), the catalogue's fields beside it`,
  schema: JSON_RPC_ERROR,
});

export const MCP_PROXY_OPERATIONS: ApiOperation[] = [
  {
    method: "POST",
    path: MCP_PROXY_ROUTE,
    operationId: "mcpProxy",
    summary: `Streamable HTTP MCP endpoint in front of the server (JSON-RPC; protocol ${[...PROTOCOL_VERSIONS].reverse().join(", ")})`,
    description: `An OAuth 2.1 protected resource: a JWT is accepted when its \`aud\` is this URL or the gateway's. \`tools/list\` lists only the tools the principal may call. A ${MODERN_PROTOCOL_VERSIONS.join(" or ")} request (version in \`params._meta\`) is checked against its \`MCP-Protocol-Version\`, \`Mcp-Method\` and \`Mcp-Name\` headers (400, -32020). Every refusal of a POST (401, 403, 404, 413, 415, 422, 429, 503) is also a JSON-RPC error response with the request's id (\`null\` when it could not be read).`,
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
      401: refusal(-32001, "No valid credential"),
      403: refusal(-32003, "A permission the credential lacks"),
      404: {
        description:
          "No server the principal may read (-32004), or a method this revision does not offer (-32601), as a JSON-RPC error",
        schema: JSON_RPC_ERROR,
      },
      413: refusal(-32013, "A body over 1 MiB"),
      415: refusal(-32015, "A body that is not JSON"),
      422: refusal(
        -32700,
        "Unreadable JSON (a parse error, `detail` beside it), or a bad X-On-Behalf-Of (-32600)",
      ),
      429: refusal(
        -32029,
        "The key's request window (`tools/call`), Retry-After and the rate-limit headers kept",
      ),
      503: refusal(-32603, "A store the decision needs cannot answer"),
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
