import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import express from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../src/errors.ts";
import { errorHandler, jsonBody, useRequestBasics } from "../src/http/common.ts";
import { createLogger } from "../src/logger.ts";
import { createMetrics } from "../src/metrics.ts";

/** What reached the error middleware, by request id. */
const errors = new Map<string, (err: unknown) => void>();
const errorOf = (requestId: string) => new Promise<unknown>((resolve) => errors.set(requestId, resolve));
let port = 0;
let close: () => void;

beforeAll(async () => {
  const app = express();
  useRequestBasics(app, createLogger("test", "silent"), createMetrics("test"));
  app.post(
    "/after-half-close",
    // Holds the request until the client has closed its side, as a fuzzer's request that ends early does.
    (req, _res, next) => {
      if (req.socket.readableEnded) next();
      else req.socket.once("end", () => next());
    },
    jsonBody,
    (req, res) => {
      res.json({ body: req.body ?? null });
    },
  );
  app.use((err: unknown, req: express.Request, _res: express.Response, next: express.NextFunction) => {
    errors.get(req.id)?.(err);
    next(err);
  });
  app.use(errorHandler(createLogger("test", "silent")));
  const server = app.listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  port = (server.address() as AddressInfo).port;
  close = () => server.close();
});
afterAll(() => close());

describe("jsonBody", () => {
  it("a non-JSON body of a request that ended before it was read is a 400, not a TypeError", async () => {
    const requestId = "half-closed-1";
    const reached = errorOf(requestId);
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    socket.end(
      "POST /after-half-close HTTP/1.1\r\nHost: test\r\nContent-Type: text/plain\r\n" +
        `Content-Length: 5\r\nX-Request-Id: ${requestId}\r\n\r\nhello`,
    );
    const err = await reached;
    socket.destroy();
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: "bad_request", message: expect.stringMatching(/could not be read/) });
  });
});
