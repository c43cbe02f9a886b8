import { capturingLogger } from "@gw/test-kit";
import { type FakeMcpServer, startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { type FakeModernMcpServer, startFakeModernMcpServer } from "@gw/test-kit/mcp-upstream-modern";
import { JSONRPCErrorResponseSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newOrg } from "../../../test/authorization-helpers.ts";
import { useGateway } from "../../../test/harness.ts";
import { caller, MCP_ENV, mcpClient, startReplica } from "../../../test/mcp/mcp-helpers.ts";
import type { RunningGateway } from "../../server.ts";

const gw = useGateway(MCP_ENV);
let upstream: FakeMcpServer;
let modernUpstream: FakeModernMcpServer;
let replica: RunningGateway;
const replicaLog: string[] = [];

beforeAll(async () => {
  upstream = await startFakeMcpServer();
  modernUpstream = await startFakeModernMcpServer();
  replica = await startReplica(gw, {}, capturingLogger("debug", replicaLog).logger);
});
afterAll(async () => {
  await replica?.close();
  await upstream?.close();
  await modernUpstream?.close();
});

const MODERN = "2026-07-28";
type Rpc = {
  status: number;
  body: Record<string, unknown> & {
    error?: { code: number; message: string; data?: unknown };
    result?: Record<string, unknown>;
  };
};

/**
 * A minimal client of the 2026-07-28 revision (the installed SDKs speak only
 * the handshake era): raw JSON-RPC over fetch, its version and capabilities
 * in each request's `_meta`, its method and name mirrored in the headers.
 * `tamper` changes the headers after they were derived from the body.
 */
function modernClient(baseUrl: string, serverId: string, secret: string, user: string) {
  let n = 0;
  return async (
    method: string,
    params: Record<string, unknown> = {},
    tamper: (headers: Record<string, string>) => void = () => {},
    meta: Record<string, unknown> = {},
  ): Promise<Rpc> => {
    const body = {
      jsonrpc: "2.0",
      id: ++n,
      method,
      params: {
        ...params,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": MODERN,
          "io.modelcontextprotocol/clientInfo": { name: "modern-test-client", version: "1.0.0" },
          "io.modelcontextprotocol/clientCapabilities": {},
          ...meta,
        },
      },
    };
    const headers: Record<string, string> = {
      authorization: `Bearer ${secret}`,
      "x-on-behalf-of": user,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": MODERN,
      "mcp-method": method,
    };
    if (typeof params.name === "string") headers["mcp-name"] = params.name;
    tamper(headers);
    const res = await fetch(`${baseUrl}/api/v1/mcp/servers/${serverId}/mcp`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Rpc["body"] };
  };
}

/** A fresh organization where alice registered the fake upstream; bob is a reader. */
async function setUp(url = upstream.url) {
  const o = await newOrg(gw);
  const as = caller(gw.url, o.secret);
  const res = await as("alice", "/api/v1/mcp/servers", {
    json: { name: "docs", url, description: "The document store" },
  });
  expect(res.status).toBe(201);
  const { id } = (await res.json()) as { id: string };
  const granted = await o.grant("alice", {
    resourceType: "mcp_server",
    resourceId: id,
    userId: "bob",
    role: "reader",
  });
  expect(granted.status).toBe(204);
  return { o, id };
}

const textOf = (result: unknown) => (result as { content: { text: string }[] }).content[0]?.text;

