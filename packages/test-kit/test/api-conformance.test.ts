import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiConformanceError, conformanceProblems, watchApi } from "../src/api-conformance.ts";

const WHOAMI = "/api/v1/authentication/whoami";
const principal = {
  org: "org-a",
  user: "alice",
  keyId: "key_1",
  permissions: ["responses:read"],
  credential: "api_key",
  onBehalfOf: false,
  endUser: false,
  actsAsKeyOwner: false,
};

describe("an answer checked against the OpenAPI document", () => {
  it("conforms when its status, media type and body are the ones the operation declares", () => {
    const answer = {
      method: "GET",
      pathname: WHOAMI,
      status: 200,
      contentType: "application/json; charset=utf-8",
    };
    expect(conformanceProblems({ ...answer, body: JSON.stringify(principal) })).toEqual([]);
    // A catalogue error the operation declares, and one on the OpenAI surface in OpenAI's shape.
    expect(
      conformanceProblems({
        ...answer,
        status: 401,
        body: JSON.stringify({ error: "Unauthorized", message: "Missing Authorization header" }),
      }),
    ).toEqual([]);
    expect(
      conformanceProblems({
        method: "GET",
        pathname: "/api/v1/llm/conversations/conv_1",
        status: 404,
        contentType: "application/json",
        body: JSON.stringify({
          error: {
            message: "No conversation conv_1",
            type: "invalid_request_error",
            param: null,
            code: "not_found",
          },
        }),
      }),
    ).toEqual([]);
  });

  it("names a body that drifted from its schema, a status or media type not declared, and a body that is not JSON", () => {
    const answer = { method: "GET", pathname: WHOAMI, contentType: "application/json" };
    const { actsAsKeyOwner: _, ...withoutField } = principal;
    expect(conformanceProblems({ ...answer, status: 200, body: JSON.stringify(withoutField) })).toEqual([
      expect.stringMatching(
        /^GET \/api\/v1\/authentication\/whoami \(whoami\) answered 200: body must have required property 'actsAsKeyOwner'/,
      ),
    ]);
    expect(
      conformanceProblems({ ...answer, status: 200, body: JSON.stringify({ ...principal, secret: "x" }) }),
    ).toEqual([expect.stringContaining("must NOT have additional properties")]);
    expect(conformanceProblems({ ...answer, status: 404, body: "{}" })).toEqual([
      expect.stringContaining("answered 404, a status it does not declare"),
    ]);
    expect(conformanceProblems({ ...answer, status: 200, contentType: "text/html", body: "<p>" })).toEqual([
      expect.stringContaining("as text/html, which that status does not declare"),
    ]);
    expect(conformanceProblems({ ...answer, status: 200, body: "{" })).toEqual([
      expect.stringContaining("with a body that is not JSON"),
    ]);
    // The OpenAI surface's errors are OpenAI's shape: the contract's flat body there is a drift.
    expect(
      conformanceProblems({
        method: "GET",
        pathname: "/api/v1/llm/conversations/conv_1",
        status: 404,
        contentType: "application/json",
        body: JSON.stringify({ error: "Not Found", message: "No conversation conv_1" }),
      }),
    ).not.toEqual([]);
  });

  it("leaves what no declared operation serves alone (the console, health, metrics)", () => {
    expect(
      conformanceProblems({
        method: "GET",
        pathname: "/readyz",
        status: 200,
        contentType: "text/plain",
        body: "ok",
      }),
    ).toEqual([]);
  });
});

describe("watchApi: the process's fetch checks a watched gateway's answers", () => {
  let server: Server;
  let url: string;
  /** What the tiny stand-in answers next, as a handler that drifted would. */
  let next: { status: number; body: unknown };
  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(next.status, { "content-type": "application/json" });
      res.end(JSON.stringify(next.body));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("rejects the request whose answer does not conform, hands back one that does, and stops when unwatched", async () => {
    const unwatch = watchApi(url);
    try {
      next = { status: 200, body: principal };
      const good = await fetch(`${url}${WHOAMI}`);
      expect(await good.json()).toEqual(principal);

      next = { status: 200, body: { ...principal, actsAsKeyOwner: "no" } };
      const drifted = fetch(`${url}${WHOAMI}`);
      await expect(drifted).rejects.toBeInstanceOf(ApiConformanceError);
      await expect(fetch(`${url}${WHOAMI}`)).rejects.toThrow(/body\/actsAsKeyOwner must be boolean/);
    } finally {
      unwatch();
    }
    // Unwatched: the same answer is the test's own business again.
    expect((await fetch(`${url}${WHOAMI}`)).status).toBe(200);
  });
});
