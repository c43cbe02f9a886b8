import { brotliCompressSync, gzipSync } from "node:zlib";
import { expectJsonError, rawHttp } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { useGateway } from "./harness.ts";

const gw = useGateway();
const KEYS = "/api/v1/admin/api-keys";
const WHOAMI = "/api/v1/authentication/whoami";

async function adminSecret() {
  return (await gw.createKey({ permissions: ["admin:api-keys"] })).secret;
}

/** `{"owner":"bob","name":[[…]]}` with `depth` levels of nesting in all. */
const nested = (depth: number) => `{"owner":"bob","name":${"[".repeat(depth - 1)}${"]".repeat(depth - 1)}}`;

describe("JSON nesting is bounded", () => {
  it.each([65, 5_000, 200_000])("%i levels: 422 json_invalid at ['body'], in JSON", async (depth) => {
    const res = await gw.call(KEYS, {
      method: "POST",
      bearer: await adminSecret(),
      headers: { "content-type": "application/json" },
      body: nested(depth),
    });
    const body = await expectJsonError(res, 422);
    expect(body.detail).toEqual([
      {
        loc: ["body"],
        msg: "JSON decode error",
        type: "json_invalid",
        ctx: { error: "JSON nested deeper than 64 levels" },
      },
    ]);
  });

  it("64 levels are parsed and validated as usual; brackets inside strings do not count", async () => {
    const secret = await adminSecret();
    const res = await gw.call(KEYS, {
      method: "POST",
      bearer: secret,
      headers: { "content-type": "application/json" },
      body: nested(64),
    });
    const body = await expectJsonError(res, 422);
    expect(body.detail).toEqual([
      expect.objectContaining({ loc: ["body", "name"], type: "string_type", input: [expect.any(Array)] }),
    ]);
    const created = await gw.call(KEYS, {
      method: "POST",
      bearer: secret,
      json: { owner: "bob", name: `${"[{".repeat(40)}\\"` },
    });
    expect(created.status).toBe(201);
  });
});

describe("malformed percent-encoding in a path", () => {
  it.each(["DELETE", "PATCH"])("%s of an admin key id with a bad escape: 400 in JSON", async (method) => {
    const res = await gw.call(`${KEYS}/%ZZ`, {
      method,
      bearer: await adminSecret(),
      ...(method === "PATCH" ? { json: { name: "x" } } : {}),
    });
    expect(await expectJsonError(res, 400)).toEqual({
      error: "Bad Request",
      message: "The request path has malformed percent-encoding",
      code: "bad_request",
    });
  });
});

describe("bodies that are not what their headers say", () => {
  it.each([
    ["gzip", Buffer.from('{"owner":"bob"}')],
    ["br", Buffer.from('{"owner":"bob"}')],
    ["deflate", gzipSync('{"owner":"bob"}')],
  ])("Content-Encoding %s over other bytes: 400 in JSON", async (encoding, bytes) => {
    const res = await gw.call(KEYS, {
      method: "POST",
      bearer: await adminSecret(),
      headers: { "content-type": "application/json", "content-encoding": encoding },
      body: bytes,
    });
    expect(await expectJsonError(res, 400)).toEqual({
      error: "Bad Request",
      message: `The request body is not valid ${encoding} data`,
      code: "bad_request",
    });
  });

  it("an unknown Content-Encoding: 415; real gzip and brotli are read", async () => {
    const secret = await adminSecret();
    const unknown = await gw.call(KEYS, {
      method: "POST",
      bearer: secret,
      headers: { "content-type": "application/json", "content-encoding": "x-snappy" },
      body: '{"owner":"bob"}',
    });
    expect((await expectJsonError(unknown, 415)).error).toBe("Unsupported Media Type");
    for (const [encoding, body] of [
      ["gzip", gzipSync('{"owner":"bob","name":"zipped"}')],
      ["br", brotliCompressSync('{"owner":"bob","name":"zipped"}')],
    ] as const) {
      const res = await gw.call(KEYS, {
        method: "POST",
        bearer: secret,
        headers: { "content-type": "application/json", "content-encoding": encoding },
        body,
      });
      expect(res.status).toBe(201);
      expect((await res.json()).name).toBe("zipped");
    }
  });

  it.each([
    ["text/plain", '{"owner":"bob","name":"lost"}'],
    ["application/x-www-form-urlencoded", "owner=bob&name=lost"],
    ["application/json; charset=utf-16", '{"owner":"bob"}'],
  ])("Content-Type %s on a JSON endpoint: 415, nothing created", async (type, body) => {
    const { secret } = await gw.createKey({ permissions: ["admin:api-keys"] });
    const res = await gw.call(KEYS, {
      method: "POST",
      bearer: secret,
      headers: { "content-type": type },
      body,
    });
    expect((await expectJsonError(res, 415)).error).toBe("Unsupported Media Type");
    const list = await (await gw.call(KEYS, { bearer: secret })).json();
    expect(list.data).toHaveLength(1);
  });

  it("a request without a body needs no Content-Type, also when sent chunked", async () => {
    const secret = await adminSecret();
    const bare = await gw.call(KEYS, { method: "POST", bearer: secret });
    expect((await expectJsonError(bare, 422)).detail).toEqual([
      { loc: ["body"], msg: "Field required", type: "missing" },
    ]);
    const chunked = await rawHttp(
      gw.url,
      `POST ${KEYS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${secret}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n`,
    );
    expect(chunked.status).toBe(422);
    expect(JSON.parse(chunked.body).detail[0].type).toBe("missing");
  });
});

