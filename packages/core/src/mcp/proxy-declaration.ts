/**
 * The gateway's MCP proxy, declared once: where it is, what a credential
 * needs to use it, and which protocol versions it speaks (those of
 * `protocol-eras.ts`). The gateway mounts, documents and names it as an OAuth
 * protected resource from here, and the service's hosted MCP tools reach it
 * from here: a change of one is a change of all.
 */
import type { Permission } from "../permissions.ts";

/** Server ids the gateway issues. */
export const MCP_SERVER_ID = /^mcp_[0-9a-f]{24}$/;

const PREFIX = "/api/v1/mcp/servers/";
const SUFFIX = "/mcp";

/** The proxy's route, as the router and the OpenAPI document write it. */
export const MCP_PROXY_ROUTE = `${PREFIX}:id${SUFFIX}`;

/** The proxy's path for one server. */
export const mcpProxyPath = (serverId: string) => `${PREFIX}${serverId}${SUFFIX}`;

/** One server's proxy URL under a base URL (`GATEWAY_PUBLIC_URL`, or `GATEWAY_URL` inside the deployment). */
export const mcpProxyUrl = (base: string, serverId: string) => `${base}${mcpProxyPath(serverId)}`;

/** The server a URL is the proxy URL of under `base`, exactly (`base` empty: a path); otherwise undefined. */
export function serverOfProxyUrl(base: string, url: string): string | undefined {
  const start = `${base}${PREFIX}`;
  if (!url.startsWith(start) || !url.endsWith(SUFFIX)) return undefined;
  const id = url.slice(start.length, url.length - SUFFIX.length);
  return MCP_SERVER_ID.test(id) ? id : undefined;
}

/** The permission a credential needs to use the proxy, and the one OAuth scope of its tokens. */
export const MCP_CALL = "mcp:call" satisfies Permission;
