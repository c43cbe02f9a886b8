import type { AuditLog } from "@gw/core/audit";
import type { ResourceAuthorization } from "@gw/core/authz";
import type { Logger } from "@gw/core/logger";
import type {
  CredentialStore,
  McpServerStore,
  McpToolAuthorization,
  UpstreamClients,
  UpstreamPolicy,
} from "@gw/core/mcp";
import type { GatewayMetrics } from "../metrics.ts";

/** What an upstream may offer in one listing and answer (docs/api/mcp.md, "Limits on what an upstream answers"). */
export interface McpLimits {
  /** `MCP_MAX_ANSWER_BYTES`: the proxy's own answer is bounded by it too. */
  answerBytes: number;
  /** `MCP_MAX_TOOLS_PER_SERVER`: tools one listing may offer, and tools a server may have a role for. */
  toolsPerServer: number;
  /** `MCP_MAX_TOOL_NAME_BYTES`: a tool name's length as encoded in its SpiceDB id. */
  toolNameBytes: number;
  /** `MCP_MAX_NEW_TOOLS_PER_LISTING`: new tools given their default role by one listing. */
  newToolsPerListing: number;
}

/** What the MCP routes and the proxy share. */
export interface McpDeps {
  authorization: ResourceAuthorization;
  servers: McpServerStore;
  credentials: CredentialStore;
  tools: McpToolAuthorization;
  upstreams: UpstreamClients;
  policy: UpstreamPolicy;
  limits: McpLimits;
  audit: AuditLog;
  metrics: Pick<
    GatewayMetrics,
    | "authorizationOperations"
    | "auditWriteErrors"
    | "mcpToolCalls"
    | "mcpToolCallSeconds"
    | "mcpUpstreamLimits"
  >;
  logger: Logger;
  /** The gateway's public URL: the proxy's resource URL and its authorization server. */
  publicUrl: string;
}
