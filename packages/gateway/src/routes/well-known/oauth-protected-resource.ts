import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { MCP_CALL, MCP_PROXY_ROUTE, MCP_SERVER_ID, mcpProxyUrl } from "@gw/core/mcp";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import { PROTECTED_RESOURCE_PREFIX } from "../../mcp/proxy.ts";

/** RFC 9728's metadata of a protected resource: which authorization server issues its tokens. */
export interface ProtectedResourceMetadata {
  resource: string;
  authorization_servers: string[];
  bearer_methods_supported: ["header"];
  scopes_supported: string[];
  resource_name: string;
}

/**
 * `GET /.well-known/oauth-protected-resource/api/v1/mcp/servers/{id}/mcp`:
 * each MCP proxy endpoint is an OAuth 2.1 protected resource whose
 * authorization server is the gateway (its tokens, exchanged with this
 * endpoint's URL as `audience`, or API keys). Public, and the same for any
 * well-formed id, registered or not, so it tells nothing of what exists.
 */
export const protectedResourceMetadata = defineRoute({
  method: "GET",
  path: `${PROTECTED_RESOURCE_PREFIX}${MCP_PROXY_ROUTE}`,
  operationId: "getMcpProtectedResourceMetadata",
  summary: "RFC 9728 metadata of an MCP proxy endpoint: the gateway is its authorization server",
  tag: "MCP Vault",
  auth: "none",
  responses: {
    200: {
      description: "The metadata",
      schema: objectSchema({
        resource: stringSchema("The MCP proxy endpoint's URL"),
        authorization_servers: { type: "array", items: { type: "string" } },
        bearer_methods_supported: { type: "array", items: { const: "header" } },
        scopes_supported: { type: "array", items: { type: "string" } },
        resource_name: stringSchema(),
      }),
    },
  },
  // An id that cannot be an MCP server's.
  errors: ["not_found"],
  handler: ({ params, res }, { publicUrl }: { publicUrl: string }) => {
    const id = String(params.id);
    if (!MCP_SERVER_ID.test(id)) throw notFound("No such protected resource");
    res.set("Cache-Control", "public, max-age=300");
    const body: ProtectedResourceMetadata = {
      resource: mcpProxyUrl(publicUrl, id),
      authorization_servers: [publicUrl],
      bearer_methods_supported: ["header"],
      scopes_supported: [MCP_CALL],
      resource_name: "MCP server proxy of the LLM authorization gateway",
    };
    return body;
  },
});
