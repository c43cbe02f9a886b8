import { describe, expect, it } from "vitest";
import { useStack } from "./stack.ts";

/**
 * The OpenAPI document the gateway serves lists every endpoint of the stack
 * (the gateway's own and the service's it forwards), and nothing else.
 * Probes and `/metrics` are for operators, not API clients.
 */
const OPERATOR_PATHS = ["/healthz", "/readyz", "/metrics"];

describe("the OpenAPI document", () => {
  const stack = useStack();

  const served = async () => {
    const res = await fetch(`${stack.gatewayUrl}/api/v1/openapi.json`);
    return { res, document: (await res.json()) as { openapi: string; paths: Record<string, object> } };
  };

  it("is served at /api/v1/openapi.json without a credential, cacheable, as JSON", async () => {
    const { res, document } = await served();
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.headers.get("cache-control")).toBe("public, max-age=300");
    expect(document.openapi).toBe("3.1.0");
  });

  it("answers the same to a request with a bad credential: it is never authenticated", async () => {
    const res = await fetch(`${stack.gatewayUrl}/api/v1/openapi.json`, {
      headers: { authorization: "Bearer gwsk_not-a-key" },
    });
    expect(res.status).toBe(200);
  });

  it("lists every route the gateway and the service register, and no route that is not", async () => {
    const { document } = await served();
    const documented = Object.entries(document.paths)
      .flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`))
      .sort();
    const registered = [
      // The admin console's pages (`/admin/…`) are HTML for browsers, not API: it calls the routes listed here.
      // The OAuth authorization server's endpoints (`/oauth/…`: sign-in and consent pages, and the token,
      // registration and revocation endpoints of RFC 6749, 7591 and 7009) are described by its RFC 8414
      // metadata, which is listed here, as OAuth clients read them.
      ...stack.gatewayRoutes.filter(
        (r) =>
          !OPERATOR_PATHS.includes(r.path) && !r.path.startsWith("/admin/") && !r.path.startsWith("/oauth/"),
      ),
      ...stack.serviceRoutes.filter((r) => r.path.startsWith("/api/v1/")),
    ]
      .map((r) => `${r.method} ${r.path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, "{$1}")}`)
      .sort();
    expect(registered).toContain("POST /api/v1/sandbox/sessions/{session_id}/github/push");
    expect(registered).toContain("GET /api/v1/openapi.json");
    expect(
      documented,
      "every route needs its declaration (the service: its feature's routes/, listed in src/routes.ts; the gateway: src/routes/, listed in src/routes/index.ts), then `pnpm openapi`",
    ).toEqual(registered);
  });
});
