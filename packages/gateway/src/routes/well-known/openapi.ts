import type { Router } from "express";
import document from "../../generated/openapi.json" with { type: "json" };

/**
 * `GET /api/v1/openapi.json`: the OpenAPI 3.1 document of the whole API (the
 * gateway's routes and the service's it forwards), written by `pnpm openapi`.
 * Public and cacheable, like the JWKS: it holds no secret.
 */
export function registerOpenApiDocument(router: Router): void {
  const body = JSON.stringify(document);
  router.get("/api/v1/openapi.json", (_req, res) => {
    res.set("Cache-Control", "public, max-age=300");
    res.type("application/json").send(body);
  });
}