describe("requests Node itself refuses", () => {
  it("a path too long for the header limit: 431 in JSON", async () => {
    const res = await gw.call(`/api/v1/llm/conversations/${"a".repeat(20_000)}`);
    expect(await expectJsonError(res, 431)).toEqual({
      error: "Request Header Fields Too Large",
      message: "The request line and headers exceed 16384 bytes",
      code: "request_header_fields_too_large",
    });
  });

  it("a malformed request line: 400 in JSON", async () => {
    const res = await rawHttp(gw.url, "GET /healthz HTTP/1.1 extra\r\nHost: x\r\n\r\n");
    expect(res.status).toBe(400);
    expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(JSON.parse(res.body)).toEqual({
      error: "Bad Request",
      message: "Malformed HTTP request",
      code: "bad_request",
    });
  });
});

describe("an Expect header other than 100-continue", () => {
  it.each([
    [
      "/healthz",
      {
        error: "Expectation Failed",
        message: expect.stringContaining("100-continue"),
        code: "expectation_failed",
      },
    ],
    [
      "/api/v1/llm/responses",
      {
        error: {
          message: expect.stringContaining("100-continue"),
          type: "invalid_request_error",
          param: null,
          code: "expectation_failed",
        },
      },
    ],
  ])("%s: 417 with the catalogue's JSON, not Node's bare status line", async (path, body) => {
    const res = await rawHttp(
      gw.url,
      `POST ${path} HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
    );
    expect(res.status).toBe(417);
    expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(JSON.parse(res.body)).toEqual(body);
  });
});

describe("repeated identity headers", () => {
  const raw = (headers: string[]) =>
    rawHttp(
      gw.url,
      `GET ${WHOAMI} HTTP/1.1\r\nHost: x\r\n${headers.join("\r\n")}\r\nConnection: close\r\n\r\n`,
    );

  it("two X-On-Behalf-Of headers: 422 at ['header','x-on-behalf-of'], never the user 'bob, carol'", async () => {
    const { secret } = await gw.createKey();
    const res = await raw([
      `Authorization: Bearer ${secret}`,
      "X-On-Behalf-Of: bob",
      "X-On-Behalf-Of: carol",
    ]);
    expect(res.status).toBe(422);
    expect(JSON.parse(res.body)).toEqual({
      detail: [
        { loc: ["header", "x-on-behalf-of"], msg: "X-On-Behalf-Of must be sent once", type: "value_error" },
      ],
    });
    const single = await raw([`Authorization: Bearer ${secret}`, "X-On-Behalf-Of: bob, carol"]);
    expect(JSON.parse(single.body).user).toBe("bob, carol");
  });

  it("two Authorization headers: 401, whichever of them is valid", async () => {
    const { secret } = await gw.createKey();
    for (const pair of [
      [secret, "gwsk_not-a-key"],
      ["gwsk_not-a-key", secret],
      [secret, secret],
    ]) {
      const res = await raw(pair.map((s) => `Authorization: Bearer ${s}`));
      expect(res.status).toBe(401);
      expect(res.headers["www-authenticate"]).toBe('Bearer realm="gateway"');
      expect(JSON.parse(res.body)).toEqual({
        error: "Unauthorized",
        message: "Send one Authorization header, not several",
        code: "ambiguous_credential",
      });
    }
  });
});
