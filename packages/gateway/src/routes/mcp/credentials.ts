import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import type { CredentialView } from "@gw/core/mcp";
import type { Principal } from "@gw/core/principal";
import { secretField, validate } from "@gw/core/validation";
import { z } from "zod";
import { serverFor } from "../../mcp/access.ts";
import type { McpDeps } from "../../mcp/deps.ts";
import { credential, list, TAG } from "./schemas.ts";

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

const secret = secretField(
  z
    .string()
    .min(1)
    .max(8192)
    .regex(/^[\x20-\x7e]*$/, "String should contain only printable ASCII characters (a header value)"),
);

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
/** The server and whose credential a `…/credentials/{scope}` request is about; `shared` needs the owner to change. */
async function target(
  deps: McpDeps,
  principal: Principal,
  { id, scope }: z.output<typeof scopeParams>,
  changing: boolean,
) {
  const role = scope === "shared" && changing ? "owner" : "reader";
  const server = await serverFor(deps, principal, id, role, "change its shared credential");
  return { server, user: scope === "shared" ? null : principal.user };
}

export const putCredential = defineRoute({
  method: "PUT",
  path: "/api/v1/mcp/servers/:id/credentials/:scope",
  operationId: "putMcpCredential",
  summary: "Store a credential: `shared` (owner) or `me` (the principal's own; reader)",
  tag: TAG,
  permission: "mcp:write",
  params: scopeParams,
  body: credentialBody,
  // Validated once the role is known.
  bodyValidation: { byHandler: true },
  responses: { 200: { description: "The credential", schema: credential } },
  errors: ["not_found"],
  handler: async ({ principal, params, body: raw }, deps: McpDeps) => {
    const { server, user } = await target(deps, principal, params, true);
    const body = validate("body", credentialBody, raw);
    const view: CredentialView = await deps.credentials.put(
      principal.org,
      { id: server.id, origin: new URL(server.url).origin },
      user,
      body,
    );
    return view;
  },
});

export const listCredentials = defineRoute({
  method: "GET",
  path: "/api/v1/mcp/servers/:id/credentials",
  operationId: "listMcpCredentials",
  summary: "The shared credential and the principal's own: never a secret",
  tag: TAG,
  permission: "mcp:read",
  responses: { 200: { description: "The credentials", schema: list(credential) } },
  errors: ["not_found"],
  handler: async ({ principal, params }, deps: McpDeps) => {
    const server = await serverFor(deps, principal, String(params.id), "reader");
    return { object: "list", data: await deps.credentials.list(principal.org, server.id, principal.user) };
  },
});

export const getCredential = defineRoute({
  method: "GET",
  path: "/api/v1/mcp/servers/:id/credentials/:scope",
  operationId: "getMcpCredential",
  summary: "One credential, never its secret",
  tag: TAG,
  permission: "mcp:read",
  params: scopeParams,
  responses: { 200: { description: "The credential", schema: credential } },
  errors: ["not_found"],
  handler: async ({ principal, params }, deps: McpDeps) => {
    const { server, user } = await target(deps, principal, params, false);
    const view = await deps.credentials.get(principal.org, server.id, user);
    if (!view) throw notFound("No credential is stored for this scope");
    return view;
  },
});

export const deleteCredential = defineRoute({
  method: "DELETE",
  path: "/api/v1/mcp/servers/:id/credentials/:scope",
  operationId: "deleteMcpCredential",
  summary: "Delete a credential",
  tag: TAG,
  permission: "mcp:write",
  params: scopeParams,
  responses: { 204: { description: "Deleted" } },
  errors: ["not_found"],
  handler: async ({ principal, params, res }, deps: McpDeps) => {
    const { server, user } = await target(deps, principal, params, true);
    if (!(await deps.credentials.delete(principal.org, server.id, user)))
      throw notFound("No credential is stored for this scope");
    res.status(204).end();
  },
});
