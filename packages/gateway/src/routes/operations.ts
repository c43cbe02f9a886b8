import {
  type ApiOperation,
  type JsonSchema,
  jsonSchemaOf,
  objectSchema,
  stringSchema,
} from "@gw/core/openapi";
import { PERMISSIONS } from "@gw/core/permissions";
import { userIdSchema } from "@gw/core/principal";
import { z } from "zod";
import { onBehalfOfSchema } from "../api-keys/on-behalf-of.ts";
import {
  createApiKeySchema,
  endUserLimitsPatchSchema,
  limitsSchema,
  modelsSchema,
  updateApiKeySchema,
} from "../api-keys/schema.ts";
import { inspectUserResourcesQuery } from "./admin/inspect-user-resources.ts";
import { listApiKeysQuery } from "./admin/list-api-keys.ts";
import { orgAuditQuery } from "./admin/list-audit.ts";
import { exchangeTokenBody } from "./authentication/exchange-token.ts";
import { checkQuery } from "./authorization/check.ts";
import { listResourcesQuery } from "./authorization/list-resources.ts";
import { registerResourceBody } from "./authorization/register-resource.ts";
import { auditQuery } from "./authorization/resource-audit.ts";
import { resourcePathSchema } from "./authorization/resource-params.ts";
import { grantSchema, roleChangeSchema } from "./authorization/role-change.ts";
import { MCP_OPERATIONS } from "./mcp/operations.ts";

/**
 * What the gateway itself serves, for the OpenAPI document (`pnpm openapi`).
 * Request schemas are the routes' own zod schemas; a route added to `app.ts`
 * without a line here fails the route-coverage test.
 */

const API = "/api/v1";
const AUTHORIZATION = "Resource Authorization";
const API_KEYS = "API Key";

/** An expiry bound for the document only: the route's bound is `GRANT_MAX_TTL`, a setting. */
const DOCUMENTED_GRANT_MAX_TTL_SECONDS = 365 * 86_400;