describe("the MCP proxy serves the 2026-07-28 revision beside 2025-11-25", () => {
  it("a 2026-07-28 client and a 2025-11-25 client see the same tools and the same refusals, per role", async () => {
    const { o, id } = await setUp();
    for (const user of ["alice", "bob"]) {
      const legacy = await mcpClient(gw.url, id, o.secret, user);
      const modern = modernClient(gw.url, id, o.secret, user);
      const legacyNames = (await legacy.listTools()).tools.map((t) => t.name).sort();
      const listed = await modern("tools/list");
      expect(listed.status).toBe(200);
      const result = listed.body.result as { tools: { name: string }[] } & Record<string, unknown>;
      expect(result.tools.map((t) => t.name).sort()).toEqual(legacyNames);
      // This principal's list: no shared cache may serve it to another.
      expect(result).toMatchObject({ resultType: "complete", ttlMs: 0, cacheScope: "private" });
      expect((result._meta as Record<string, unknown>)["io.modelcontextprotocol/serverInfo"]).toEqual({
        name: "docs",
        version: "1.0.0",
      });

      const called = await modern("tools/call", { name: "search", arguments: { query: "q" } });
      expect(called.status).toBe(200);
      expect(called.body.result).toMatchObject({ resultType: "complete" });
      expect(textOf(called.body.result)).toBe("found: q");

      const before = upstream.calls.length;
      const modernDenied = await modern("tools/call", { name: "delete_file", arguments: { path: "/x" } });
      const legacyDenied = await legacy.callTool({ name: "delete_file", arguments: { path: "/x" } }).then(
        (r) => r,
        (e: unknown) => e,
      );
      if (user === "bob") {
        expect(modernDenied.status).toBe(200);
        expect(modernDenied.body.error).toEqual({ code: -32602, message: "Unknown tool: delete_file" });
        expect(legacyDenied).toBeInstanceOf(McpError);
        expect((legacyDenied as McpError).code).toBe(modernDenied.body.error?.code);
        expect((legacyDenied as McpError).message).toContain(modernDenied.body.error?.message);
        expect(upstream.calls.length).toBe(before);
      } else {
        expect(textOf(modernDenied.body.result)).toBe("deleted /x");
        expect(textOf(legacyDenied)).toBe("deleted /x");
      }
      await legacy.close();
    }
  });

  it("server/discover names the versions, the capabilities and the server; legacy methods and unknown ones are 404 -32601", async () => {
    const { o, id } = await setUp();
    const modern = modernClient(gw.url, id, o.secret, "bob");
    const discovered = await modern("server/discover");
    expect(discovered).toEqual({
      status: 200,
      body: {
        jsonrpc: "2.0",
        id: 1,
        result: {
          resultType: "complete",
          supportedVersions: ["2026-07-28", "2025-11-25", "2025-06-18"],
          capabilities: { tools: {} },
          instructions: "The document store",
          ttlMs: 0,
          cacheScope: "private",
          _meta: { "io.modelcontextprotocol/serverInfo": { name: "docs", version: "1.0.0" } },
        },
      },
    });
    for (const method of ["ping", "initialize", "resources/list"]) {
      const refused = await modern(method);
      expect(refused.status).toBe(404);
      expect(refused.body.error?.code).toBe(-32601);
    }
    // A reader needs no more than reading the server; a stranger finds nothing.
    const stranger = await newOrg(gw);
    expect((await modernClient(gw.url, id, stranger.secret, "bob")("server/discover")).status).toBe(404);
  });

  it("headers that disagree with the body, or are missing, are 400 HeaderMismatch (-32020) and nothing is called", async () => {
    const { o, id } = await setUp();
    const modern = modernClient(gw.url, id, o.secret, "alice");
    const before = upstream.calls.length;
    const call = { name: "search", arguments: { query: "q" } };
    const cases: [string, (h: Record<string, string>) => void][] = [
      ["no MCP-Protocol-Version", (h) => delete h["mcp-protocol-version"]],
      ["another MCP-Protocol-Version", (h) => (h["mcp-protocol-version"] = "2025-11-25")],
      ["no Mcp-Method", (h) => delete h["mcp-method"]],
      ["another Mcp-Method", (h) => (h["mcp-method"] = "tools/list")],
      ["no Mcp-Name", (h) => delete h["mcp-name"]],
      ["another Mcp-Name", (h) => (h["mcp-name"] = "read_file")],
      [
        "another Mcp-Name, encoded",
        (h) => (h["mcp-name"] = `=?base64?${Buffer.from("read_file").toString("base64")}?=`),
      ],
    ];
    for (const [why, tamper] of cases) {
      const refused = await modern("tools/call", call, tamper);
      expect([why, refused.status, refused.body.error?.code]).toEqual([why, 400, -32020]);
      expect(refused.body.error?.message).toMatch(/^Header mismatch: /);
      expect(JSONRPCErrorResponseSchema.safeParse(refused.body).success).toBe(true);
    }
    expect(upstream.calls.length).toBe(before);
    // A name sent in the Base64 sentinel form is decoded before it is compared.
    const encoded = await modern("tools/call", call, (h) => {
      h["mcp-name"] = `=?base64?${Buffer.from("search").toString("base64")}?=`;
    });
    expect(textOf(encoded.body.result)).toBe("found: q");
    // A modern version header over a body without `_meta`'s version is a mismatch too.
    const res = await fetch(`${gw.url}/api/v1/mcp/servers/${id}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${o.secret}`,
        "x-on-behalf-of": "alice",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/list",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list", params: {} }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ id: 7, error: { code: -32020 } });
  });

  it("a version it does not speak is 400 UnsupportedProtocolVersion (-32022) listing those it does, in either era", async () => {
    const { o, id } = await setUp();
    const modern = modernClient(gw.url, id, o.secret, "alice");
    const future = await modern("tools/list", {}, (h) => (h["mcp-protocol-version"] = "2030-01-01"), {
      "io.modelcontextprotocol/protocolVersion": "2030-01-01",
    });
    const expected = {
      code: -32022,
      message: "Unsupported protocol version",
      data: { supported: ["2026-07-28", "2025-11-25", "2025-06-18"], requested: "2030-01-01" },
    };
    expect([future.status, future.body.error]).toEqual([400, expected]);
    const res = await fetch(`${gw.url}/api/v1/mcp/servers/${id}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${o.secret}`,
        "content-type": "application/json",
        "mcp-protocol-version": "2030-01-01",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/list" }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ jsonrpc: "2.0", id: 3, error: expected });
    // Capabilities are declared on every request: without them the request is invalid.
    const bare = await modern("tools/list", {}, () => {}, {
      "io.modelcontextprotocol/clientCapabilities": undefined,
    });
    expect([bare.status, bare.body.error?.code]).toEqual([400, -32602]);
  });
});

