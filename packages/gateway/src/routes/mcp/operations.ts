import { type ApiOperation, type JsonSchema, objectSchema, stringSchema } from "@gw/core/openapi";
import { credentialBody, scopeParams } from "./credentials.ts";
import { createServerBody, listServersQuery, updateServerBody } from "./servers.ts";
import { toolParams, toolPolicyBody } from "./tools.ts";

const API = "/api/v1";
const MCP = "MCP Vault";

const server: JsonSchema = objectSchema({
  id: stringSchema("`mcp_…`"),
  object: { const: "mcp.server" },
  name: stringSchema(),
  url: stringSchema(),
  description: { type: ["string", "null"] },
  created_at: { type: "integer", description: "Unix seconds" },
});

const credential: JsonSchema = objectSchema(
  {
    scope: { enum: ["shared", "me"] },
    type: { enum: ["bearer", "header"] },
    name: stringSchema("The header's name (for `header`); never its value"),
    created_at: { type: "integer" },
    last_used_at: { type: ["integer", "null"] },
  },
  { optional: ["name"] },
);

const tool: JsonSchema = objectSchema({
  name: stringSchema(),
  description: { type: ["string", "null"] },
  read_only_hint: { type: "boolean" },
  required_role: { enum: ["reader", "writer", "owner", null] },
  disabled: { type: "boolean" },
  offered: { type: "boolean" },
});

const list = (items: JsonSchema): JsonSchema =>
  objectSchema({ object: { const: "list" }, data: { type: "array", items } }, { open: true });

/** The MCP gateway's operations (docs/api/mcp.md), for the OpenAPI document. */
export const MCP_OPERATIONS: ApiOperation[] = [
  {
    method: "POST",
    path: `${API}/mcp/servers`,
    operationId: "createMcpServer",
    summary: "Register an MCP server; the principal becomes its owner",
    description:
      "`url` must be https and resolve only to public addresses (422 at body.url saying why; `MCP_ALLOW_PRIVATE_UPSTREAMS` lifts both rules).",
    tag: MCP,
    permission: "mcp:write",
    body: createServerBody,
    responses: { 201: { description: "Registered", schema: server } },
  },
  {
    method: "GET",
    path: `${API}/mcp/servers`,
    operationId: "listMcpServers",
    summary: "The MCP servers the principal may read, in order of id",
    tag: MCP,
    permission: "mcp:read",
    query: listServersQuery,
    responses: { 200: { description: "A page", schema: list(server) } },
  },
  {
    method: "GET",
    path: `${API}/mcp/servers/:id`,
    operationId: "getMcpServer",
    summary: "One MCP server (reader); 404 without the reader role",
    tag: MCP,
    permission: "mcp:read",
    responses: { 200: { description: "The server", schema: server } },
    errors: ["not_found"],
  },
  {
    method: "PATCH",
    path: `${API}/mcp/servers/:id`,
    operationId: "updateMcpServer",
    summary: "Change an MCP server (writer); a new origin drops its credentials",
    tag: MCP,
    permission: "mcp:write",
    body: updateServerBody,
    responses: { 200: { description: "The server as it is now", schema: server } },
    errors: ["not_found"],
  },
  {
    method: "DELETE",
    path: `${API}/mcp/servers/:id`,
    operationId: "deleteMcpServer",
    summary: "Delete an MCP server (owner), its relationships, tool policies and credentials",
    tag: MCP,
    permission: "mcp:write",
    responses: {
      200: {
        description: "Deleted",
        schema: objectSchema({
          id: stringSchema(),
          object: { const: "mcp.server.deleted" },
          deleted: { const: true },
        }),
      },
    },
    errors: ["not_found"],
  },
  {
    method: "GET",
    path: `${API}/mcp/servers/:id/tools`,
    operationId: "listMcpTools",
    summary: "Each tool of an MCP server with the role it needs (owner)",
    tag: MCP,
    permission: "mcp:read",
    responses: { 200: { description: "The tools", schema: list(tool) } },
    errors: ["not_found"],
  },
  {
    method: "PUT",
    path: `${API}/mcp/servers/:id/tools/:tool_name`,
    operationId: "setMcpToolPolicy",
    summary: "Set the role a tool needs, or disable it (owner)",
    tag: MCP,
    permission: "mcp:write",
    params: toolParams,
    body: toolPolicyBody,
    responses: { 200: { description: "The tool", schema: tool } },
    errors: ["not_found"],
  },
  {
    method: "GET",
    path: `${API}/mcp/servers/:id/credentials`,
    operationId: "listMcpCredentials",
    summary: "The shared credential and the principal's own: never a secret",
    tag: MCP,
    permission: "mcp:read",
    responses: { 200: { description: "The credentials", schema: list(credential) } },
    errors: ["not_found"],
  },
  ...(["PUT", "GET", "DELETE"] as const).map(
    (method): ApiOperation => ({
      method,
      path: `${API}/mcp/servers/:id/credentials/:scope`,
      operationId: `${method.toLowerCase()}McpCredential`,
      summary:
        method === "PUT"
          ? "Store a credential: `shared` (owner) or `me` (the principal's own; reader)"
          : method === "GET"
            ? "One credential, never its secret"
            : "Delete a credential",
      tag: MCP,
      permission: method === "GET" ? "mcp:read" : "mcp:write",
      params: scopeParams,
      ...(method === "PUT" ? { body: credentialBody } : {}),
      responses:
        method === "DELETE"
          ? { 204: { description: "Deleted" } }
          : { 200: { description: "The credential", schema: credential } },
      errors: ["not_found"],
    }),
  ),
  {
    method: "POST",
    path: `${API}/mcp/servers/:id/mcp`,
    operationId: "mcpProxy",
    summary:
      "Streamable HTTP MCP endpoint in front of the server (JSON-RPC; protocol 2025-06-18, 2025-11-25)",
    description:
      "An OAuth 2.1 protected resource: a JWT is accepted when its `aud` is this URL or the gateway's. `tools/list` lists only the tools the principal may call.",
    tag: MCP,
    permission: "mcp:call",
    body: { type: "object", description: "One JSON-RPC 2.0 message" },
    responses: {
      200: { description: "The JSON-RPC answer", schema: { type: "object" } },
      202: { description: "A notification, accepted" },
    },
    errors: ["not_found"],
  },
  ...(["GET", "DELETE"] as const).map(
    (method): ApiOperation => ({
      method,
      path: `${API}/mcp/servers/:id/mcp`,
      operationId: `mcpProxy${method === "GET" ? "Stream" : "EndSession"}`,
      summary: "Not offered: 405 (no SSE stream, no sessions to end)",
      tag: MCP,
      permission: "mcp:call",
      responses: { 405: { description: "Method Not Allowed" } },
    }),
  ),
  {
    method: "GET",
    path: "/.well-known/oauth-protected-resource/api/v1/mcp/servers/:id/mcp",
    operationId: "getMcpProtectedResourceMetadata",
    summary: "RFC 9728 metadata of an MCP proxy endpoint: the gateway is its authorization server",
    tag: MCP,
    auth: "none",
    responses: { 200: { description: "The metadata", schema: { type: "object" } } },
  },
];