const apiKeyView: JsonSchema = objectSchema(
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
    status: { enum: ["active", "revoked"] },
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

const auditPage: JsonSchema = objectSchema(
  {
    data: { type: "array", items: { type: "object", description: "One audit record" } },
    next_cursor: { type: ["string", "null"] },
  },
  { open: true },
);

const endUserLimits: JsonSchema = objectSchema({
  org: stringSchema(),
  endUser: {
    ...jsonSchemaOf(endUserLimitsPatchSchema, "output"),
    description: "The organization's default windows for each end user of its keys",
  },
});

const noContent = { 204: { description: "Done; no body" } };

/** Who holds which role on a resource: the owners' list and the administrators' read answer alike. */
const GRANTS_RESPONSE = {
  description: "The grants; `*` is everyone in the organization",
  schema: objectSchema({
    data: {
      type: "array",
      items: objectSchema(
        {
          userId: stringSchema(),
          role: stringSchema(),
          expiresAt: { type: "string", format: "date-time" },
        },
        { optional: ["expiresAt"] },
      ),
    },
  }),
};

export const GATEWAY_OPERATIONS: ApiOperation[] = [
  {
    method: "GET",
    path: "/.well-known/jwks.json",
    operationId: "getJwks",
    summary: "The public keys that verify the gateway's tokens",
    tag: "Authentication",
    auth: "none",
    responses: {
      200: {
        description: "A JSON Web Key Set",
        schema: objectSchema({ keys: { type: "array", items: { type: "object" } } }),
      },
    },
  },
  {
    method: "GET",
    path: "/.well-known/openid-configuration",
    operationId: "getOpenIdConfiguration",
    summary: "Discovery document: issuer, JWKS address, signing algorithms",
    tag: "Authentication",
    auth: "none",
    responses: { 200: { description: "OpenID Connect discovery metadata", schema: { type: "object" } } },
  },
  {
    method: "GET",
    path: `${API}/openapi.json`,
    operationId: "getOpenApiDocument",
    summary: "This document",
    tag: "API Description",
    auth: "none",
    responses: { 200: { description: "The OpenAPI 3.1 document of this API", schema: { type: "object" } } },
  },
  {
    method: "GET",
    path: `${API}/authentication/whoami`,
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
        }),
      },
    },
  },
  {
    method: "POST",
    path: `${API}/authentication/api-keys/exchange-token`,
    operationId: "exchangeToken",
    summary: "Exchange an API key for a short-lived JWT for one end user",
    description:
      "Only an API key can be exchanged, and never for more permissions than it has; `admin:api-keys` is never delegated.",
    tag: "Authentication",
    body: exchangeTokenBody,
    responses: {
      200: { description: "The token", schema: objectSchema({ token: stringSchema("A short-lived JWT") }) },
    },
  },
  {
    method: "POST",
    path: `${API}/authorization/llm/grant`,
    operationId: "grant",
    summary: "Grant a user a role on a resource",
    description:
      "Only an owner of the resource may grant (403 otherwise, for a resource never registered too); the user ends up with exactly this one role. `expiresAt` (RFC 3339) is for writer and reader grants, at most `GRANT_MAX_TTL` seconds ahead.",
    tag: AUTHORIZATION,
    permission: "authorization:write",
    body: grantSchema(DOCUMENTED_GRANT_MAX_TTL_SECONDS),
    responses: noContent,
    errors: ["conflict"],
  },
  {
    method: "POST",
    path: `${API}/authorization/llm/revoke`,
    operationId: "revoke",
    summary: "Revoke a user's role on a resource",
    description: "Only an owner may revoke; the last owner cannot be removed (409).",
    tag: AUTHORIZATION,
    permission: "authorization:write",
    body: roleChangeSchema,
    responses: noContent,
    errors: ["conflict"],
  },
  {
    method: "GET",
    path: `${API}/authorization/llm/check`,
    operationId: "check",
    summary: "Whether the principal holds a role on a resource",
    description: "Unknown resources are `false`. An owner passes writer and reader checks; a writer, reader.",
    tag: AUTHORIZATION,
    permission: "authorization:read",
    query: checkQuery,
    responses: {
      200: { description: "The decision", schema: objectSchema({ allowed: { type: "boolean" } }) },
    },
  },
  {
    method: "POST",
    path: `${API}/authorization/llm/resources`,
    operationId: "registerResource",
    summary: "Register a resource of another backend; the principal becomes its owner",
    description: "A resource registered before is 409, and so is a conversation or response id.",
    tag: AUTHORIZATION,
    permission: "authorization:write",
    body: registerResourceBody,
    responses: {
      201: {
        description: "Registered",
        schema: objectSchema({
          resourceType: stringSchema(),
          resourceId: stringSchema(),
          owner: stringSchema(),
        }),
      },
    },
    errors: ["conflict"],
  },
  {
    method: "GET",
    path: `${API}/authorization/llm/resources`,
    operationId: "listResources",
    summary: "The resources of a type the principal holds at least `role` on",
    description: "In order of id; follow `next_cursor` until it is null.",
    tag: AUTHORIZATION,
    permission: "authorization:read",
    query: listResourcesQuery,
    responses: {
      200: {
        description: "A page of resource ids",
        schema: objectSchema({
          data: { type: "array", items: objectSchema({ resourceId: stringSchema() }) },
          next_cursor: { type: ["string", "null"] },
        }),
      },
    },
  },
  {
    method: "DELETE",
    path: `${API}/authorization/llm/resources/:resourceType/:resourceId`,
    operationId: "deleteResource",
    summary: "Delete a registered resource's relationships",
    description: "Owners only. A conversation or response is 409: its own DELETE removes it.",
    tag: AUTHORIZATION,
    permission: "authorization:write",
    params: resourcePathSchema,
    responses: noContent,
    errors: ["conflict"],
  },
  {
    method: "GET",
    path: `${API}/authorization/llm/resources/:resourceType/:resourceId/grants`,
    operationId: "listGrants",
    summary: "Who holds which role on a resource (owners only)",
    tag: AUTHORIZATION,
    permission: "authorization:read",
    params: resourcePathSchema,
    responses: { 200: GRANTS_RESPONSE },
  },
  {
    method: "GET",
    path: `${API}/authorization/llm/resources/:resourceType/:resourceId/audit`,
    operationId: "listResourceAudit",
    summary: "A resource's audit trail, newest first (owners only)",
    tag: AUTHORIZATION,
    permission: "authorization:read",
    params: resourcePathSchema,
    query: auditQuery,
    responses: { 200: { description: "A page of audit records", schema: auditPage } },
  },
  {
    method: "POST",
    path: `${API}/admin/api-keys`,
    operationId: "createApiKey",
    summary: "Create an API key; the only answer that carries its secret",
    description: "`org` defaults to the admin key's own. Needs an API key, not a token.",
    tag: API_KEYS,
    permission: "admin:api-keys",
    body: createApiKeySchema.partial({ org: true }),
    responses: {
      201: {
        description: "The key, with its secret in `key`",
        schema: {
          allOf: [apiKeyView, objectSchema({ key: stringSchema("The secret, shown once") }, { open: true })],
        },
      },
    },
  },
  {
    method: "GET",
    path: `${API}/admin/api-keys`,
    operationId: "listApiKeys",
    summary: "The organization's API keys, oldest first, without secrets",
    tag: API_KEYS,
    permission: "admin:api-keys",
    query: listApiKeysQuery,
    responses: {
      200: {
        description: "The keys",
        schema: objectSchema({
          object: { type: "string", const: "list" },
          data: { type: "array", items: apiKeyView },
        }),
      },
    },
  },
  {
    method: "PATCH",
    path: `${API}/admin/api-keys/:id`,
    operationId: "updateApiKey",
    summary: "Change a key's name, permissions, limits (`null` removes a window) or expiry",
    tag: API_KEYS,
    permission: "admin:api-keys",
    body: updateApiKeySchema,
    responses: { 200: { description: "The key as it is now", schema: apiKeyView } },
    errors: ["not_found"],
  },
  {
    method: "DELETE",
    path: `${API}/admin/api-keys/:id`,
    operationId: "revokeApiKey",
    summary: "Revoke a key (its record stays, for audit)",
    tag: API_KEYS,
    permission: "admin:api-keys",
    responses: { 200: { description: "The revoked key", schema: apiKeyView } },
    errors: ["not_found"],
  },
  {
    method: "GET",
    path: `${API}/admin/end-user-limits`,
    operationId: "getEndUserLimits",
    summary: "The organization's default limits for each end user of its keys",
    tag: API_KEYS,
    permission: "admin:api-keys",
    responses: { 200: { description: "The defaults", schema: endUserLimits } },
  },
  {
    method: "PATCH",
    path: `${API}/admin/end-user-limits`,
    operationId: "updateEndUserLimits",
    summary: "Change the organization's default end-user limits (a number sets a window, `null` removes it)",
    tag: API_KEYS,
    permission: "admin:api-keys",
    body: endUserLimitsPatchSchema,
    responses: { 200: { description: "The defaults as they are now", schema: endUserLimits } },
  },
  {
    method: "GET",
    path: `${API}/admin/api-keys/:id/usage`,
    operationId: "getApiKeyUsage",
    summary: "Where every window of every unit of a key (and with `user`, of that end user) stands now",
    tag: API_KEYS,
    permission: "admin:api-keys",
    query: z.object({ user: z.string().max(256).optional() }),
    responses: {
      200: {
        description: "The key's windows; spend in dollars",
        schema: objectSchema(
          {
            id: stringSchema(),
            windows: {
              type: "array",
              items: objectSchema({
                scope: stringSchema(),
                unit: stringSchema(),
                window: stringSchema(),
                limit: { type: "number" },
                used: { type: "number" },
                remaining: { type: "number" },
                resetsInSeconds: { type: "integer" },
              }),
            },
          },
          { open: true },
        ),
      },
    },
    errors: ["not_found"],
  },
  {
    method: "GET",
    path: `${API}/admin/audit`,
    operationId: "listAudit",
    summary: "The organization's audit trail, newest first, narrowed by actor, resource, action and time",
    description: "Needs `admin:api-keys` or `admin:console`.",
    tag: API_KEYS,
    permission: "admin:api-keys",
    query: orgAuditQuery,
    responses: { 200: { description: "A page of audit records", schema: auditPage } },
  },
  {
    method: "GET",
    path: `${API}/admin/authorization/resources/:resourceType/:resourceId/grants`,
    operationId: "inspectGrants",
    summary:
      "Who holds which role on any resource of the organization (administrators; recorded as `inspect`)",
    tag: AUTHORIZATION,
    permission: "admin:console",
    params: resourcePathSchema,
    responses: { 200: GRANTS_RESPONSE },
  },
  {
    method: "GET",
    path: `${API}/admin/authorization/users/:userId/resources`,
    operationId: "inspectUserResources",
    summary: "What a user of the organization can read of a type (administrators; recorded as `inspect`)",
    tag: AUTHORIZATION,
    permission: "admin:console",
    params: z.object({ userId: userIdSchema }),
    query: inspectUserResourcesQuery,
    responses: {
      200: {
        description: "The resources, in order of id",
        schema: objectSchema({
          userId: stringSchema(),
          resourceType: stringSchema(),
          data: { type: "array", items: objectSchema({ resourceId: stringSchema() }) },
          has_more: { type: "boolean" },
        }),
      },
    },
  },
  ...MCP_OPERATIONS,
];
