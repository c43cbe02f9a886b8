import { randomBytes } from "node:crypto";
import { ValidationFailed } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import { type McpServer, UpstreamRefused } from "@gw/core/mcp";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import { audited, measured } from "../../audit/audited.ts";
import { SERVER_ID, serverFor, UnknownServer } from "../../mcp/access.ts";
import type { McpDeps } from "../../mcp/deps.ts";

const nameSchema = z.string().min(1).max(128);
const urlSchema = z.string().min(1).max(2048);
const descriptionSchema = z.string().max(1024).nullable();

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
  after: z.string().regex(SERVER_ID, "String should be an MCP server id (mcp_…)").optional(),
});

export interface ServerList {
  object: "list";
  data: McpServer[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

/** 422 at `["body","url"]` saying why the upstream is refused (no SSRF). */
async function checkedUrl(deps: McpDeps, url: string): Promise<string> {
  try {
    return (await deps.policy.check(url)).href;
  } catch (err) {
    if (!(err instanceof UpstreamRefused)) throw err;
    throw new ValidationFailed([
      { loc: ["body", "url"], msg: `Value error, ${err.message}`, type: "value_error", input: url },
    ]);
  }
}

/**
 * The registered MCP servers (docs/api/mcp.md): register (the principal
 * becomes owner), list what the principal may read, read (reader), change
 * (writer), delete (owner: its relationships, tool policies and credentials
 * go with it). A server the principal may not read is 404, as an unknown id.
 */
export function registerMcpServerRoutes(router: Router, deps: McpDeps): void {
  router.post("/mcp/servers", requirePermission("mcp:write"), async (req, res) => {
    const body = validate("body", createServerBody, req.body);
    const url = await checkedUrl(deps, body.url);
    const principal = principalOf(res);
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
  });

  router.get("/mcp/servers", requirePermission("mcp:read"), async (req, res) => {
    const { limit, after } = validate("query", listServersQuery, req.query);
    const principal = principalOf(res);
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
    res.json(body);
  });

  router.get("/mcp/servers/:id", requirePermission("mcp:read"), async (req, res) => {
    res.json(await serverFor(deps, principalOf(res), String(req.params.id), "reader"));
  });

  router.patch("/mcp/servers/:id", requirePermission("mcp:write"), async (req, res) => {
    const principal = principalOf(res);
    const server = await serverFor(deps, principal, String(req.params.id), "writer", "change it");
    const body = validate("body", updateServerBody, req.body);
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
    res.json(updated);
  });

  router.delete("/mcp/servers/:id", requirePermission("mcp:write"), async (req, res) => {
    const principal = principalOf(res);
    const server = await serverFor(deps, principal, String(req.params.id), "owner", "delete it");
    const ref = { type: "mcp_server" as const, id: server.id };
    await audited(deps, { principal, requestId: req.id }, { action: "delete", resource: ref }, () =>
      deps.authorization.deleteResource(principal, ref),
    );
    await deps.tools.forgetServer(principal.org, server.id);
    await deps.servers.delete(principal.org, server.id);
    await deps.upstreams.forgetServer(server.id);
    res.json({ id: server.id, object: "mcp.server.deleted", deleted: true });
  });
}
