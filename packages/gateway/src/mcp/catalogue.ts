import { defaultToolRole, type McpServer } from "@gw/core/mcp";
import type { Principal } from "@gw/core/principal";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { McpDeps } from "./deps.ts";

export const originOf = (server: McpServer) => new URL(server.url).origin;

/**
 * The tools the upstream offers, asked as the principal (with the vault's
 * credential for them: call only once they may read the server). A tool seen
 * for the first time gets its default role in SpiceDB (`readOnlyHint: true`:
 * reader, else writer), never overriding an owner's policy.
 */
export async function upstreamTools(
  deps: Pick<McpDeps, "credentials" | "upstreams" | "tools">,
  principal: Principal,
  server: McpServer,
): Promise<Tool[]> {
  const { headers } = await deps.credentials.headersFor(
    principal.org,
    { id: server.id, origin: originOf(server) },
    principal.user,
  );
  const tools = await deps.upstreams.listTools(principal, server, headers);
  const known = await deps.tools.roles(principal.org, server.id);
  await Promise.all(
    tools
      .filter((tool) => !known.has(tool.name))
      .map((tool) =>
        deps.tools.setDefault(principal.org, server.id, tool.name, defaultToolRole(tool.annotations)),
      ),
  );
  return tools;
}
