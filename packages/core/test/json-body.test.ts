import { AsyncLocalStorage } from "node:async_hooks";
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import { gzipSync } from "node:zlib";
import express from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../src/errors.ts";
import {
  errorHandler,
  jsonBody,
  LARGE_BODY_BYTES,
  MAX_JSON_DEPTH,
  useRequestBasics,
} from "../src/http/common.ts";
import { createLogger } from "../src/logger.ts";
import { createMetrics } from "../src/metrics.ts";
import { turnsTaken } from "../src/turns.ts";

/** What reached the error middleware, by request id. */
const errors = new Map<string, (err: unknown) => void>();
const errorOf = (requestId: string) => new Promise<unknown>((resolve) => errors.set(requestId, resolve));
/** An async context a request's handlers run in (as its trace span is), by request id. */
const requestContext = new AsyncLocalStorage<string>();
/** Which requests have reached `/echo`'s handlers, by request id. */
const arrivals = new Map<string, () => void>();
const arrivalOf = (requestId: string) => new Promise<void>((resolve) => arrivals.set(requestId, resolve));
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
  app.post(
    "/echo",
    (req, _res, next) => {
      arrivals.get(req.id)?.();
      next();
    },
    jsonBody,
    (req, res) => {
      res.json({ body: req.body ?? null });
    },
  );
  app.post(
    "/context",
    (req, _res, next) => requestContext.run(req.id, next),
    jsonBody,
    (_req, res) => {
      res.json({ context: requestContext.getStore() ?? null });
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

  it("a 422 for malformed JSON says what is wrong without quoting the body, which may hold a secret", async () => {
    const secret = "sk-test-0b362ac4d1b47b090784bd78c21e01abe2b3a6f661ac1095";
    for (const text of [
      `{"api_key": ${secret}}`,
      `{"api_key": "${secret}" "x"}`,
      `{"api_key": "${secret}"} ${secret}`,
      `{${secret}}`,
    ]) {
      const res = await fetch(`http://127.0.0.1:${port}/echo`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: text,
      });
      const answer = await res.text();
      expect(res.status).toBe(422);
      expect(JSON.parse(answer).detail).toEqual([
        expect.objectContaining({ loc: ["body"], type: "json_invalid", ctx: { error: expect.any(String) } }),
      ]);
      expect(answer).not.toContain(secret.slice(0, 6));
      expect(answer).not.toContain(secret.slice(-6));
    }
  });
});

describe("jsonBody, small bodies", () => {
  const post = async (body: Buffer) => {
    const res = await fetch(`http://127.0.0.1:${port}/echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    return { status: res.status, answer: await res.json() };
  };

  it("hands the request on in its own async context (its trace span), not the socket's", async () => {
    const res = await fetch(`http://127.0.0.1:${port}/context`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "context-small-1" },
      body: '{"a":1}',
    });
    expect(await res.json()).toEqual({ context: "context-small-1" });
  });

  it("drops a UTF-8 byte order mark", async () => {
    const text = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":"é"}')]);
    expect(await post(text)).toEqual({ status: 200, answer: { body: { a: "é" } } });
  });

  it("a request whose client goes away before its body has arrived is a 400 'request aborted'", async () => {
    const requestId = "aborted-small-1";
    const reached = errorOf(requestId);
    const arrived = arrivalOf(requestId);
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    socket.write(
      "POST /echo HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n" +
        `Content-Length: 20\r\nX-Request-Id: ${requestId}\r\n\r\n{"a":`,
    );
    // The request is being read (its first bytes are in) before the client goes.
    await arrived;
    socket.destroy();
    const err = await reached;
    expect(err).toMatchObject({ type: "request.aborted", status: 400, message: "request aborted" });
  });
});

describe("jsonBody, large bodies", () => {
  /** The same JSON text, padded with whitespace (still the same JSON) past the large-body size. */
  const padded = (text: string) => `${" ".repeat(LARGE_BODY_BYTES)}${text}`;
  const post = async (body: string | Buffer, headers: Record<string, string> = {}) => {
    const res = await fetch(`http://127.0.0.1:${port}/echo`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body,
    });
    const answer = (await res.json()) as { body?: unknown; detail?: { type: string }[]; error?: unknown };
    return { status: res.status, body: answer.body, type: answer.detail?.[0]?.type ?? answer.error };
  };
  const deep = `${"[".repeat(MAX_JSON_DEPTH + 1)}${"]".repeat(MAX_JSON_DEPTH + 1)}`;
  const notDeep = `${"[".repeat(MAX_JSON_DEPTH)}${"]".repeat(MAX_JSON_DEPTH)}`;

  it.each([
    ["an object", '{"model":"m","input":"hello","n":[1,2,{"x":null}]}', 200],
    ["an array", "[1,2,3]", 200],
    ["nesting at the limit", notDeep, 200],
    ["nesting past the limit", deep, 422],
    // The depth scan skips strings: their brackets do not count, an escaped quote does not end them…
    ["brackets and an escaped quote inside a string", `{"a":"\\"${"[".repeat(100)}","b":"]]"}`, 200],
    // …and a quote after an escaped backslash does.
    ["nesting past the limit after a string ending in a backslash", `[{"a":"\\\\"},${notDeep}]`, 422],
    // Any JSON value is JSON: a route's schema refuses what it does not take, never the parser.
    ["a string, not an object or array", '"just a string"', 200],
    ["a number", "42", 200],
    ["null", "null", 200],
    ["whitespace only", "  \n ", 422],
    ["text that is not JSON", "{not json", 422],
    ["an unterminated string", '{"a":"never ends', 422],
  ])("%s: the same outcome as a small body, parsed in a turn of its own", async (_what, text, status) => {
    const small = await post(text);
    expect(small.status).toBe(status);
    if (status === 200) expect(small.body).toEqual(JSON.parse(text));
    const before = turnsTaken();
    const large = await post(padded(text));
    expect(large).toEqual(small);
    expect(turnsTaken()).toBeGreaterThan(before);
  });

  it("refuses a declared charset other than UTF-8 and bodies past the limit, as for a small body", async () => {
    const text = '{"a":1}';
    for (const headers of [
      { "content-type": "application/json; charset=latin1" },
      { "content-type": "application/json; charset=utf-16" },
    ])
      expect(await post(padded(text), headers)).toEqual(await post(text, headers));
    expect((await post(padded(" ".repeat(1024 * 1024)))).status).toBe(413);
  });

  it("inflates a compressed large body, and reads one sent without a declared length", async () => {
    const text = padded('{"a":"compressed"}');
    expect(await post(gzipSync(text), { "content-encoding": "gzip" })).toEqual({
      status: 200,
      body: { a: "compressed" },
      type: undefined,
    });
    const chunked = await fetch(`http://127.0.0.1:${port}/echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: new Blob([text]).stream(),
      duplex: "half",
    } as RequestInit);
    expect(await chunked.json()).toEqual({ body: { a: "compressed" } });
  });
});
