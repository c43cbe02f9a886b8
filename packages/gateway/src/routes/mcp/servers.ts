import { randomBytes } from "node:crypto";
import { ValidationFailed } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { MCP_SERVER_ID, type McpServer, UpstreamRefused, urlWithoutCredentials } from "@gw/core/mcp";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import { storableText, validate } from "@gw/core/validation";
import { z } from "zod";
import { audited, measured } from "../../audit/audited.ts";
import { serverFor, UnknownServer } from "../../mcp/access.ts";
import type { McpDeps } from "../../mcp/deps.ts";
import { list, server as serverSchema, TAG } from "./schemas.ts";

// Stored as PostgreSQL text, which cannot hold U+0000.
const nameSchema = storableText(z.string().min(1).max(128));
const urlSchema = z.string().min(1).max(2048);
const descriptionSchema = storableText(z.string().max(1024)).nullable();

export const createServerBody = z.strictObject({
  name: nameSchema,
  url: urlSchema,
  description: descriptionSchema.optional(),
});

export const updateServerBody = z.strictObject({
  name: nameSchema.optional(),
  url: urlSchema.optional(),
  description: descriptionSchema.optional(),
});

export const listServersQuery = z.object({
  limit: z
    .preprocess(
      (v) => (typeof v === "string" && /^[+-]?\d{1,9}$/.test(v) ? Number(v) : v),
      z.int().min(1).max(100),
    )
    .default(20),
  after: z.string().regex(MCP_SERVER_ID, "String should be an MCP server id (mcp_…)").optional(),
});

export interface ServerList {
  object: "list";
  data: McpServer[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

/** 422 at `["body","url"]` saying why the upstream is refused (no SSRF), never showing a password the URL holds. */
async function checkedUrl(deps: McpDeps, url: string): Promise<string> {
  try {
    return (await deps.policy.check(url)).href;
  } catch (err) {
    if (!(err instanceof UpstreamRefused)) throw err;
    const shown = urlWithoutCredentials(url);
    throw new ValidationFailed([
      {
        loc: ["body", "url"],
        msg: `Value error, ${err.message}`,
        type: "value_error",
        ...(shown !== undefined ? { input: shown } : {}),
      },
    ]);
  }
}

/**
 * The registered MCP servers (docs/api/mcp.md): register (the principal
 * becomes owner), list what the principal may read, read (reader), change
 * (writer), delete (owner: its relationships, tool policies and credentials
 * go with it). A server the principal may not read is 404, as an unknown id.
 */
export const createServer = defineRoute({
  method: "POST",
  path: "/api/v1/mcp/servers",
  operationId: "createMcpServer",
  summary: "Register an MCP server; the principal becomes its owner",
  description:
    "`url` must be https and resolve only to public addresses (422 at body.url saying why; `MCP_ALLOW_PRIVATE_UPSTREAMS` lifts both rules).",
  tag: TAG,
  permission: "mcp:write",
  body: createServerBody,
  responses: { 201: { description: "Registered", schema: serverSchema } },
  handler: async ({ principal, body, req, res }, deps: McpDeps) => {
    const url = await checkedUrl(deps, body.url);
    const id = `mcp_${randomBytes(12).toString("hex")}`;
    const ref = { type: "mcp_server" as const, id };
    await audited(deps, { principal, requestId: req.id }, { action: "register", resource: ref }, () =>
      deps.authorization.createOwnership(principal, ref),
    );
    let server: McpServer;
    try {
      server = await deps.servers.create(principal.org, {
        id,
        name: body.name,
        url,
        description: body.description ?? null,
      });
    } catch (err) {
      // Not kept: the owner relationship goes too, so no half-registered server remains.
      await deps.authorization.deleteResource(principal, ref).catch(() => undefined);
      throw err;
    }
    res.status(201).json(server);
  },
});

export const listServers = defineRoute({
  method: "GET",
  path: "/api/v1/mcp/servers",
  operationId: "listMcpServers",
  summary: "The MCP servers the principal may read, in order of id",
  tag: TAG,
  permission: "mcp:read",
  query: listServersQuery,
  responses: { 200: { description: "A page", schema: list(serverSchema) } },
  handler: async ({ principal, query: { limit, after } }, deps: McpDeps) => {
    const page = await measured(deps.metrics, "lookup", () =>
      deps.authorization.lookup(principal, "mcp_server", "reader", { limit, after }),
    );
    const data = await deps.servers.getMany(principal.org, page.resourceIds);
    const body: ServerList = {
      object: "list",
      data,
      first_id: data[0]?.id ?? null,
      last_id: page.resourceIds.at(-1) ?? null,
      has_more: page.more,
    };
    return body;
  },
});

export const getServer = defineRoute({
  method: "GET",
  path: "/api/v1/mcp/servers/:id",
  operationId: "getMcpServer",
  summary: "One MCP server (reader); 404 without the reader role",
  tag: TAG,
  permission: "mcp:read",
  responses: { 200: { description: "The server", schema: serverSchema } },
  errors: ["not_found"],
  handler: ({ principal, params }, deps: McpDeps) => serverFor(deps, principal, String(params.id), "reader"),
});

export const updateServer = defineRoute({
  method: "PATCH",
  path: "/api/v1/mcp/servers/:id",
  operationId: "updateMcpServer",
  summary: "Change an MCP server (writer); a new origin drops its credentials",
  tag: TAG,
  permission: "mcp:write",
  body: updateServerBody,
  // Validated once the writer role is known: who may not change the server learns nothing from a 422.
  bodyValidation: { byHandler: true },
  responses: { 200: { description: "The server as it is now", schema: serverSchema } },
  errors: ["not_found"],
  handler: async ({ principal, params, body: raw }, deps: McpDeps) => {
    const server = await serverFor(deps, principal, String(params.id), "writer", "change it");
    const body = validate("body", updateServerBody, raw);
    const url = body.url === undefined ? undefined : await checkedUrl(deps, body.url);
    const originChanged = url !== undefined && new URL(url).origin !== new URL(server.url).origin;
    const updated = await deps.servers.update(
      principal.org,
      server.id,
      {
        ...(body.name !== undefined ? { name: body.name } : {}),
        ...(url !== undefined ? { url } : {}),
        ...(body.description !== undefined ? { description: body.description } : {}),
      },
      originChanged,
    );
    if (!updated) throw new UnknownServer();
    if (url !== undefined && url !== server.url) await deps.upstreams.forgetServer(server.id);
    return updated;
  },
});

export const deleteServer = defineRoute({
  method: "DELETE",
  path: "/api/v1/mcp/servers/:id",
  operationId: "deleteMcpServer",
  summary: "Delete an MCP server (owner), its relationships, tool policies and credentials",
  tag: TAG,
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
  handler: async ({ principal, params, req }, deps: McpDeps) => {
    const server = await serverFor(deps, principal, String(params.id), "owner", "delete it");
    const ref = { type: "mcp_server" as const, id: server.id };
    await audited(deps, { principal, requestId: req.id }, { action: "delete", resource: ref }, () =>
      deps.authorization.deleteResource(principal, ref),
    );
    await deps.tools.forgetServer(principal.org, server.id);
    await deps.servers.delete(principal.org, server.id);
    await deps.upstreams.forgetServer(server.id);
    return { id: server.id, object: "mcp.server.deleted", deleted: true };
  },
});