describe("towards an upstream that speaks only 2026-07-28", () => {
  it("clients of both eras list and call through it per role; the gateway sends _meta and the mirrored headers, never the caller's credential", async () => {
    const { o, id } = await setUp(modernUpstream.url);
    const put = await caller(gw.url, o.secret)("alice", `/api/v1/mcp/servers/${id}/credentials/shared`, {
      method: "PUT",
      json: { type: "bearer", token: "upstream-secret" },
    });
    expect(put.status).toBe(200);
    for (const [user, names] of [
      ["alice", ["delete_file", "search"]],
      ["bob", ["search"]],
    ] as const) {
      const legacy = await mcpClient(gw.url, id, o.secret, user);
      const modern = modernClient(gw.url, id, o.secret, user);
      expect((await legacy.listTools()).tools.map((t) => t.name).sort()).toEqual(names);
      const listed = (await modern("tools/list")).body.result as { tools: { name: string }[] };
      expect(listed.tools.map((t) => t.name).sort()).toEqual(names);
      expect(textOf(await legacy.callTool({ name: "search", arguments: { query: "a" } }))).toBe("found: a");
      modernUpstream.sse = true;
      expect(
        textOf((await modern("tools/call", { name: "search", arguments: { query: "b" } })).body.result),
      ).toBe("found: b");
      modernUpstream.sse = false;
      const calls = modernUpstream.calls.length;
      const denied = await modern("tools/call", { name: "delete_file", arguments: { path: "/x" } });
      if (user === "bob") {
        expect(denied.body.error).toEqual({ code: -32602, message: "Unknown tool: delete_file" });
        expect(modernUpstream.calls.length).toBe(calls);
      } else expect(textOf(denied.body.result)).toBe("deleted /x");
      await legacy.close();
    }
    // The upstream's own refusal of an unknown tool passes on with its code.
    const unknown = await modernClient(
      gw.url,
      id,
      o.secret,
      "alice",
    )("tools/call", { name: "nope", arguments: {} });
    expect(unknown.body.error?.code).toBe(-32602);
    const modernRequests = modernUpstream.requests.filter((r) => r.method !== "initialize");
    expect(modernRequests.length).toBeGreaterThan(0);
    for (const r of modernRequests) {
      expect(r.meta?.["io.modelcontextprotocol/protocolVersion"]).toBe(MODERN);
      expect(r.headers["mcp-protocol-version"]).toBe(MODERN);
      expect(r.headers["mcp-method"]).toBe(r.method);
    }
    for (const c of modernUpstream.calls) {
      expect(c.headers["mcp-name"]).toBe(c.tool);
      expect(c.headers.authorization).toBe("Bearer upstream-secret");
      expect(c.headers["x-on-behalf-of"]).toBeUndefined();
    }
  });
});

