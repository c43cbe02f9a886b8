import { gzipSync } from "node:zlib";
import { expectJsonError, rawHttp } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { llmError, useStack } from "./stack.ts";

const stack = useStack();
const CONVERSATIONS = "/api/v1/llm/conversations";

/** A request through the gateway with a body sent as given: the service parses it, the gateway passes it on untouched. */
async function post(headers: Record<string, string>, body: string | Buffer) {
  const key = await stack.createKey();
  return fetch(`${stack.gatewayUrl}${CONVERSATIONS}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key.secret}`, ...headers },
    body,
  });
}

describe("the service answers bad input forwarded verbatim with catalogue JSON", () => {
  it("JSON nested 5000 deep: 422 json_invalid, not an HTML stack trace", async () => {
    const deep = `{"metadata":${"[".repeat(5000)}${"]".repeat(5000)}}`;
    const body = await expectJsonError(await post({ "content-type": "application/json" }, deep), 422);
    expect(body.detail).toEqual([expect.objectContaining({ loc: ["body"], type: "json_invalid" })]);
  });

  it.each(["null", '"abc"', "1"])(
    "a body that is JSON but no object (%s): refused as the wrong type, nothing created",
    async (text) => {
      const body = await expectJsonError(await post({ "content-type": "application/json" }, text), 422);
      expect(body.detail).toEqual([expect.objectContaining({ loc: ["body"], type: "dict_type" })]);
    },
  );

  it("a method a known path does not serve: 405 with Allow, in the surface's JSON (through the gateway)", async () => {
    const key = await stack.createKey();
    const llm = await stack.call(key.secret, `${CONVERSATIONS}/conv_1`, { user: "alice", method: "PUT" });
    expect(llm.headers.get("allow")).toBe("DELETE, GET, HEAD, OPTIONS, POST");
    expect(await expectJsonError(llm, 405)).toEqual(
      llmError(
        "method_not_allowed",
        `PUT is not allowed on ${CONVERSATIONS}/conv_1; allowed: DELETE, GET, HEAD, OPTIONS, POST`,
      ),
    );
    const push = await stack.call(key.secret, "/api/v1/sandbox/sessions/s1/github/push", { user: "alice" });
    expect(push.headers.get("allow")).toBe("OPTIONS, POST");
    expect(await expectJsonError(push, 405)).toEqual({
      error: "Method Not Allowed",
      message: "GET is not allowed on /api/v1/sandbox/sessions/s1/github/push; allowed: OPTIONS, POST",
      code: "method_not_allowed",
    });
    // A path no endpoint serves stays a 404.
    await expectJsonError(
      await stack.call(key.secret, `${CONVERSATIONS}/conv_1/nothing`, { user: "alice" }),
      404,
    );
  });

  it("malformed percent-encoding in the path: 400", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, `${CONVERSATIONS}/%ZZ`, { user: "alice" });
    expect((await expectJsonError(res, 400)).error).toMatchObject({
      message: "The request path has malformed percent-encoding",
    });
  });

  it("a body that is not what Content-Encoding says: 400; one that is, is read", async () => {
    const bad = await post({ "content-type": "application/json", "content-encoding": "gzip" }, "{}");
    expect((await expectJsonError(bad, 400)).error).toMatchObject({
      message: "The request body is not valid gzip data",
    });
    const good = await post(
      { "content-type": "application/json", "content-encoding": "gzip" },
      gzipSync('{"metadata":{"team":"red"}}'),
    );
    expect(good.status).toBe(200);
    expect((await good.json()).metadata).toEqual({ team: "red" });
  });

  it.each([
    ["text/plain", '{"metadata":{"team":"red"}}'],
    ["application/x-www-form-urlencoded", "metadata[team]=red"],
  ])("Content-Type %s: 415, never a conversation with its metadata dropped", async (type, body) => {
    const res = await post({ "content-type": type }, body);
    expect(await expectJsonError(res, 415)).toEqual(
      llmError("unsupported_media_type", "Request bodies must be JSON (Content-Type: application/json)"),
    );
  });

  it("a POST without a body and without Content-Type still creates (the gateway forwards it chunked)", async () => {
    const key = await stack.createKey();
    const res = await rawHttp(
      stack.gatewayUrl,
      `POST ${CONVERSATIONS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key.secret}\r\nConnection: close\r\n\r\n`,
    );
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ object: "conversation", metadata: {} });
  });

  it("an 8000-character path reaches the service and gets JSON (no bare 431)", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, `${CONVERSATIONS}/${"a".repeat(8000)}`, { user: "alice" });
    expect((await expectJsonError(res, 404)).error).toMatchObject({ code: "not_found" });
  });

  it("the service's own HTTP server answers an Expect it cannot meet with JSON (417)", async () => {
    const res = await rawHttp(
      stack.serviceUrl,
      `POST ${CONVERSATIONS} HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
    );
    expect(res.status).toBe(417);
    expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(JSON.parse(res.body)).toEqual(
      llmError("expectation_failed", expect.stringContaining("100-continue")),
    );
  });

  it("the service's own HTTP server answers a malformed request with JSON", async () => {
    const res = await rawHttp(stack.serviceUrl, "BOGUS\r\n\r\n");
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toEqual({
      error: "Bad Request",
      message: "Malformed HTTP request",
      code: "bad_request",
    });
  });
});
