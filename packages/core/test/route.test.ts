import type { AddressInfo } from "node:net";
import express from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { forbidden } from "../src/errors.ts";
import { errorHandler, jsonBody } from "../src/http/common.ts";
import { defineRoute, operationsOf, registerRoutes } from "../src/http/route.ts";
import { createLogger } from "../src/logger.ts";
import { buildOpenApiDocument } from "../src/openapi.ts";
import type { Principal } from "../src/principal.ts";

/** A declared route, registered on a real Express app: what its handler gets and what the document says. */
const principal = (permissions: string[]): Principal =>
  ({
    org: "acme",
    user: "alice",
    keyId: "k",
    permissions,
    credential: "api_key",
    onBehalfOf: false,
  }) as Principal;

interface Deps {
  limit: number;
  seen: string[];
}

const echo = defineRoute({
  method: "POST",
  path: "/api/v1/things/:id",
  operationId: "echoThing",
  summary: "Echo",
  tag: "Things",
  permission: "conversations:write",
  deprecated: { headers: { Deprecation: "@1" } },
  params: z.object({ id: z.string().regex(/^t_\d+$/) }),
  query: z.object({ n: z.coerce.number().int().default(1) }),
  body: z.strictObject({ name: z.string().max(100) }),
  bodyValidation: {
    prepare: (raw) =>
      raw && typeof raw === "object"
        ? { ...raw, name: String((raw as { name?: unknown }).name).trim() }
        : raw,
    schemaFor: (deps: Deps) => z.strictObject({ name: z.string().max(deps.limit) }),
  },
  authorize: async ({ params }, deps: Deps) => {
    deps.seen.push(`authorize ${params.id}`);
    if (params.id === "t_403") throw forbidden("not yours");
  },
  responses: { 200: { description: "The thing" } },
  handler: ({ principal, params, query, body }, deps: Deps) => {
    deps.seen.push("handler");
    return { id: params.id, n: query.n + 1, name: body.name, user: principal.user };
  },
});

const models = defineRoute({
  method: "GET",
  path: "/api/v1/models",
  operationId: "listThings",
  summary: "Either permission",
  tag: "Things",
  permission: ["responses:read", "responses:write"],
  responses: { 200: { description: "Ok" } },
  handler: () => ({ ok: true }),
});

const open = defineRoute({
  method: "GET",
  path: "/.well-known/thing",
  operationId: "publicThing",
  summary: "Public",
  tag: "Things",
  auth: "none",
  responses: { 204: { description: "Nothing" } },
  handler: ({ res }, _deps: unknown) => {
    res.status(204).end();
  },
});

const deps: Deps = { limit: 5, seen: [] };
let base = "";
let close: () => void;
let permissions: string[] = [];

beforeAll(async () => {
  const app = express();
  const root = express.Router();
  registerRoutes(root, [open], deps, "");
  app.use(root);
  const api = express.Router();
  api.use((_req, res, next) => {
    res.locals.principal = principal(permissions);
    next();
  }, jsonBody);
  registerRoutes(api, [echo, models], deps);
  app.use("/api/v1", api);
  app.use(errorHandler(createLogger("test", "silent")));
  const server = app.listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => server.close();
});
afterAll(() => close?.());

const post = (path: string, body: unknown) =>
  fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

describe("a declared route", () => {
  it("hands its handler the parsed params, query and body (prepared, with the schema the deps give)", async () => {
    permissions = ["conversations:write"];
    deps.seen = [];
    const res = await post("/api/v1/things/t_1?n=41", { name: "  abc  " });
    expect(res.status).toBe(200);
    expect(res.headers.get("deprecation")).toBe("@1");
    expect(await res.json()).toEqual({ id: "t_1", n: 42, name: "abc", user: "alice" });
    expect(deps.seen).toEqual(["authorize t_1", "handler"]);
  });

  it("validates with the deps' schema: a name over their limit is a 422 at its loc", async () => {
    permissions = ["conversations:write"];
    const res = await post("/api/v1/things/t_1", { name: "abcdef" });
    expect(res.status).toBe(422);
    const { detail } = await res.json();
    expect(detail[0].loc).toEqual(["body", "name"]);
  });

  it("checks the permission first (403, still deprecated), then authorize, then the parts", async () => {
    permissions = [];
    const refused = await post("/api/v1/things/bad", { name: 1 });
    expect(refused.status).toBe(403);
    expect(refused.headers.get("deprecation")).toBe("@1");
    permissions = ["conversations:write"];
    deps.seen = [];
    const notYours = await post("/api/v1/things/t_403", { name: 1 });
    expect(notYours.status).toBe(403);
    expect(deps.seen).toEqual(["authorize t_403"]);
    const badPath = await post("/api/v1/things/bad", { name: "a" });
    expect(badPath.status).toBe(422);
    expect((await badPath.json()).detail[0].loc).toEqual(["path", "id"]);
  });

  it("takes any of a list of permissions", async () => {
    permissions = ["responses:write"];
    expect((await fetch(`${base}/api/v1/models`)).status).toBe(200);
    permissions = ["conversations:read"];
    const res = await fetch(`${base}/api/v1/models`);
    expect(res.status).toBe(403);
    expect((await res.json()).message).toBe(
      "This credential lacks the 'responses:read' or 'responses:write' permission",
    );
  });

  it("serves a public route mounted at the root, which never asks for a principal", async () => {
    expect((await fetch(`${base}/.well-known/thing`)).status).toBe(204);
  });

  it("describes itself in the document: permission, deprecation, parameters and extensions", () => {
    const operations = operationsOf([echo, models, open], (route) =>
      route.operationId === "listThings" ? { "x-test": true } : {},
    );
    const paths = buildOpenApiDocument({ title: "t", version: "1", description: "d" }, operations)
      .paths as Record<string, Record<string, Record<string, unknown>>>;
    const operation = paths["/api/v1/things/{id}"]!.post!;
    expect(operation.deprecated).toBe(true);
    expect(operation.description).toBe("Requires the key permission `conversations:write`.");
    expect((operation.parameters as { name: string }[]).map((p) => p.name)).toContain("n");
    expect(paths["/api/v1/models"]!.get!["x-test"]).toBe(true);
    expect(paths["/api/v1/models"]!.get!.description).toBe(
      "Requires the key permission `responses:read or responses:write`.",
    );
    expect(paths["/.well-known/thing"]!.get!.security).toEqual([]);
  });
});
