import { ValidationFailed } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { UpstreamRefused, urlWithoutCredentials } from "@gw/core/mcp";
import { secretField } from "@gw/core/validation";
import { z } from "zod";
import { ok } from "../../http/schemas.ts";
import type { ProviderKeyStore } from "../store.ts";
import { type ProviderKeyRouteDeps, providerKeySchema, providerParams, TAG } from "./schemas.ts";

/** A provider's key goes in a header: printable ASCII, long enough that its last four characters give little away. */
const apiKey = secretField(
  z
    .string()
    .min(16)
    .max(4096)
    .regex(/^[\x21-\x7e]*$/, "String should contain only printable ASCII characters without spaces (a key)"),
);

export const providerKeyBody = z.strictObject({
  api_key: apiKey,
  base_url: z.string().min(1).max(2048).optional(),
});

/**
 * The organization's `base_url` in the form stored (no trailing slash), once
 * the upstream rules of MCP servers allow it (https, every address public,
 * no credentials, fragment or query); 422 at `["body","base_url"]` saying why.
 */
async function checkedBaseUrl(store: ProviderKeyStore, text: string): Promise<string> {
  const shown = urlWithoutCredentials(text);
  const refuse = (reason: string): never => {
    throw new ValidationFailed([
      {
        loc: ["body", "base_url"],
        msg: `Value error, ${reason}`,
        type: "value_error",
        ...(shown === undefined ? {} : { input: shown }),
      },
    ]);
  };
  if (shown !== text) refuse("the URL must not carry credentials: send the key as api_key");
  try {
    const url = await store.policy.check(text);
    if (url.search) refuse("the URL must not have a query");
    return url.href.replace(/\/+$/, "");
  } catch (err) {
    if (err instanceof UpstreamRefused) refuse(err.message);
    throw err;
  }
}

/**
 * `PUT /api/v1/providers/credentials/{provider}` (`admin:api-keys`): stores
 * the organization's own key for a provider, replacing the one it had (the
 * key and `base_url` together: a stored key is never sent to a new address
 * without being typed again). Audited; the answer never holds the key.
 */
export const putProviderKey = defineRoute({
  method: "PUT",
  path: "/api/v1/providers/credentials/:provider",
  operationId: "putProviderCredential",
  summary: "Store the organization's own key for a provider (never shown again)",
  description:
    "An API key's (a gateway token is 403). Deployments marked `byok: true` of this provider use it for the organization's calls. `base_url` (optional) replaces the deployment's; it must be https and resolve only to public addresses (422 at body.base_url saying why; `BYOK_ALLOW_PRIVATE_BASE_URLS` lifts both rules).",
  tag: TAG,
  permission: "admin:api-keys",
  params: providerParams,
  body: providerKeyBody,
  responses: ok("The stored key, as it is shown: its last four characters", providerKeySchema),
  handler: async ({ principal, params, body, req }, deps: ProviderKeyRouteDeps) => {
    const baseUrl =
      body.base_url === undefined ? null : await checkedBaseUrl(deps.providerKeys, body.base_url);
    return deps.providerKeys.put({ principal, requestId: String(req.id) }, params.provider, {
      apiKey: body.api_key,
      baseUrl,
    });
  },
});
