import { defineRoute } from "@gw/core/http";
import document from "../../generated/openapi.json" with { type: "json" };

const body = JSON.stringify(document);

/**
 * `GET /api/v1/openapi.json`: the OpenAPI 3.1 document of the whole API (the
 * gateway's routes and the service's it forwards), written by `pnpm openapi`.
 * Public and cacheable, like the JWKS: it holds no secret.
 */
export const openApiDocument = defineRoute({
  method: "GET",
  path: "/api/v1/openapi.json",
  operationId: "getOpenApiDocument",
  summary: "This document",
  tag: "API Description",
  auth: "none",
  responses: { 200: { description: "The OpenAPI 3.1 document of this API", schema: { type: "object" } } },
  handler: ({ res }, _deps: unknown) => {
    res.set("Cache-Control", "public, max-age=300");
    res.type("application/json").send(body);
  },
});
