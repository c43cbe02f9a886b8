import { defineRoute } from "@gw/core/http";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import { PERMISSIONS } from "@gw/core/permissions";
import type { Principal } from "@gw/core/principal";

export type WhoamiResponse = Principal & { actsAsKeyOwner: boolean };

/** `GET /api/v1/authentication/whoami`: the principal this request acts as (no secrets). Any valid credential may ask. */
export const whoami = defineRoute({
  method: "GET",
  path: "/api/v1/authentication/whoami",
  operationId: "whoami",
  summary: "The principal this request acts as",
  tag: "Authentication",
  responses: {
    200: {
      description: "The principal; never a secret",
      schema: objectSchema({
        org: stringSchema(),
        user: stringSchema("The end user from X-On-Behalf-Of, else the key's owner"),
        keyId: stringSchema(),
        permissions: { type: "array", items: { enum: [...PERMISSIONS] } },
        credential: { enum: ["api_key", "jwt"] },
        onBehalfOf: { type: "boolean" },
        endUser: {
          type: "boolean",
          description:
            "Whether the user is not the key's owner: an end user sees only its own usage and eval schedules, unless the key has organization:read",
        },
        actsAsKeyOwner: {
          type: "boolean",
          description:
            "Whether the user owns another API key of the organization, acted for only because this key's onBehalfOf names them in users (each such request is audited as act_as_key_owner)",
        },
      }),
    },
  },
  handler: ({ principal, res }, _deps: unknown): WhoamiResponse => ({
    ...principal,
    actsAsKeyOwner: res.locals.actsAsKeyOwner === true,
  }),
});
