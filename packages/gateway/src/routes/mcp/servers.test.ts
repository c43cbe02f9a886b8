import { expectJsonError } from "@gw/test-kit";
import { useFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { describe, expect, it } from "vitest";
import { newOrg } from "../../../test/authorization-helpers.ts";
import { useGateway } from "../../../test/harness.ts";
import { caller, MCP_ENV } from "../../../test/mcp/mcp-helpers.ts";

const gw = useGateway(MCP_ENV);
const upstream = useFakeMcpServer();

const SERVERS = "/api/v1/mcp/servers";

describe("an MCP server's name and description are text PostgreSQL keeps as sent", () => {
  it.each([
    ["name", "a\u0000b"],
    ["name", "a\ud800b"],
    ["description", "\u0000"],
    ["description", "x\udc00"],
  ])("%s %j: 422 at that field on register and on change, nothing stored", async (field, text) => {
    const o = await newOrg(gw);
    const as = caller(gw.url, o.secret);
    const refused = await as("alice", SERVERS, { json: { name: "docs", url: upstream.url, [field]: text } });
    expect((await expectJsonError(refused, 422)).detail).toEqual([
      expect.objectContaining({
        loc: ["body", field],
        msg: "String should contain neither U+0000 nor a lone surrogate",
      }),
    ]);
    expect((await (await as("alice", SERVERS)).json()).data).toEqual([]);

    const created = await as("alice", SERVERS, { json: { name: "😀 docs", url: upstream.url } });
    expect(created.status).toBe(201);
    const { id } = await created.json();
    const changed = await as("alice", `${SERVERS}/${id}`, { method: "PATCH", json: { [field]: text } });
    expect((await expectJsonError(changed, 422)).detail).toEqual([
      expect.objectContaining({ loc: ["body", field] }),
    ]);
    expect(await (await as("alice", `${SERVERS}/${id}`)).json()).toMatchObject({ name: "😀 docs" });
  });

  it("an id that is no server id (100 emoji, U+0000): 404 as any unknown server, on every route", async () => {
    const o = await newOrg(gw);
    const as = caller(gw.url, o.secret);
    for (const id of ["😀".repeat(100), "mcp_\u0000"]) {
      const path = `${SERVERS}/${encodeURIComponent(id)}`;
      for (const [suffix, init] of [
        ["", {}],
        ["", { method: "DELETE" }],
        ["", { method: "PATCH", json: { name: "x" } }],
        ["/tools", {}],
        ["/credentials", {}],
        ["/credentials/me", { method: "PUT", json: { type: "bearer", token: "t" } }],
        ["/mcp", { json: { jsonrpc: "2.0", id: 1, method: "tools/list" } }],
      ] as const) {
        const res = await as("alice", `${path}${suffix}`, init);
        expect(res.status, `${suffix} ${JSON.stringify(init)}`).toBe(404);
      }
    }
  });
});

describe("the proxy's tools/call with a tool name SpiceDB cannot hold", () => {
  it("100 emoji (1,200 characters encoded): a JSON-RPC error naming the limit, as an unknown tool gets its own, never a 500", async () => {
    const o = await newOrg(gw);
    const as = caller(gw.url, o.secret);
    const { id } = await (await as("alice", SERVERS, { json: { name: "docs", url: upstream.url } })).json();
    const call = (name: string) =>
      as("alice", `${SERVERS}/${id}/mcp`, {
        json: { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name, arguments: {} } },
      });
    for (const [name, message] of [
      [
        "😀".repeat(100),
        "Invalid tool name: the name takes more than 384 bytes encoded (MCP_MAX_TOOL_NAME_BYTES)",
      ],
      ["no_such_tool", "Unknown tool: no_such_tool"],
    ] as const) {
      const res = await call(name);
      expect(res.status, name.slice(0, 4)).toBe(200);
      expect(await res.json()).toEqual({ jsonrpc: "2.0", id: 7, error: { code: -32602, message } });
    }
  });
});

describe("a URL that carries credentials", () => {
  const PASSWORD = "pw-5e1c0a9b";
  it.each([
    [`http://user:${PASSWORD}@127.0.0.1:18490/mcp`, "http://127.0.0.1:18490/mcp"],
    [`https://${PASSWORD}@mcp.example/mcp`, "https://mcp.example/mcp"],
  ])("%s: 422 at body.url on register and on change, never echoing the password", async (url, shown) => {
    const o = await newOrg(gw);
    const as = caller(gw.url, o.secret);
    const refused = await as("alice", SERVERS, { json: { name: "x", url } });
    const text = await refused.clone().text();
    expect((await expectJsonError(refused, 422)).detail).toEqual([
      {
        loc: ["body", "url"],
        msg: "Value error, the URL must not carry credentials: store them with PUT …/credentials",
        type: "value_error",
        input: shown,
      },
    ]);
    expect(text).not.toContain(PASSWORD);

    const { id } = await (await as("alice", SERVERS, { json: { name: "x", url: upstream.url } })).json();
    const changed = await as("alice", `${SERVERS}/${id}`, { method: "PATCH", json: { url } });
    const changedText = await changed.clone().text();
    expect((await expectJsonError(changed, 422)).detail).toEqual([
      expect.objectContaining({ loc: ["body", "url"], input: shown }),
    ]);
    expect(changedText).not.toContain(PASSWORD);
  });

  it("one that is no URL but may hold credentials: refused without its input", async () => {
    const o = await newOrg(gw);
    const as = caller(gw.url, o.secret);
    const refused = await as("alice", SERVERS, {
      json: { name: "x", url: `http://user:${PASSWORD}@[not-a-host/mcp` },
    });
    const text = await refused.clone().text();
    expect((await expectJsonError(refused, 422)).detail).toEqual([
      { loc: ["body", "url"], msg: "Value error, not a valid URL", type: "value_error" },
    ]);
    expect(text).not.toContain(PASSWORD);
    // Without an `@` nothing can be a password: shown as sent.
    const plain = await as("alice", SERVERS, { json: { name: "x", url: "http://[not-a-host/mcp" } });
    expect((await expectJsonError(plain, 422)).detail).toEqual([
      expect.objectContaining({ input: "http://[not-a-host/mcp" }),
    ]);
  });
});
