import { deleteCredential, getCredential, listCredentials, putCredential } from "./credentials.ts";
import { createServer, deleteServer, getServer, listServers, updateServer } from "./servers.ts";
import { listTools, setToolPolicy } from "./tools.ts";

/** The MCP API (docs/api/mcp.md): registered servers, their tools' roles, the vault's credentials. */
export const mcpRoutes = [
  createServer,
  listServers,
  getServer,
  updateServer,
  deleteServer,
  setToolPolicy,
  listTools,
  putCredential,
  listCredentials,
  getCredential,
  deleteCredential,
];
