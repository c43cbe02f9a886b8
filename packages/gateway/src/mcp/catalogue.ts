import { defaultToolRole, type McpServer, toolNameProblem } from "@gw/core/mcp";
import type { Principal } from "@gw/core/principal";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { McpDeps } from "./deps.ts";

export const originOf = (server: McpServer) => new URL(server.url).origin;

/**
 * The tools the upstream offers, asked as the principal (with the vault's
 * credential for them: call only once they may read the server), without
 * those whose names the gateway refuses (`toolNameProblem`). A tool seen for
 * the first time gets its default role in SpiceDB (`readOnlyHint: true`:
 * reader, else writer), never overriding an owner's policy: at most
 * `newToolsPerListing` of them per listing (the rest on later listings), and
 * none once the server has `toolsPerServer` tools with a role. A tool without
 * a role is nobody's to list or call.
 */
export async function upstreamTools(
  deps: Pick<McpDeps, "credentials" | "upstreams" | "tools" | "limits" | "metrics" | "logger">,
  principal: Principal,
  server: McpServer,
): Promise<Tool[]> {
  const { headers } = await deps.credentials.headersFor(
    principal.org,
    { id: server.id, origin: originOf(server) },
    principal.user,
  );
  const offered = await deps.upstreams.listTools(principal, server, headers);
  const tools = offered.filter((tool) => toolNameProblem(tool.name, deps.limits.toolNameBytes) === undefined);
  if (tools.length < offered.length) {
    deps.metrics.mcpUpstreamLimits.inc({ limit: "tool_name" }, offered.length - tools.length);
    deps.logger.warn(
      { server: server.id, refused: offered.length - tools.length },
      "an MCP server offered tools whose names the gateway refuses",
    );
  }
  const known = await deps.tools.roles(principal.org, server.id);
  const fresh = [...new Map(tools.filter((t) => !known.has(t.name)).map((t) => [t.name, t])).values()];
  if (fresh.length === 0) return tools;
  const room = Math.max(0, deps.limits.toolsPerServer - known.size);
  const now = fresh.slice(0, Math.min(room, deps.limits.newToolsPerListing));
  const full = fresh.length - Math.min(room, fresh.length);
  const later = fresh.length - now.length - full;
  if (full > 0) deps.metrics.mcpUpstreamLimits.inc({ limit: "tools_per_server" }, full);
  if (later > 0) deps.metrics.mcpUpstreamLimits.inc({ limit: "new_tools_per_listing" }, later);
  if (full > 0 || later > 0)
    deps.logger.warn(
      { server: server.id, registered: now.length, later, full },
      "an MCP server offered more new tools than one listing registers",
    );
  await deps.tools.setDefaults(
    principal.org,
    server.id,
    now.map((tool) => ({ name: tool.name, role: defaultToolRole(tool.annotations) })),
  );
  return tools;
}
