import type { Clock } from "@gw/core/clock";
import { notFound, ValidationFailed } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { MCP_CALL } from "@gw/core/mcp";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import { secretField, storableText } from "@gw/core/validation";
import { z } from "zod";
import type { ApiKeyLookup } from "../../api-keys/lookup.ts";
import { keyUsable } from "../../api-keys/types.ts";
import type { IdentityProviders, IdentityProviderView } from "../../oauth/identity-providers.ts";
import { type OidcRelyingParty, OidcSignInFailed } from "../../oauth/oidc.ts";
import { TAG } from "./schemas.ts";

const PATH = "/api/v1/admin/mcp-oauth/identity-provider";

const body = z.strictObject({
  issuer: z.url({ protocol: /^https?$/ }).max(2_000),
  client_id: storableText(z.string().min(1).max(1_000)),
  client_secret: secretField(z.string().min(1).max(4_096)),
  key_id: storableText(z.string().min(1).max(128)),
});

const providerView = objectSchema({
  object: { type: "string", const: "mcp_oauth.identity_provider" },
  issuer: stringSchema("The provider's issuer"),
  client_id: stringSchema("The gateway's client id at the provider"),
  client_secret_last4: stringSchema("The last 4 characters of the client secret (it is never shown)"),
  key_id: stringSchema("The organization's API key the signed-in end users act through"),
  created_at: { type: "integer" },
  updated_at: { type: "integer" },
});

type Deps = {
  oauth?: { identityProviders?: IdentityProviders; oidc?: OidcRelyingParty };
  keys: Pick<ApiKeyLookup, "findById">;
  clock: Clock;
};

const providersOf = (deps: Deps) => {
  const providers = deps.oauth?.identityProviders;
  const oidc = deps.oauth?.oidc;
  if (!providers || !oidc) throw new Error("The OAuth authorization server is not configured");
  return { providers, oidc };
};

const invalid = (field: string, msg: string) =>
  new ValidationFailed([{ loc: ["body", field], msg, type: "value_error" }]);

/**
 * `PUT /api/v1/admin/mcp-oauth/identity-provider`: the organization's own
 * OpenID Connect provider, where its end users sign in when an MCP client asks
 * for one of its servers (docs/api/mcp-oauth.md). The provider's discovery
 * document and keys are fetched before it is stored; the secret is sealed.
 */
export const putMcpOAuthIdentityProvider = defineRoute({
  method: "PUT",
  path: PATH,
  operationId: "putMcpOAuthIdentityProvider",
  summary: "Name the organization's OpenID Connect provider for MCP clients' sign-in",
  tag: TAG,
  permission: "admin:api-keys",
  body,
  responses: { 200: { description: "The provider (never its secret)", schema: providerView } },
  handler: async ({ principal, body: input, req }, deps: Deps): Promise<IdentityProviderView> => {
    const { providers, oidc } = providersOf(deps);
    const key = await deps.keys.findById(input.key_id);
    if (!key || key.org !== principal.org)
      throw invalid("key_id", "No API key of this organization has this id");
    if (!keyUsable(key, deps.clock.wall()) || !key.permissions.includes(MCP_CALL))
      throw invalid("key_id", `The API key must be usable and hold ${MCP_CALL}`);
    try {
      await oidc.discover(input.issuer, true);
    } catch (err) {
      if (err instanceof OidcSignInFailed) throw invalid("issuer", err.message);
      throw err;
    }
    return providers.put(
      { principal, requestId: req.id },
      { issuer: input.issuer, clientId: input.client_id, clientSecret: input.client_secret, keyId: key.id },
    );
  },
});

export const getMcpOAuthIdentityProvider = defineRoute({
  method: "GET",
  path: PATH,
  operationId: "getMcpOAuthIdentityProvider",
  summary: "The organization's OpenID Connect provider for MCP clients' sign-in (never its secret)",
  tag: TAG,
  permission: "admin:api-keys",
  responses: { 200: { description: "The provider", schema: providerView } },
  errors: ["not_found"],
  handler: async ({ principal }, deps: Deps): Promise<IdentityProviderView> => {
    const view = await providersOf(deps).providers.get(principal.org);
    if (!view) throw notFound("The organization names no OpenID Connect provider");
    return view;
  },
});

export const deleteMcpOAuthIdentityProvider = defineRoute({
  method: "DELETE",
  path: PATH,
  operationId: "deleteMcpOAuthIdentityProvider",
  summary: "Forget the organization's OpenID Connect provider (sign-in falls back to an API key)",
  tag: TAG,
  permission: "admin:api-keys",
  responses: { 204: { description: "Deleted" } },
  errors: ["not_found"],
  handler: async ({ principal, req, res }, deps: Deps) => {
    if (!(await providersOf(deps).providers.delete({ principal, requestId: req.id })))
      throw notFound("The organization names no OpenID Connect provider");
    res.status(204).end();
  },
});
