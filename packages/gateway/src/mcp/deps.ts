import type { ResourceAuthorization } from "@gw/core/authz";
import type { Logger } from "@gw/core/logger";
import type {
  CredentialStore,
  McpServerStore,
  McpToolAuthorization,
  UpstreamClients,
  UpstreamPolicy,
} from "@gw/core/mcp";
import type { AuditLog } from "../audit/audit-log.ts";
import type { GatewayMetrics } from "../metrics.ts";

/** What the MCP routes and the proxy share. */
export interface McpDeps {
  authorization: ResourceAuthorization;
  servers: McpServerStore;
  credentials: CredentialStore;
  tools: McpToolAuthorization;
  upstreams: UpstreamClients;
  policy: UpstreamPolicy;
  audit: AuditLog;
  metrics: Pick<
    GatewayMetrics,
    "authorizationOperations" | "auditWriteErrors" | "mcpToolCalls" | "mcpToolCallSeconds"
  >;
  logger: Logger;
  /** The gateway's public URL: the proxy's resource URL and its authorization server. */
  publicUrl: string;
}
