import { describe, expect, it } from "vitest";
import { useGateway } from "./harness.ts";

const gw = useGateway();
const KEYS = "/api/v1/admin/api-keys";

async function adminSecret() {
  return (await gw.createKey({ permissions: ["admin:api-keys"] })).secret;
}

describe("error bodies", () => {
  it("answers malformed JSON with 422 json_invalid, not 500", async () => {
    const res = await gw.call(KEYS, {
      method: "POST",
      bearer: await adminSecret(),
      headers: { "content-type": "application/json" },
      body: '{"owner": "bob",',
    });
    expect(res.status).toBe(422);
    const body = await res.json();
    expect(body.detail).toEqual([
      expect.objectContaining({ loc: ["body"], type: "json_invalid", msg: "JSON decode error" }),
    ]);
  });

  it.each([
    ["a string", '"abc"', "abc"],
    ["null", "null", null],
    ["a number", "1", 1],
    ["a list", "[1]", [1]],
    // A large body is parsed apart (in a turn of its own), to the same outcome.
    ["a string, large", `${" ".repeat(64 * 1024)}"abc"`, "abc"],
  ])(
    "a body that is JSON but not an object (%s) is 422 dict_type at body, not json_invalid",
    async (_what, text, input) => {
      const res = await gw.call("/api/v1/authorization/llm/grant", {
        method: "POST",
        bearer: (await gw.createKey()).secret,
        headers: { "content-type": "application/json" },
        body: text,
      });
      expect(res.status).toBe(422);
      expect((await res.json()).detail).toEqual([
        { loc: ["body"], msg: "Input should be a valid dictionary", type: "dict_type", input },
      ]);
    },
  );

  it("names an extra property with extra_forbidden at its location", async () => {
    const res = await gw.call(KEYS, {
      method: "POST",
      bearer: await adminSecret(),
      json: { owner: "bob", colour: "red" },
    });
    expect(res.status).toBe(422);
    expect((await res.json()).detail).toEqual([
      {
        loc: ["body", "colour"],
        msg: "Extra inputs are not permitted",
        type: "extra_forbidden",
        input: "red",
      },
    ]);
  });

  it("names every bad field at once, pydantic style", async () => {
    const res = await gw.call(KEYS, {
      method: "POST",
      bearer: await adminSecret(),
      json: { name: 7, permissions: ["responses:read", "fly"], limits: { second: 0, hour: 1.5 } },
    });
    expect(res.status).toBe(422);
    const detail = (await res.json()).detail as { loc: unknown[]; type: string }[];
    const byLoc = Object.fromEntries(detail.map((d) => [d.loc.join("."), d]));
    expect(byLoc["body.owner"]).toEqual({ loc: ["body", "owner"], msg: "Field required", type: "missing" });
    expect(byLoc["body.name"]).toMatchObject({ type: "string_type", input: 7 });
    expect(byLoc["body.permissions.1"]).toMatchObject({ type: "enum", input: "fly" });
    expect(byLoc["body.limits.second"]).toMatchObject({
      type: "greater_than_equal",
      input: 0,
      ctx: { ge: 1 },
    });
    expect(byLoc["body.limits.hour"]).toMatchObject({ type: "int_type", input: 1.5 });
    expect(detail).toHaveLength(5);
  });

  it("answers a missing body with 422 missing at ['body']", async () => {
    const res = await gw.call(KEYS, { method: "POST", bearer: await adminSecret() });
    expect(res.status).toBe(422);
    expect((await res.json()).detail).toEqual([{ loc: ["body"], msg: "Field required", type: "missing" }]);
  });

  it("answers a body over 1 MiB with 413 in JSON", async () => {
    const res = await gw.call(KEYS, {
      method: "POST",
      bearer: await adminSecret(),
      json: { owner: "bob", name: "x".repeat(1024 * 1024) },
    });
    expect(res.status).toBe(413);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({
      error: "Payload Too Large",
      message: expect.stringContaining("1048576"),
      code: "payload_too_large",
    });
  });

  it("answers unknown routes with 404 in JSON (after authentication under /api/v1)", async () => {
    const secret = await adminSecret();
    const api = await gw.call("/api/v1/no/such/thing", { bearer: secret });
    expect(api.status).toBe(404);
    expect(await api.json()).toEqual({
      error: "Not Found",
      message: "No route for GET /api/v1/no/such/thing",
      code: "no_route",
    });
    const root = await gw.call("/nowhere");
    expect(root.status).toBe(404);
    expect((await root.json()).error).toBe("Not Found");
    expect((await gw.call("/api/v1/no/such/thing")).status).toBe(401);
    // A path's echo is bounded: a long one is cut, never sent back whole.
    const long = await gw.call(`/api/v1/admin/${"x".repeat(5000)}`, { bearer: secret });
    expect(long.status).toBe(404);
    const { message } = await long.json();
    expect(message).toMatch(/^No route for GET \/api\/v1\/admin\/x+…$/);
    expect(message.length).toBeLessThan(300);
  });

  it("answers a method a known path does not serve with 405 and Allow (after authentication)", async () => {
    const secret = await adminSecret();
    for (const [method, path, allow] of [
      ["GET", "/api/v1/authorization/llm/grant", "OPTIONS, POST"],
      ["PUT", "/api/v1/authorization/llm/resources/file/f1", "DELETE, OPTIONS"],
      ["POST", "/healthz", "GET, HEAD, OPTIONS"],
    ] as const) {
      const res = await gw.call(path, { method, bearer: secret });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get("allow"), path).toBe(allow);
      expect(await res.json()).toEqual({
        error: "Method Not Allowed",
        message: `${method} is not allowed on ${path}; allowed: ${allow}`,
        code: "method_not_allowed",
      });
    }
    expect((await gw.call("/api/v1/authorization/llm/grant")).status).toBe(401);
  });

  it("answers OPTIONS with 204 and Allow for any endpoint, its own or the service's; an unknown path as before", async () => {
    for (const [path, allow] of [
      ["/api/v1/authorization/llm/resources", "GET, HEAD, OPTIONS, POST"],
      ["/api/v1/authorization/llm/resources/file/f1", "DELETE, OPTIONS"],
      ["/api/v1/llm/conversations/conv_1", "DELETE, GET, HEAD, OPTIONS, POST"],
      ["/healthz", "GET, HEAD, OPTIONS"],
    ]) {
      const res = await gw.call(path!, { method: "OPTIONS" });
      expect(res.status, path).toBe(204);
      expect(res.headers.get("allow"), path).toBe(allow);
      expect(res.headers.get("content-type"), path).toBeNull();
      expect(await res.text()).toBe("");
    }
    const unknown = await gw.call("/api/v1/no/such/thing", { method: "OPTIONS" });
    expect(unknown.status).toBe(401);
    expect((await unknown.json()).error).toBe("Unauthorized");
    const nowhere = await gw.call("/nowhere", { method: "OPTIONS" });
    expect(nowhere.status).toBe(404);
    expect(await nowhere.json()).toEqual({
      error: "Not Found",
      message: "No route for OPTIONS /nowhere",
      code: "no_route",
    });
  });

  it("puts X-Request-Id on every response, keeping a well-formed incoming one", async () => {
    const secret = await adminSecret();
    const responses = await Promise.all([
      gw.call("/healthz"),
      gw.call("/nowhere"),
      gw.call("/api/v1/authentication/whoami"),
      gw.call("/api/v1/authentication/whoami", { bearer: secret }),
      gw.call(KEYS, { method: "POST", bearer: secret, json: { nope: 1 } }),
    ]);
    const ids = responses.map((r) => r.headers.get("x-request-id"));
    for (const id of ids) expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(ids).size).toBe(ids.length);
    const echoed = await gw.call("/healthz", { headers: { "x-request-id": "trace-abc.123" } });
    expect(echoed.headers.get("x-request-id")).toBe("trace-abc.123");
    const replaced = await gw.call("/healthz", { headers: { "x-request-id": "bad id with spaces" } });
    expect(replaced.headers.get("x-request-id")).not.toBe("bad id with spaces");
  });

  it("serves liveness, readiness and metrics without credentials", async () => {
    expect((await gw.call("/api/v1/authentication/whoami")).status).toBe(401); // counted as "missing"
    expect(await (await gw.call("/healthz")).json()).toEqual({ status: "ok" });
    expect(await (await gw.call("/readyz")).json()).toEqual({
      status: "ready",
      checks: { redis: "ok", spicedb: "ok" },
    });
    const metrics = await (await gw.call("/metrics")).text();
    expect(metrics).toContain("gateway_http_requests_total");
    expect(metrics).toMatch(/gateway_authentications_total\{outcome="missing"\} [1-9]/);
    expect(metrics).not.toMatch(/key_[0-9a-f]{24}/);
  });
});
