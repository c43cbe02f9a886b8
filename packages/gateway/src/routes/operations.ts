import { operationsOf } from "@gw/core/http";
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
import { authenticationRoutes } from "./authentication/index.ts";
import { authorizationRoutes } from "./authorization/index.ts";
import { GRANTS_RESPONSE } from "./authorization/list-grants.ts";
import { auditPage } from "./authorization/resource-audit.ts";
import { resourcePathSchema } from "./authorization/resource-params.ts";
import { MCP_OPERATIONS } from "./mcp/operations.ts";

/**
 * What the gateway itself serves, for the OpenAPI document (`pnpm openapi`):
 * the declared routes' operations (`authentication/`, `authorization/`), and
 * below the ones of routes not yet declared so. Request schemas are the
 * routes' own zod schemas; a route added to `app.ts` without its operation
 * fails the route-coverage test.
 */

const API = "/api/v1";
const AUTHORIZATION = "Resource Authorization";
const API_KEYS = "API Key";

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

const endUserLimits: JsonSchema = objectSchema({
  org: stringSchema(),
  endUser: {
    ...jsonSchemaOf(endUserLimitsPatchSchema, "output"),
    description: "The organization's default windows for each end user of its keys",
  },
});

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
  ...operationsOf([...authenticationRoutes, ...authorizationRoutes]),
  ...MCP_OPERATIONS,
];
