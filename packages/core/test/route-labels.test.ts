import express, { Router } from "express";
import { describe, expect, it } from "vitest";
import { RouteLabels, routesOf } from "../src/http/route-labels.ts";

function app() {
  const app = express();
  const api = Router();
  api.use((_req, _res, next) => next()); // middleware: not an endpoint
  api.get("/items", (_req, res) => res.end());
  api.get("/items/:id", (_req, res) => res.end());
  api.delete("/items/:id", (_req, res) => res.end());
  api.post("/items/:id/parts/:part", (_req, res) => res.end());
  api.get("/items/special", (_req, res) => res.end());
  app.get("/healthz", (_req, res) => res.end());
  app.use("/api/v1", api);
  return app;
}

describe("route labels", () => {
  it("list every endpoint of an app with its mount path, HEAD left to GET", () => {
    expect(routesOf(app())).toEqual([
      { method: "GET", path: "/healthz" },
      { method: "GET", path: "/api/v1/items" },
      { method: "GET", path: "/api/v1/items/:id" },
      { method: "DELETE", path: "/api/v1/items/:id" },
      { method: "POST", path: "/api/v1/items/:id/parts/:part" },
      { method: "GET", path: "/api/v1/items/special" },
    ]);
  });

  it("name a request by its endpoint's template, whatever the ids, query, case or trailing slash", () => {
    const labels = new RouteLabels([...routesOf(app()), { method: "POST", path: "/api/v1/llm/responses" }]);
    expect(labels.label("GET", "/api/v1/items/it_42?expand=all")).toBe("/api/v1/items/:id");
    expect(labels.label("HEAD", "/api/v1/items/it_42")).toBe("/api/v1/items/:id");
    expect(labels.label("DELETE", "/API/v1/items/it_42/")).toBe("/api/v1/items/:id");
    expect(labels.label("POST", "/api/v1/items/a%2Fb/parts/p1")).toBe("/api/v1/items/:id/parts/:part");
    expect(labels.label("GET", "/api/v1/items/special")).toBe("/api/v1/items/special");
    expect(labels.label("GET", "/api/v1/items/")).toBe("/api/v1/items");
    // Served elsewhere (the gateway forwards it), labelled all the same.
    expect(labels.label("POST", "/api/v1/llm/responses")).toBe("/api/v1/llm/responses");
  });

  it("keep labels a closed set: anything no endpoint serves is `unmatched`", () => {
    const labels = new RouteLabels(routesOf(app()));
    for (const [method, url] of [
      ["GET", "/api/v1/items/1/2"],
      ["PUT", "/api/v1/items/1"],
      ["GET", "/wp-admin.php"],
      ["GET", "/api/v1/items/../../etc/passwd"],
    ]) {
      expect(labels.label(method!, url!), url).toBe("unmatched");
    }
  });
});
