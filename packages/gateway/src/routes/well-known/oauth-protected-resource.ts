import { defineRoute } from "@gw/core/http";
import { MCP_CALL, MCP_PROXY_ROUTE, MCP_SERVER_ID, mcpProxyUrl } from "@gw/core/mcp";
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
  responses: { 200: { description: "The metadata", schema: { type: "object" } } },
  handler: ({ params, res }, { publicUrl }: { publicUrl: string }) => {
    const id = String(params.id);
    if (!MCP_SERVER_ID.test(id)) {
      res.status(404).json({ error: "Not Found", message: "No such protected resource" });
      return;
    }
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
