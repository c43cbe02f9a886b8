import type { Router } from "express";
import { SERVER_ID } from "../../mcp/access.ts";
import { resourceUrl } from "../../mcp/proxy.ts";

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
export function registerProtectedResourceMetadata(router: Router, publicUrl: string): void {
  router.get("/.well-known/oauth-protected-resource/api/v1/mcp/servers/:id/mcp", (req, res) => {
    if (!SERVER_ID.test(req.params.id)) {
      res.status(404).json({ error: "Not Found", message: "No such protected resource" });
      return;
    }
    res.set("Cache-Control", "public, max-age=300");
    const body: ProtectedResourceMetadata = {
      resource: resourceUrl(publicUrl, req.params.id),
      authorization_servers: [publicUrl],
      bearer_methods_supported: ["header"],
      scopes_supported: ["mcp:call"],
      resource_name: "MCP server proxy of the LLM authorization gateway",
    };
    res.json(body);
  });
}
