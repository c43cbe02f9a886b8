import type { Role } from "@gw/core/authz";
import { AppError, forbidden } from "@gw/core/errors";
import { MCP_SERVER_ID, type McpServer } from "@gw/core/mcp";
import type { Principal } from "@gw/core/principal";
import type { McpDeps } from "./deps.ts";

export class UnknownServer extends AppError {
  constructor() {
    super("not_found", "No such MCP server");
    this.name = "UnknownServer";
  }
}

const WHAT: Record<Role, string> = {
  reader: "a reader",
  writer: "a writer",
  owner: "an owner",
};

/**
 * The server, if the principal may at least read it (otherwise it is 404,
 * exactly as an unknown id: existence does not leak), and holds `role`
 * (otherwise 403, naming the role).
 */
export async function serverFor(
  deps: Pick<McpDeps, "authorization" | "servers">,
  principal: Principal,
  id: string,
  role: Role,
  doing = "do this",
): Promise<McpServer> {
  if (!MCP_SERVER_ID.test(id)) throw new UnknownServer();
  const ref = { type: "mcp_server" as const, id };
  const [readable, server] = await Promise.all([
    deps.authorization.check(principal, ref, "reader"),
    deps.servers.get(principal.org, id),
  ]);
  if (!readable || !server) throw new UnknownServer();
  if (role !== "reader" && !(await deps.authorization.check(principal, ref, role))) {
    throw forbidden(`Only ${WHAT[role]} of this MCP server may ${doing}`);
  }
  return server;
}
