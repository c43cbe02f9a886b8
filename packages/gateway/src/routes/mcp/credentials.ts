import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import type { CredentialView } from "@gw/core/mcp";
import { validate } from "@gw/core/validation";
import type { Response, Router } from "express";
import { z } from "zod";
import { serverFor } from "../../mcp/access.ts";
import type { McpDeps } from "../../mcp/deps.ts";

/** Headers the transport sets itself, or that would confuse the upstream's framing: never a credential's. */
const RESERVED_HEADERS = new Set([
  "accept",
  "connection",
  "content-length",
  "content-type",
  "cookie",
  "host",
  "last-event-id",
  "mcp-protocol-version",
  "mcp-session-id",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

const secret = z
  .string()
  .min(1)
  .max(8192)
  .regex(/^[\x20-\x7e]*$/, "String should contain only printable ASCII characters (a header value)");

export const credentialBody = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("bearer"), token: secret }),
  z.strictObject({
    type: z.literal("header"),
    name: z
      .string()
      .min(1)
      .max(128)
      .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, "String should be an HTTP header name")
      .refine((name) => !RESERVED_HEADERS.has(name.toLowerCase()), {
        message: "Value error, this header is set by the transport and cannot hold a credential",
      }),
    value: secret,
  }),
]);

export const scopeParams = z.object({ id: z.string(), scope: z.enum(["shared", "me"]) });

/**
 * The vault (docs/api/mcp.md): `shared` (owners; used for every caller with
 * no credential of their own) and `me` (the principal's own; any reader of
 * the server), all with `mcp:write` to change. Answers never hold a secret.
 */
export function registerMcpCredentialRoutes(router: Router, deps: McpDeps): void {
  const target = async (res: Response, params: unknown, changing: boolean) => {
    const { id, scope } = validate("path", scopeParams, params);
    const principal = principalOf(res);
    const role = scope === "shared" && changing ? "owner" : "reader";
    const server = await serverFor(deps, principal, id, role, "change its shared credential");
    return { principal, server, scope, user: scope === "shared" ? null : principal.user };
  };

  router.put("/mcp/servers/:id/credentials/:scope", requirePermission("mcp:write"), async (req, res) => {
    const { principal, server, user } = await target(res, req.params, true);
    const body = validate("body", credentialBody, req.body);
    const view: CredentialView = await deps.credentials.put(
      principal.org,
      { id: server.id, origin: new URL(server.url).origin },
      user,
      body,
    );
    res.json(view);
  });

  router.get("/mcp/servers/:id/credentials", requirePermission("mcp:read"), async (req, res) => {
    const principal = principalOf(res);
    const server = await serverFor(deps, principal, String(req.params.id), "reader");
    res.json({ object: "list", data: await deps.credentials.list(principal.org, server.id, principal.user) });
  });

  router.get("/mcp/servers/:id/credentials/:scope", requirePermission("mcp:read"), async (req, res) => {
    const { principal, server, user } = await target(res, req.params, false);
    const view = await deps.credentials.get(principal.org, server.id, user);
    if (!view) throw notFound("No credential is stored for this scope");
    res.json(view);
  });

  router.delete("/mcp/servers/:id/credentials/:scope", requirePermission("mcp:write"), async (req, res) => {
    const { principal, server, user } = await target(res, req.params, true);
    if (!(await deps.credentials.delete(principal.org, server.id, user)))
      throw notFound("No credential is stored for this scope");
    res.status(204).end();
  });
}
