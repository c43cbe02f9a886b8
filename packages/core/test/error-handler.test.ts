import { EventEmitter } from "node:events";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import express from "express";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LastOwner, NotResourceOwner } from "../src/authz/resource-authorization.ts";
import { SpiceDBUnavailable } from "../src/authz/spicedb-client.ts";
import { AppError, conflict, ValidationFailed } from "../src/errors.ts";
import { errorHandler, notFoundHandler, useRequestBasics } from "../src/http/common.ts";
import { InvalidAssertion } from "../src/internal-assertion.ts";
import { createMetrics } from "../src/metrics.ts";
import { RedisUnavailable } from "../src/redis.ts";

const logLines: Record<string, unknown>[] = [];
const logged = new EventEmitter();
const sink = new Writable({
  write(chunk, _enc, done) {
    const line = JSON.parse(chunk.toString());
    logLines.push(line);
    logged.emit("line", line);
    done();
  },
});

/** The first log line that `matches`, once it is written. */
function logLine(matches: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  const found = logLines.find(matches);
  if (found) return Promise.resolve(found);
  return new Promise((resolve) => {
    const onLine = (line: Record<string, unknown>) => {
      if (!matches(line)) return;
      logged.off("line", onLine);
      resolve(line);
    };
    logged.on("line", onLine);
  });
}
const logger = pino({ level: "info" }, sink);
const domainErrors: Record<string, () => Error> = {
  "not-owner": () => new NotResourceOwner(),
  "last-owner": () => new LastOwner(),
  spicedb: () =>
    new SpiceDBUnavailable(new Error("14 UNAVAILABLE: connect ECONNREFUSED 10.1.2.3:50051 key=s3cr3t")),
  redis: () => new RedisUnavailable(new Error("Command timed out")),
  assertion: () => new InvalidAssertion("already used"),
};
let base = "";
let close: () => void;

beforeAll(async () => {
  const app = express();
  useRequestBasics(app, logger, createMetrics("test"));
  app.get("/boom", () => {
    throw new Error("database password is hunter2");
  });
  app.get("/async-boom", async () => {
    await Promise.resolve();
    throw new TypeError("cannot read x of undefined");
  });
  app.get("/conflict", () => {
    throw conflict("The last owner cannot be removed");
  });
  app.get("/teapot", () => {
    throw new AppError("service_unavailable", "SpiceDB is unreachable");
  });
  app.get("/domain/:which", (req) => {
    throw domainErrors[req.params.which]!();
  });
  // The OpenAI-compatible surface: the same errors, in OpenAI's shape where the contract leaves it open.
  app.get("/api/v1/llm/domain/:which", (req) => {
    throw domainErrors[req.params.which]!();
  });
  app.get("/api/v1/llm/boom", () => {
    throw new Error("database password is hunter2");
  });
  app.get("/api/v1/llm/param", () => {
    throw new AppError("forbidden", "This key may not use the model 'big'", { param: "model" });
  });
  app.get("/api/v1/llm/invalid", () => {
    throw new ValidationFailed([{ loc: ["body", "input"], msg: "Field required", type: "missing" }]);
  });
  app.get("/api/v1/llm/limited", () => {
    throw new AppError("rate_limited", "over");
  });
  for (const path of ["/api/v1/llm/provider-limited", "/provider-limited"]) {
    app.get(path, () => {
      throw new AppError("provider_rate_limited", "slow down", { headers: { "Retry-After": "7" } });
    });
  }
  app.get("/invalid", () => {
    throw new ValidationFailed([{ loc: ["body", "input"], msg: "Field required", type: "missing" }]);
  });
  app.get("/api/v1/llmx/conflict", () => {
    throw conflict("elsewhere");
  });
  app.get("/things/:id", (req, res) => {
    res.json({ id: req.params.id });
  });
  app.use(notFoundHandler);
  app.use(errorHandler(logger));
  const server = app.listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => server.close();
});
afterAll(() => close());

