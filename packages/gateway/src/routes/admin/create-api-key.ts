import type { Clock } from "@gw/core/clock";
import { defineRoute } from "@gw/core/http";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import { validate } from "@gw/core/validation";
import { createApiKeyBody, createApiKeySchema } from "../../api-keys/schema.ts";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import { type ApiKeyView, toView } from "../../api-keys/types.ts";
import { assertOwnOrg } from "./api-key-admin.ts";
import { apiKeyView, TAG } from "./schemas.ts";

/** The one response that ever carries the secret. */
export type CreateApiKeyResponse = ApiKeyView & { key: string };

/** `POST /api/v1/admin/api-keys` → 201. `org` defaults to the admin key's own. */
export const createApiKey = defineRoute({
  method: "POST",
  path: "/api/v1/admin/api-keys",
  operationId: "createApiKey",
  summary: "Create an API key; the only answer that carries its secret",
  description: "`org` defaults to the admin key's own. Needs an API key, not a token.",
  tag: TAG,
  permission: "admin:api-keys",
  body: createApiKeySchema.partial({ org: true }),
  // `org` is filled in from the principal before the body is validated.
  bodyValidation: { byHandler: true },
  responses: {
    201: {
      description: "The key, with its secret in `key`",
      schema: {
        allOf: [apiKeyView, objectSchema({ key: stringSchema("The secret, shown once") }, { open: true })],
      },
    },
  },
  handler: async ({ principal, body: raw, res }, deps: { store: ApiKeyStore; clock: Clock }) => {
    const withOrg =
      raw && typeof raw === "object" && !Array.isArray(raw) && !("org" in raw)
        ? { ...raw, org: principal.org }
        : raw;
    const input = validate("body", createApiKeyBody(deps.clock), withOrg);
    assertOwnOrg(res, input.org);
    const { record, secret } = await deps.store.create(input);
    const body: CreateApiKeyResponse = { ...toView(record, deps.clock.wall()), key: secret };
    res.status(201).json(body);
  },
});
