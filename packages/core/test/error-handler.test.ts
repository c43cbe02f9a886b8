import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import express from "express";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError, conflict } from "../src/errors.ts";
import { errorHandler, notFoundHandler, useRequestBasics } from "../src/http/common.ts";
import { createMetrics } from "../src/metrics.ts";

const logLines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk, _enc, done) {
    logLines.push(JSON.parse(chunk.toString()));
    done();
  },
});
const logger = pino({ level: "info" }, sink);
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
      expect(body).toEqual({ error: "Internal Server Error", requestId });
      expect(JSON.stringify(body)).not.toMatch(/hunter2|undefined|stack/);
      const logged = logLines.find((l) => l.requestId === requestId && l.msg === "unhandled error");
      expect((logged?.err as { stack?: string })?.stack).toMatch(/Error: /);
    },
  );

  it("maps catalogue errors to their status and body", async () => {
    const res = await fetch(`${base}/conflict`);
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({ error: "Conflict", message: "The last owner cannot be removed" });
    const unavailable = await fetch(`${base}/teapot`);
    expect(unavailable.status).toBe(503);
    expect(await unavailable.json()).toEqual({
      error: "Service Unavailable",
      message: "SpiceDB is unreachable",
    });
  });

  it("logs one access line per request with method, route, status and duration, never headers", async () => {
    await fetch(`${base}/conflict`, { headers: { authorization: "Bearer gwsk_topsecret" } });
    await new Promise((r) => setTimeout(r, 20));
    const line = logLines.findLast((l) => l.msg === "request");
    expect(line).toMatchObject({
      method: "GET",
      route: "/conflict",
      status: 409,
      durationMs: expect.any(Number),
    });
    expect(JSON.stringify(logLines)).not.toContain("gwsk_topsecret");
  });
});
