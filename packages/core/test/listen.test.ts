import type { Server } from "node:http";
import { connect } from "node:net";
import express from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen } from "../src/http/listen.ts";

let server: Server;
let base = "";

beforeAll(async () => {
  const app = express();
  app.get("/ok", (_req, res) => {
    res.json({ ok: true });
  });
  // Short timeouts, checked often, so a request that is too slow is refused within the test.
  ({ server } = await listen(app, 0, "127.0.0.1", {
    headersTimeout: 300,
    requestTimeout: 300,
    connectionsCheckingInterval: 50,
    maxHeaderSize: 4096,
  }));
  const { port } = server.address() as { port: number };
  base = `http://127.0.0.1:${port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

/**
 * Sends bytes as they are (fetch will not send a malformed request line) and reads until the server
 * closes. The test kit's `rawHttp` does the same, but core's tests cannot depend on the kit, which is
 * built on core.
 */
function rawHttp(
  request: string,
): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = connect(Number(port), hostname, () => socket.write(request));
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const split = text.indexOf("\r\n\r\n");
      if (split < 0) return reject(new Error(`no HTTP answer: ${JSON.stringify(text)}`));
      const [statusLine = "", ...lines] = text.slice(0, split).split("\r\n");
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(":");
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status: Number(statusLine.split(" ")[1]), headers, body: text.slice(split + 4) });
    });
  });
}

function expectCatalogueJson(
  res: Awaited<ReturnType<typeof rawHttp>>,
  status: number,
  error: string,
  code: string,
) {
  expect(res.status).toBe(status);
  expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
  expect(res.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
  expect(Number(res.headers["content-length"])).toBe(Buffer.byteLength(res.body));
  expect(JSON.parse(res.body)).toEqual({ error, message: expect.any(String), code });
}

describe("requests Node refuses before Express sees them get the catalogue's JSON", () => {
  it("a malformed request line: 400", async () => {
    const res = await rawHttp("NOT HTTP AT ALL\r\n\r\n");
    expectCatalogueJson(res, 400, "Bad Request", "bad_request");
  });

  it("headers over the limit: 431, naming the limit", async () => {
    const res = await rawHttp(`GET /ok/${"a".repeat(5000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expectCatalogueJson(res, 431, "Request Header Fields Too Large", "request_header_fields_too_large");
    expect(JSON.parse(res.body).message).toContain("4096");
  });

  it("a request that does not arrive in time: 408", async () => {
    const res = await rawHttp("GET /ok HTTP/1.1\r\nHost: x\r\n");
    expectCatalogueJson(res, 408, "Request Timeout", "request_timeout");
  });

  it("a well-formed request still reaches the app", async () => {
    const res = await rawHttp("GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ ok: true });
  });
});