describe("the error middleware", () => {
  it.each(["/boom", "/async-boom"])(
    "turns an unexpected error in %s into a bare 500 with the request id",
    async (path) => {
      const res = await fetch(`${base}${path}`);
      expect(res.status).toBe(500);
      const requestId = res.headers.get("x-request-id");
      const body = await res.json();
      expect(body).toEqual({ error: "Internal Server Error", requestId, code: "internal" });
      expect(JSON.stringify(body)).not.toMatch(/hunter2|undefined|stack/);
      const logged = logLines.find((l) => l.requestId === requestId && l.msg === "unhandled error");
      expect((logged?.err as { stack?: string })?.stack).toMatch(/Error: /);
    },
  );

  it("maps catalogue errors to their status and body", async () => {
    const res = await fetch(`${base}/conflict`);
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({
      error: "Conflict",
      message: "The last owner cannot be removed",
      code: "conflict",
    });
    const unavailable = await fetch(`${base}/teapot`);
    expect(unavailable.status).toBe(503);
    expect(await unavailable.json()).toEqual({
      error: "Service Unavailable",
      message: "SpiceDB is unreachable",
      code: "service_unavailable",
    });
  });

  it.each([
    [
      "not-owner",
      403,
      { error: "Forbidden", message: "Only resource owners can grant or revoke permissions" },
    ],
    [
      "last-owner",
      409,
      { error: "Conflict", message: expect.stringContaining("last owner"), code: "last_owner" },
    ],
    [
      "spicedb",
      503,
      {
        error: "Service Unavailable",
        message: expect.stringContaining("try again"),
        code: "spicedb_unavailable",
      },
    ],
    [
      "redis",
      503,
      {
        error: "Service Unavailable",
        message: expect.stringContaining("try again"),
        code: "data_store_unavailable",
      },
    ],
    [
      "assertion",
      401,
      {
        error: "Unauthorized",
        message: "Gateway assertion refused: already used",
        code: "invalid_assertion",
      },
    ],
  ])("gives the domain error %s its catalogue status from the error itself", async (which, status, body) => {
    const res = await fetch(`${base}/domain/${which}`);
    expect(res.status).toBe(status);
    expect(await res.json()).toEqual(body);
  });

  it("finds each domain error's status in the error itself: they extend AppError with their code", () => {
    expect(
      Object.entries(domainErrors).map(([which, make]) => {
        const err = make();
        return [which, err instanceof AppError ? err.code : "not an AppError"];
      }),
    ).toEqual([
      ["not-owner", "forbidden"],
      ["last-owner", "conflict"],
      ["spicedb", "service_unavailable"],
      ["redis", "service_unavailable"],
      ["assertion", "unauthorized"],
    ]);
  });

  it("keeps another system's error text out of the body, and in the log", async () => {
    const res = await fetch(`${base}/domain/spicedb`);
    const text = await res.text();
    expect(text).not.toMatch(/ECONNREFUSED|10\.1\.2\.3|s3cr3t|UNAVAILABLE/);
    const requestId = res.headers.get("x-request-id");
    const logged = logLines.find((l) => l.requestId === requestId && l.level === 40);
    expect(JSON.stringify(logged)).toContain("ECONNREFUSED");
  });

  it("answers malformed percent-encoding in a path parameter with 400, not 500", async () => {
    const res = await fetch(`${base}/things/%ZZ`);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: "Bad Request",
      message: "The request path has malformed percent-encoding",
      code: "bad_request",
    });
    expect(await (await fetch(`${base}/things/a%20b`)).json()).toEqual({ id: "a b" });
  });

  it("logs one access line per request with method, route, status and duration, never headers", async () => {
    const res = await fetch(`${base}/conflict`, { headers: { authorization: "Bearer gwsk_topsecret" } });
    const requestId = res.headers.get("x-request-id");
    const line = await logLine((l) => l.msg === "request" && l.requestId === requestId);
    expect(line).toMatchObject({
      method: "GET",
      route: "/conflict",
      status: 409,
      durationMs: expect.any(Number),
    });
    expect(JSON.stringify(logLines)).not.toContain("gwsk_topsecret");
  });

  it.each([
    [
      "not-owner",
      403,
      "permission_error",
      "forbidden",
      "Only resource owners can grant or revoke permissions",
    ],
    ["last-owner", 409, "invalid_request_error", "conflict", expect.stringContaining("last owner")],
    ["spicedb", 503, "server_error", "service_unavailable", expect.stringContaining("try again")],
    ["assertion", 401, "authentication_error", "unauthorized", "Gateway assertion refused: already used"],
  ])("on /api/v1/llm answers %s in OpenAI's error shape", async (which, status, type, code, message) => {
    const res = await fetch(`${base}/api/v1/llm/domain/${which}`);
    expect(res.status).toBe(status);
    expect(await res.json()).toEqual({ error: { message, type, code, param: null } });
  });

  it("on /api/v1/llm names the field at fault in param, and keeps the contract's 422 and 429 bodies", async () => {
    expect(await (await fetch(`${base}/api/v1/llm/param`)).json()).toEqual({
      error: {
        message: "This key may not use the model 'big'",
        type: "permission_error",
        code: "forbidden",
        param: "model",
      },
    });
    const invalid = await fetch(`${base}/api/v1/llm/invalid`);
    expect(invalid.status).toBe(422);
    // The contract's detail, and OpenAI's error beside it for the clients that read only that.
    expect(await invalid.json()).toEqual({
      detail: [{ loc: ["body", "input"], msg: "Field required", type: "missing" }],
      error: {
        message: "Invalid 'input': Field required",
        type: "invalid_request_error",
        param: "input",
        code: "missing",
      },
    });
    const limited = await fetch(`${base}/api/v1/llm/limited`);
    expect(limited.status).toBe(429);
    expect(await limited.json()).toEqual({ error: "Rate limit exceeded" });
    // The provider's 429 is a 429 too, in OpenAI's shape, with its Retry-After.
    const provider = await fetch(`${base}/api/v1/llm/provider-limited`);
    expect(provider.status).toBe(429);
    expect(provider.headers.get("retry-after")).toBe("7");
    expect(await provider.json()).toEqual({
      error: { message: "slow down", type: "rate_limit_error", param: null, code: "provider_rate_limited" },
    });
    expect(await (await fetch(`${base}/provider-limited`)).json()).toEqual({
      error: "Too Many Requests",
      message: "slow down",
      code: "provider_rate_limited",
    });
    // Elsewhere a 422 keeps the contract's body alone.
    expect(await (await fetch(`${base}/invalid`)).json()).toEqual({
      detail: [{ loc: ["body", "input"], msg: "Field required", type: "missing" }],
    });
    // Only the llm surface: a path that merely starts with the same letters keeps the plain shape.
    expect(await (await fetch(`${base}/api/v1/llmx/conflict`)).json()).toEqual({
      error: "Conflict",
      message: "elsewhere",
      code: "conflict",
    });
  });

  it("on /api/v1/llm answers an unexpected error as OpenAI's server_error with the request id only", async () => {
    const res = await fetch(`${base}/api/v1/llm/boom`);
    expect(res.status).toBe(500);
    const requestId = res.headers.get("x-request-id");
    expect(await res.json()).toEqual({
      error: {
        message: `Internal Server Error (request ${requestId})`,
        type: "server_error",
        code: "internal",
        param: null,
      },
    });
  });

  it("on /api/v1/llm answers a route nobody serves with OpenAI's 404", async () => {
    const res = await fetch(`${base}/api/v1/llm/nothing-here`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { type: "invalid_request_error", code: "not_found" } });
  });
});
