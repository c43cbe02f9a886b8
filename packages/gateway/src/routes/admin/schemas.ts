import { onBehalfOfSchema } from "@gw/core/on-behalf-of";
import { type JsonSchema, jsonSchemaOf, objectSchema, stringSchema } from "@gw/core/openapi";
import { PERMISSIONS } from "@gw/core/permissions";
import {
  cacheModeSchema,
  endUserLimitsPatchSchema,
  limitsSchema,
  modelsSchema,
} from "../../api-keys/schema.ts";

export const TAG = "API Key";

/** An API key as the OpenAPI document shows it: never its secret. */
export const apiKeyView: JsonSchema = objectSchema(
  {
    id: stringSchema(),
    org: stringSchema(),
    owner: stringSchema(),
    name: { type: ["string", "null"] },
    permissions: { type: "array", items: { enum: [...PERMISSIONS] } },
    limits: {
      ...jsonSchemaOf(limitsSchema, "output"),
      description:
        "Request windows, `tokens`, `spend` (dollars) and `endUser`; a window left out is not limited",
    },
    models: { anyOf: [jsonSchemaOf(modelsSchema, "output"), { type: "null" }] },
    onBehalfOf: jsonSchemaOf(onBehalfOfSchema, "output"),
    cache: {
      ...jsonSchemaOf(cacheModeSchema, "output"),
      description: "Its response cache: `off`, `principal` or `key` (docs/api/cache.md)",
    },
    status: {
      enum: ["active", "expired", "revoked"],
      description:
        "`expired`: past `expiresAt`, refused as such until its expiry is moved; `revoked` is final",
    },
    createdAt: { type: "string", format: "date-time" },
    expiresAt: { type: ["string", "null"], format: "date-time" },
    revokedAt: { type: ["string", "null"], format: "date-time" },
    start: stringSchema("The secret's first characters, to recognise it"),
    lastUsedAt: {
      type: ["string", "null"],
      format: "date-time",
      description: "When it last authenticated a request, to the minute (in lists only)",
    },
  },
  { open: true, optional: ["lastUsedAt"] },
);

export const endUserLimits: JsonSchema = objectSchema({
  org: stringSchema(),
  endUser: {
    ...jsonSchemaOf(endUserLimitsPatchSchema, "output"),
    description: "The organization's default windows for each end user of its keys",
  },
});