describe("the proxy's refusals of a JSON-RPC request are JSON-RPC errors too", () => {
  it("with the request's id and the same message, WWW-Authenticate unchanged; not JSON-RPC keeps the catalogue's body", async () => {
    const { o, id } = await setUp();
    const url = `${gw.url}/api/v1/mcp/servers/${id}/mcp`;
    const post = (headers: Record<string, string>, body: unknown) =>
      fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body: JSON.stringify(body),
      });
    const bare = await post({}, { jsonrpc: "2.0", id: "list-1", method: "tools/list" });
    expect(bare.status).toBe(401);
    expect(bare.headers.get("www-authenticate")).toContain("resource_metadata=");
    const unauthorized = await bare.json();
    // A JSON-RPC error response (what the MCP Python SDK reads), and the catalogue's message and code beside it.
    expect(unauthorized).toEqual({
      jsonrpc: "2.0",
      id: "list-1",
      error: {
        code: -32001,
        message: unauthorized.message,
        data: { error: "Unauthorized", code: "missing_credential" },
      },
      message: expect.any(String),
      code: "missing_credential",
    });
    expect(JSONRPCErrorResponseSchema.strip().parse(unauthorized).error.code).toBe(-32001);
    // The cause is authentication's, as on every other route.
    const unknownKey = await post(
      { authorization: "Bearer gwsk_notakeyofthisgatewaynotakeyofthisgatewayx" },
      { jsonrpc: "2.0", id: 2, method: "tools/list" },
    );
    expect(unknownKey.status).toBe(401);
    expect(await unknownKey.json()).toMatchObject({
      error: { code: -32001, data: { code: "invalid_api_key" } },
      code: "invalid_api_key",
    });

    const { secret: noCall } = await gw.createKey({ org: o.org, owner: "alice", permissions: ["mcp:read"] });
    const refused = await post(
      { authorization: `Bearer ${noCall}` },
      { jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "search" } },
    );
    expect(refused.status).toBe(403);
    expect(refused.headers.get("www-authenticate")).toContain('error="insufficient_scope"');
    expect(await refused.json()).toEqual({
      jsonrpc: "2.0",
      id: 9,
      error: {
        code: -32003,
        message: "This credential lacks the 'mcp:call' permission",
        data: { error: "Forbidden", code: "missing_permission" },
      },
      message: "This credential lacks the 'mcp:call' permission",
      code: "missing_permission",
    });
    // The official client shows that message, not a generic failure.
    const client = mcpClient(gw.url, id, noCall);
    await expect(client).rejects.toThrow(/lacks the 'mcp:call' permission/);

    // Not a JSON-RPC request: the catalogue's body, as everywhere.
    const notRpc = await fetch(url, { method: "GET" });
    expect(notRpc.status).toBe(401);
    expect(await notRpc.json()).toMatchObject({ error: "Unauthorized", message: expect.any(String) });
    // Authenticated, a GET (no SSE stream here) or a DELETE (no session to end): 405 from the catalogue.
    for (const method of ["GET", "DELETE"]) {
      const other = await fetch(url, { method, headers: { authorization: `Bearer ${o.secret}` } });
      expect(other.status).toBe(405);
      expect(other.headers.get("allow")).toBe("POST");
      expect(await other.json()).toEqual({
        error: "Method Not Allowed",
        message: "This MCP endpoint answers POST only (no SSE stream)",
        code: "method_not_allowed",
      });
    }
  });

  it("every other refusal of a POST is one too: 404 (no role), 429 (the key's window, its headers kept), unreadable JSON (-32700), not JSON, too large", async () => {
    const { o, id } = await setUp();
    const url = `${gw.url}/api/v1/mcp/servers/${id}/mcp`;
    const post = (secret: string | undefined, body: string, type = "application/json") =>
      fetch(url, {
        method: "POST",
        headers: {
          "content-type": type,
          accept: "application/json, text/event-stream",
          "x-on-behalf-of": "dave",
          ...(secret ? { authorization: `Bearer ${secret}` } : {}),
        },
        body,
      });
    const refusal = (
      id: string | number | null,
      code: number,
      message: string,
      error: string,
      cause: string,
    ) => ({
      jsonrpc: "2.0",
      id,
      error: { code, message, data: { error, code: cause } },
      message,
      code: cause,
    });

    // dave has no role on the server: 404, as an unknown id, the message JSON-RPC's too.
    const unknown = await post(o.secret, JSON.stringify({ jsonrpc: "2.0", id: "l-1", method: "tools/list" }));
    expect(unknown.status).toBe(404);
    const notFound = await unknown.json();
    expect(notFound).toEqual(refusal("l-1", -32004, "No such MCP server", "Not Found", "not_found"));
    expect(JSONRPCErrorResponseSchema.strip().parse(notFound).error.message).toBe("No such MCP server");
    // The official client shows it (its status as the error's code), not a bare "Not Found".
    await expect(mcpClient(gw.url, id, o.secret, "dave")).rejects.toMatchObject({
      code: 404,
      message: expect.stringContaining('"code":-32004,"message":"No such MCP server"'),
    });

    // The key's request window: 429 with Retry-After and the rate-limit headers, and the JSON-RPC error.
    const { secret: once } = await gw.createKey({ org: o.org, owner: "backend", limits: { day: 1 } });
    const bob = await mcpClient(gw.url, id, once, "bob");
    expect(textOf(await bob.callTool({ name: "search", arguments: { query: "1" } }))).toBe("found: 1");
    await expect(bob.callTool({ name: "search", arguments: { query: "2" } })).rejects.toMatchObject({
      code: 429,
      message: expect.stringContaining('"message":"Rate limit exceeded (day)"'),
    });
    await bob.close();
    const limited = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${once}`,
        "x-on-behalf-of": "bob",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 12, method: "tools/call", params: { name: "search" } }),
    });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(limited.headers.get("ratelimit")).toEqual(expect.any(String));
    expect(limited.headers.get("ratelimit-policy")).toEqual(expect.any(String));
    const tooMany = await limited.json();
    expect(tooMany).toEqual(
      refusal(12, -32029, "Rate limit exceeded (day)", "Rate limit exceeded", "rate_limited"),
    );

    // Unreadable JSON: JSON-RPC's parse error (no id could be read), the 422's detail beside it.
    const unreadable = await post(o.secret, '{"jsonrpc":"2.0","id":1,');
    expect(unreadable.status).toBe(422);
    expect(await unreadable.json()).toEqual({
      ...refusal(null, -32700, "body: JSON decode error", "Unprocessable Entity", "validation_failed"),
      detail: [
        {
          loc: ["body"],
          msg: "JSON decode error",
          type: "json_invalid",
          ctx: { error: expect.any(String) },
        },
      ],
    });
    // Without a credential, the same body: the 401 comes first, still a JSON-RPC error.
    const anonymous = await post(undefined, '{"jsonrpc":"2.0","id":1,');
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32001 } });

    const notJson = await post(o.secret, "tools/list", "text/plain");
    expect(notJson.status).toBe(415);
    expect(await notJson.json()).toEqual(
      refusal(
        null,
        -32015,
        "Request bodies must be JSON (Content-Type: application/json)",
        "Unsupported Media Type",
        "unsupported_media_type",
      ),
    );
    const huge = await post(o.secret, JSON.stringify({ jsonrpc: "2.0", id: 3, pad: "x".repeat(1_100_000) }));
    expect(huge.status).toBe(413);
    expect(await huge.json()).toMatchObject({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32013, data: { error: "Payload Too Large", code: "payload_too_large" } },
    });
  });

  it("an unexpected error is JSON-RPC's Internal error with the request's id, logged, its own text never shown", async () => {
    const { o, id } = await setUp();
    const log: string[] = [];
    // A fault no refusal covers: thrown once SpiceDB has answered the server's check.
    const faulty = await startReplica(gw, {}, capturingLogger("debug", log).logger, {
      authorizationHooks: {
        beforeKeep: async (_principal, resource) => {
          if (resource.type === "mcp_server") throw new Error("kaboom: a secret detail");
        },
      },
    });
    try {
      const res = await fetch(`${faulty.url}/api/v1/mcp/servers/${id}/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${o.secret}`,
          "x-on-behalf-of": "alice",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: "u-1", method: "tools/list" }),
      });
      expect(res.status).toBe(500);
      const requestId = res.headers.get("x-request-id");
      const message = `Internal Server Error (request ${requestId})`;
      const body = await res.json();
      expect(body).toEqual({
        jsonrpc: "2.0",
        id: "u-1",
        error: { code: -32603, message, data: { error: "Internal Server Error", code: "internal" } },
        message,
        code: "internal",
      });
      expect(JSON.stringify(body)).not.toContain("kaboom");
      const logged = log.map((l) => JSON.parse(l) as { msg: string; requestId?: string; err?: unknown });
      expect(logged.filter((l) => l.msg === "unhandled error")).toEqual([
        expect.objectContaining({
          requestId,
          err: expect.objectContaining({ message: "kaboom: a secret detail" }),
        }),
      ]);
    } finally {
      await faulty.close();
    }
  });

  it("a client that came by another host name than GATEWAY_PUBLIC_URL's is logged once per host", async () => {
    const { id } = await setUp();
    const url = `${replica.url}/api/v1/mcp/servers/${id}/mcp`;
    const unauthenticated = (host: string) =>
      fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-host": host },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
    const warnings = () =>
      replicaLog
        .map((l) => JSON.parse(l) as { msg: string; host?: string; publicUrl?: string })
        .filter((l) => l.msg.includes("other than GATEWAY_PUBLIC_URL"));
    const publicHost = new URL(gw.publicUrl).host;
    expect((await unauthenticated(publicHost)).status).toBe(401);
    expect((await unauthenticated("mcp.internal.example")).status).toBe(401);
    expect((await unauthenticated("mcp.internal.example")).status).toBe(401);
    expect(warnings().map((w) => [w.host, w.publicUrl])).toEqual([["mcp.internal.example", gw.publicUrl]]);
  });
});
