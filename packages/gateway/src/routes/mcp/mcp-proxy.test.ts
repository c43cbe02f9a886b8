import { RedisConsistencyTokens, ResourceAuthorization, SpiceDBClient } from "@gw/core/authz";
import { McpToolAuthorization } from "@gw/core/mcp";
import { createPostgres } from "@gw/core/postgres";
import { capturingLogger } from "@gw/test-kit";
import { type FakeMcpServer, startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { newOrg, type Org } from "../../../test/authorization-helpers.ts";
import { useGateway } from "../../../test/harness.ts";
import { caller, MCP_ENV, mcpClient, startReplica } from "../../../test/mcp/mcp-helpers.ts";
import type { RunningGateway } from "../../server.ts";

const gw = useGateway(MCP_ENV);
let upstream: FakeMcpServer;
let replica: RunningGateway;
const replicaLog: string[] = [];

beforeAll(async () => {
  upstream = await startFakeMcpServer();
  replica = await startReplica(gw, {}, capturingLogger("debug", replicaLog).logger);
});
afterAll(async () => {
  await replica?.close();
  await upstream?.close();
});

const textOf = (result: unknown) =>
  ((result as { content: { text: string }[] }).content[0] ?? { text: "" }).text;

/** A fresh organization where alice registered the fake upstream; bob is a reader. */
async function setUp(): Promise<{ o: Org; as: ReturnType<typeof caller>; id: string }> {
  const o = await newOrg(gw);
  const as = caller(gw.url, o.secret);
  const res = await as("alice", "/api/v1/mcp/servers", {
    json: { name: "docs", url: upstream.url, description: "The document store" },
  });
  expect(res.status).toBe(201);
  const server = await res.json();
  expect(server).toEqual({
    id: expect.stringMatching(/^mcp_[0-9a-f]{24}$/),
    object: "mcp.server",
    name: "docs",
    url: upstream.url,
    description: "The document store",
    created_at: expect.any(Number),
  });
  const granted = await o.grant("alice", {
    resourceType: "mcp_server",
    resourceId: server.id,
    userId: "bob",
    role: "reader",
  });
  expect(granted.status).toBe(204);
  return { o, as, id: server.id };
}

describe("the MCP proxy with the official SDK client", () => {
  it("lists per role: the owner sees every tool, a reader only the read-only ones; a reader cannot call a writer tool, answered exactly as an unknown tool", async () => {
    const { o, id } = await setUp();
    const alice = await mcpClient(gw.url, id, o.secret, "alice");
    const bob = await mcpClient(gw.url, id, o.secret, "bob");
    const names = async (c: typeof alice) => (await c.listTools()).tools.map((t) => t.name).sort();
    expect(await names(alice)).toEqual([
      "delete_file",
      "lookup",
      "read_file",
      "search",
      "send_email",
      "slow",
    ]);
    expect(await names(bob)).toEqual(["lookup", "read_file", "search", "slow"]);

    expect(textOf(await bob.callTool({ name: "search", arguments: { query: "q1" } }))).toBe("found: q1");
    const before = upstream.calls.length;
    const denied = await bob.callTool({ name: "delete_file", arguments: { path: "/x" } }).catch((e) => e);
    const unknown = await bob.callTool({ name: "no_such_tool", arguments: { path: "/x" } }).catch((e) => e);
    expect(denied).toBeInstanceOf(McpError);
    expect(unknown).toBeInstanceOf(McpError);
    expect([denied.code, denied.message.replace("delete_file", "T")]).toEqual([
      unknown.code,
      unknown.message.replace("no_such_tool", "T"),
    ]);
    expect(denied.code).toBe(-32602);
    expect(upstream.calls.length).toBe(before);
    expect(textOf(await alice.callTool({ name: "delete_file", arguments: { path: "/x" } }))).toBe(
      "deleted /x",
    );
    await Promise.all([alice.close(), bob.close()]);
  });

  it("an owner's tool policy changes both the list and the call at once; a disabled tool is nobody's", async () => {
    const { o, as, id } = await setUp();
    const bob = await mcpClient(gw.url, id, o.secret, "bob");
    await bob.listTools();
    const put = await as("alice", `/api/v1/mcp/servers/${id}/tools/delete_file`, {
      method: "PUT",
      json: { required_role: "reader" },
    });
    expect(put.status).toBe(200);
    const answered = await put.json();
    expect(answered).toEqual({
      name: "delete_file",
      description: expect.any(String),
      read_only_hint: false,
      required_role: "reader",
      disabled: false,
      offered: true,
    });
    expect((await bob.listTools()).tools.map((t) => t.name)).toContain("delete_file");
    expect(textOf(await bob.callTool({ name: "delete_file", arguments: { path: "/y" } }))).toBe("deleted /y");

    const off = await as("alice", `/api/v1/mcp/servers/${id}/tools/search`, {
      method: "PUT",
      json: { disabled: true },
    });
    expect(off.status).toBe(200);
    expect((await bob.listTools()).tools.map((t) => t.name)).not.toContain("search");
    await expect(bob.callTool({ name: "search", arguments: { query: "q" } })).rejects.toThrow(/Unknown tool/);
    const alice = await mcpClient(gw.url, id, o.secret, "alice");
    await expect(alice.callTool({ name: "search", arguments: { query: "q" } })).rejects.toThrow(
      /Unknown tool/,
    );

    const listed = await (await as("alice", `/api/v1/mcp/servers/${id}/tools`)).json();
    // The answer to the PUT is the tool as the list shows it.
    expect(listed.data.find((t: { name: string }) => t.name === "delete_file")).toEqual(answered);
    expect(await off.json()).toEqual(listed.data.find((t: { name: string }) => t.name === "search"));
    // A role set on a tool the upstream does not offer: said so.
    const absent = await as("alice", `/api/v1/mcp/servers/${id}/tools/not_offered`, {
      method: "PUT",
      json: { required_role: "owner" },
    });
    expect(await absent.json()).toEqual({
      name: "not_offered",
      description: null,
      read_only_hint: false,
      required_role: "owner",
      disabled: false,
      offered: false,
    });
    const roles = Object.fromEntries(
      listed.data.map((t: { name: string; required_role: string }) => [t.name, t.required_role]),
    );
    expect(roles).toEqual({
      delete_file: "reader",
      lookup: "reader",
      read_file: "reader",
      search: null,
      send_email: "writer",
      slow: "reader",
    });
    // Only an owner sets or reads tool policies; a reader is told so.
    expect((await as("bob", `/api/v1/mcp/servers/${id}/tools`)).status).toBe(403);
    expect(
      (
        await as("bob", `/api/v1/mcp/servers/${id}/tools/send_email`, {
          method: "PUT",
          json: { required_role: "reader" },
        })
      ).status,
    ).toBe(403);
    await Promise.all([alice.close(), bob.close()]);
  });

  it("a revoke on another replica stops bob's next call; the audit trail has each call with a hash of its arguments, never the arguments", async () => {
    const { o, id } = await setUp();
    const bob = await mcpClient(gw.url, id, o.secret, "bob");
    expect(textOf(await bob.callTool({ name: "read_file", arguments: { path: "/secret-plan" } }))).toBe(
      "contents of /secret-plan",
    );
    const revoked = await fetch(`${replica.url}/api/v1/authorization/llm/revoke`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${o.secret}`,
        "x-on-behalf-of": "alice",
        "content-type": "application/json",
      },
      body: JSON.stringify({ resourceType: "mcp_server", resourceId: id, userId: "bob", role: "reader" }),
    });
    expect(revoked.status).toBe(204);
    const next = await bob
      .callTool({ name: "read_file", arguments: { path: "/secret-plan" } })
      .catch((e) => e);
    expect(next).toBeInstanceOf(Error);
    expect(next.code).toBe(404);

    const audit = await (await o.audit("alice", "mcp_server", id)).json();
    const calls = audit.data.filter((r: { action: string }) => r.action === "call");
    expect(calls[0]).toMatchObject({
      action: "call",
      resourceType: "mcp_server",
      resourceId: id,
      tool: "read_file",
      decision: "allowed",
      outcome: "allowed",
      actor: { userId: "bob" },
      argumentsSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      durationMs: expect.any(Number),
    });
    expect(JSON.stringify(audit)).not.toContain("secret-plan");
    await bob.close();
  });

  it("alice's and bob's own credentials reach the upstream for their own calls only; carol gets the shared one; no gateway key, token or secret anywhere", async () => {
    const { o, as, id } = await setUp();
    await o.grant("alice", { resourceType: "mcp_server", resourceId: id, userId: "carol", role: "reader" });
    const SHARED = "shared-token-7f3a9c1e";
    const ALICE = "alice-token-51bb02d4";
    const BOB = "bob-value-9e04ac77";
    const rs = caller(replica.url, o.secret);
    const answers: string[] = [];
    const keep = async (res: Response) => {
      const text = await res.text();
      answers.push(text);
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    };
    expect(
      (
        await keep(
          await rs("alice", `/api/v1/mcp/servers/${id}/credentials/shared`, {
            method: "PUT",
            json: { type: "bearer", token: SHARED },
          }),
        )
      ).status,
    ).toBe(200);
    const own = await keep(
      await rs("alice", `/api/v1/mcp/servers/${id}/credentials/me`, {
        method: "PUT",
        json: { type: "bearer", token: ALICE },
      }),
    );
    expect(own.body).toEqual({
      scope: "me",
      type: "bearer",
      created_at: expect.any(Number),
      last_used_at: null,
    });
    const bobs = await keep(
      await rs("bob", `/api/v1/mcp/servers/${id}/credentials/me`, {
        method: "PUT",
        json: { type: "header", name: "X-Api-Key", value: BOB },
      }),
    );
    expect(bobs.body).toEqual({
      scope: "me",
      type: "header",
      name: "X-Api-Key",
      created_at: expect.any(Number),
      last_used_at: null,
    });
    // A reader may not set the shared credential.
    expect(
      (
        await keep(
          await rs("bob", `/api/v1/mcp/servers/${id}/credentials/shared`, {
            method: "PUT",
            json: { type: "bearer", token: "x-not-allowed" },
          }),
        )
      ).status,
    ).toBe(403);

    const seen = async (user: string) => {
      const client = await mcpClient(replica.url, id, o.secret, user);
      const from = upstream.calls.length;
      await client.callTool({ name: "search", arguments: { query: user } });
      await client.close();
      return upstream.calls.slice(from);
    };
    const [aliceCall] = await seen("alice");
    const [bobCall] = await seen("bob");
    const [carolCall] = await seen("carol");
    expect(aliceCall!.headers.authorization).toBe(`Bearer ${ALICE}`);
    expect(aliceCall!.headers["x-api-key"]).toBeUndefined();
    expect(bobCall!.headers["x-api-key"]).toBe(BOB);
    expect(bobCall!.headers.authorization).toBeUndefined();
    expect(carolCall!.headers.authorization).toBe(`Bearer ${SHARED}`);
    // The caller's own credential and end user never go upstream, on any request.
    for (const request of upstream.requests) {
      expect(JSON.stringify(request.headers)).not.toContain(o.secret);
      expect(request.headers["x-on-behalf-of"]).toBeUndefined();
    }

    const listed = await keep(await rs("alice", `/api/v1/mcp/servers/${id}/credentials`));
    expect(listed.body.data.map((c: { scope: string }) => c.scope)).toEqual(["shared", "me"]);
    expect(listed.body.data[1].last_used_at).toEqual(expect.any(Number));
    await keep(await rs("bob", `/api/v1/mcp/servers/${id}/credentials/me`));
    await keep(await rs("bob", `/api/v1/mcp/servers/${id}/credentials/shared`));

    // Stored encrypted: no secret in the table, in any answer, or in any log line.
    const db = createPostgres(gw.database.url, { connectionName: "test" });
    const { rows } = await db.query<{ sealed: Buffer; wrapped_key: Buffer }>("SELECT * FROM mcp_credentials");
    await db.close();
    for (const secret of [SHARED, ALICE, BOB]) {
      expect(JSON.stringify(rows)).not.toContain(secret);
      expect(
        Buffer.concat(rows.flatMap((r) => [r.sealed as Buffer, r.wrapped_key as Buffer])).includes(secret),
      ).toBe(false);
      expect(answers.join("\n")).not.toContain(secret);
      expect(replicaLog.join("\n")).not.toContain(secret);
    }
    expect(replicaLog.join("\n")).not.toContain(o.secret);

    expect((await rs("bob", `/api/v1/mcp/servers/${id}/credentials/me`, { method: "DELETE" })).status).toBe(
      204,
    );
    const [afterDelete] = await seen("bob");
    expect(afterDelete!.headers.authorization).toBe(`Bearer ${SHARED}`);
    expect(afterDelete!.headers["x-api-key"]).toBeUndefined();
    void as;
  });

  it("an upstream that forgot the gateway's session (it restarted) gets a new one: the call that found out is answered", async () => {
    const { o, id } = await setUp();
    const client = await mcpClient(gw.url, id, o.secret, "alice");
    expect(textOf(await client.callTool({ name: "search", arguments: { query: "before" } }))).toBe(
      "found: before",
    );
    upstream.forgetSessions();
    const from = upstream.requests.length;
    // Its 404 (with a JSON-RPC error, as the SDKs' servers send) makes the gateway start a session again.
    expect(textOf(await client.callTool({ name: "search", arguments: { query: "after" } }))).toBe(
      "found: after",
    );
    const asked = upstream.requests.slice(from);
    expect(asked.filter((r) => r.method === "POST").length).toBeGreaterThanOrEqual(3); // the 404, initialize, the call
    expect(upstream.calls.filter((c) => c.arguments.query === "after")).toHaveLength(1);
    await client.close();
  });

  it("an upstream that starts redirecting once its session is open is refused, and the gateway lives on", async () => {
    const { o, id } = await setUp();
    const target = await startFakeMcpServer();
    try {
      const client = await mcpClient(gw.url, id, o.secret, "alice");
      expect((await client.callTool({ name: "search", arguments: { query: "q" } })).isError).toBeFalsy();
      upstream.redirectTo = target.url;
      upstream.mode = "redirect";
      for (const call of [
        () => client.callTool({ name: "search", arguments: { query: "q" } }),
        () => client.listTools(),
      ]) {
        const failed = await call().catch((e) => e);
        expect(failed).toBeInstanceOf(McpError);
        expect(failed.message).toMatch(/answered with a redirect/);
      }
      // What the redirect's body left behind is dropped quietly: the gateway still answers.
      await new Promise((resolve) => setTimeout(resolve, 50));
      upstream.mode = "ok";
      expect((await client.callTool({ name: "search", arguments: { query: "q" } })).isError).toBeFalsy();
      expect(target.requests).toEqual([]);
      await client.close();
    } finally {
      upstream.mode = "ok";
      await target.close();
    }
  });

  it("an upstream that answers 500, garbage, a redirect or hangs is a clean JSON-RPC error naming the server, never its body", async () => {
    const { o, id } = await setUp();
    const target = await startFakeMcpServer();
    try {
      for (const mode of ["500", "garbage", "redirect", "hang"] as const) {
        const client = await mcpClient(gw.url, id, o.secret, "alice");
        upstream.redirectTo = target.url;
        upstream.mode = mode;
        const failed = await client.callTool({ name: "search", arguments: { query: "q" } }).catch((e) => e);
        upstream.mode = "ok";
        expect(failed, mode).toBeInstanceOf(McpError);
        expect(failed.message, mode).toMatch(new RegExp(`MCP server 'docs' \\(${id}\\)`));
        expect(failed.message, mode).not.toMatch(/hunter2|10\.0\.0\.5|html/);
        await client.close();
      }
      // The redirect was not followed.
      expect(target.requests).toEqual([]);
    } finally {
      upstream.mode = "ok";
      await target.close();
    }
  });
});

describe("the MCP proxy as an OAuth protected resource", () => {
  it("401 with resource_metadata without a credential; the metadata names the gateway; a token for this endpoint is accepted, one for elsewhere is not; a key without mcp:call is 403 insufficient_scope", async () => {
    const { o, id } = await setUp();
    const path = `/api/v1/mcp/servers/${id}/mcp`;
    const init = { jsonrpc: "2.0", id: 1, method: "ping" };
    const post = (headers: Record<string, string>) =>
      fetch(`${gw.url}${path}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body: JSON.stringify(init),
      });
    const bare = await post({});
    expect(bare.status).toBe(401);
    const metadataUrl = `${gw.publicUrl}/.well-known/oauth-protected-resource${path}`;
    expect(bare.headers.get("www-authenticate")).toContain(`resource_metadata="${metadataUrl}"`);
    const metadata = await (await fetch(`${gw.url}/.well-known/oauth-protected-resource${path}`)).json();
    expect(metadata).toMatchObject({
      resource: `${gw.publicUrl}${path}`,
      authorization_servers: [gw.publicUrl],
    });

    const mint = async (audience: string) =>
      (
        await (
          await fetch(`${gw.url}/api/v1/authentication/api-keys/exchange-token`, {
            method: "POST",
            headers: { authorization: `Bearer ${o.secret}`, "content-type": "application/json" },
            body: JSON.stringify({ audience, externalUserId: "bob" }),
          })
        ).json()
      ).token as string;
    const forEndpoint = await post({ authorization: `Bearer ${await mint(`${gw.publicUrl}${path}`)}` });
    expect(forEndpoint.status).toBe(200);
    expect(await forEndpoint.json()).toEqual({ jsonrpc: "2.0", id: 1, result: {} });
    expect((await post({ authorization: `Bearer ${await mint(gw.publicUrl)}` })).status).toBe(200);
    const elsewhere = await post({ authorization: `Bearer ${await mint("https://other.example/api")}` });
    expect(elsewhere.status).toBe(401);
    expect(elsewhere.headers.get("www-authenticate")).toContain('error="invalid_token"');
    // A token for the endpoint works with the SDK client too, as its subject.
    const viaToken = await mcpClient(gw.url, id, await mint(`${gw.publicUrl}${path}`));
    expect((await viaToken.listTools()).tools.map((t) => t.name).sort()).toEqual([
      "lookup",
      "read_file",
      "search",
      "slow",
    ]);
    await viaToken.close();

    const { secret: noCall } = await gw.createKey({ org: o.org, owner: "alice", permissions: ["mcp:read"] });
    const refused = await post({ authorization: `Bearer ${noCall}` });
    expect(refused.status).toBe(403);
    expect(refused.headers.get("www-authenticate")).toContain('error="insufficient_scope"');
  });

  it("a body that is JSON but not one JSON-RPC message (a list, a string, null, a number) is JSON-RPC's Invalid Request", async () => {
    const { as, id } = await setUp();
    for (const json of [[{ jsonrpc: "2.0", id: 1, method: "tools/list" }], "tools/list", null, 1]) {
      const res = await as("alice", `/api/v1/mcp/servers/${id}/mcp`, { json });
      expect(res.status, JSON.stringify(json)).toBe(400);
      expect(await res.json(), JSON.stringify(json)).toMatchObject({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32600 },
      });
    }
  });

  it("without the reader role, or from another organization, the server does not exist", async () => {
    const { o, as, id } = await setUp();
    const other = await newOrg(gw);
    const stranger = caller(gw.url, other.secret);
    for (const [who, call] of [
      ["dave", as],
      ["alice", stranger],
    ] as const) {
      expect((await call(who, `/api/v1/mcp/servers/${id}`)).status).toBe(404);
      expect((await call(who, `/api/v1/mcp/servers/${id}/credentials`)).status).toBe(404);
      const list = await (await call(who, "/api/v1/mcp/servers")).json();
      expect(list.data.map((s: { id: string }) => s.id)).not.toContain(id);
      await expect(
        mcpClient(gw.url, id, who === "dave" ? o.secret : other.secret, who),
      ).rejects.toMatchObject({
        code: 404,
      });
    }
  });

  it("tools/call counts in the key's request windows; listing does not", async () => {
    const o = await newOrg(gw);
    const res = await caller(gw.url, o.secret)("alice", "/api/v1/mcp/servers", {
      json: { name: "d", url: upstream.url },
    });
    const { id } = await res.json();
    // Once alice owns a key, the organization's other keys no longer act as her.
    const { secret } = await gw.createKey({ org: o.org, owner: "alice", limits: { day: 3 } });
    const client = await mcpClient(gw.url, id, secret);
    for (let i = 0; i < 3; i++) await client.listTools();
    await client.callTool({ name: "search", arguments: { query: "1" } });
    await client.callTool({ name: "search", arguments: { query: "2" } });
    await client.callTool({ name: "search", arguments: { query: "3" } });
    await expect(client.callTool({ name: "search", arguments: { query: "4" } })).rejects.toMatchObject({
      code: 429,
    });
    await client.close();
  });
});

describe("a key used only through the proxy", () => {
  it("is noted as used (lastUsedAt), as on every other route", async () => {
    const { o, id } = await setUp();
    const { record, secret } = await gw.createKey({ org: o.org, owner: "backend" });
    const lastUsed = async () => (await gw.store.lastUsed([record.id])).get(record.id);
    expect(await lastUsed()).toBeNull();
    const bob = await mcpClient(gw.url, id, secret, "bob");
    expect((await bob.listTools()).tools.length).toBeGreaterThan(0);
    await bob.close();
    // Written as the request passes, without the answer waiting on it.
    await vi.waitFor(async () => expect(await lastUsed()).toEqual(expect.any(String)));
  });
});

describe("registered servers", () => {
  it("lists in pages only what the principal may read; reader reads, writer changes, owner deletes", async () => {
    const { o, as, id } = await setUp();
    const more = [];
    for (let i = 0; i < 3; i++) {
      more.push(
        (
          await (
            await as("alice", "/api/v1/mcp/servers", { json: { name: `s${i}`, url: upstream.url } })
          ).json()
        ).id,
      );
    }
    const all = [id, ...more].sort();
    const first = await (await as("alice", "/api/v1/mcp/servers?limit=3")).json();
    expect(first).toMatchObject({ object: "list", has_more: true });
    expect(first.data.map((s: { id: string }) => s.id)).toEqual(all.slice(0, 3));
    const second = await (await as("alice", `/api/v1/mcp/servers?limit=3&after=${first.last_id}`)).json();
    expect(second.data.map((s: { id: string }) => s.id)).toEqual(all.slice(3));
    expect(second.has_more).toBe(false);
    expect(
      (await (await as("bob", "/api/v1/mcp/servers")).json()).data.map((s: { id: string }) => s.id),
    ).toEqual([id]);
    expect((await as("alice", "/api/v1/mcp/servers?limit=0")).status).toBe(422);

    expect((await as("bob", `/api/v1/mcp/servers/${id}`)).status).toBe(200);
    expect(
      (await as("bob", `/api/v1/mcp/servers/${id}`, { method: "PATCH", json: { name: "mine" } })).status,
    ).toBe(403);
    await o.grant("alice", { resourceType: "mcp_server", resourceId: id, userId: "carol", role: "writer" });
    const patched = await as("carol", `/api/v1/mcp/servers/${id}`, {
      method: "PATCH",
      json: { name: "renamed", description: null },
    });
    expect(patched.status).toBe(200);
    expect(await patched.json()).toMatchObject({ id, name: "renamed", description: null, url: upstream.url });
    expect((await as("carol", `/api/v1/mcp/servers/${id}`, { method: "DELETE" })).status).toBe(403);
    // A new origin drops the credentials: a secret is only ever sent where it was stored for.
    await as("alice", `/api/v1/mcp/servers/${id}/credentials/shared`, {
      method: "PUT",
      json: { type: "bearer", token: "bound-to-origin-1" },
    });
    const moved = await as("carol", `/api/v1/mcp/servers/${id}`, {
      method: "PATCH",
      json: { url: upstream.url.replace("127.0.0.1", "localhost") },
    });
    expect(moved.status).toBe(200);
    expect((await (await as("alice", `/api/v1/mcp/servers/${id}/credentials`)).json()).data).toEqual([]);
    // The platform API neither registers nor deletes a server's authorization.
    expect((await o.deleteResource("alice", "mcp_server", id)).status).toBe(409);
    expect((await o.register("alice", "mcp_server", "mcp_000000000000000000000000")).status).toBe(409);
  });

  it("deleting a server removes its relationships, tool policies and credentials; its proxy is then 404", async () => {
    const { o, as, id } = await setUp();
    await as("alice", `/api/v1/mcp/servers/${id}/credentials/shared`, {
      method: "PUT",
      json: { type: "bearer", token: "to-be-deleted-1" },
    });
    await as("alice", `/api/v1/mcp/servers/${id}/tools/send_email`, {
      method: "PUT",
      json: { disabled: true },
    });
    const deleted = await as("alice", `/api/v1/mcp/servers/${id}`, { method: "DELETE" });
    expect(deleted.status).toBe(200);
    expect(await deleted.json()).toEqual({ id, object: "mcp.server.deleted", deleted: true });
    expect((await as("alice", `/api/v1/mcp/servers/${id}`)).status).toBe(404);
    expect(await o.check("bob", "mcp_server", id, "reader")).toBe(false);
    expect(await o.check("alice", "mcp_server", id, "owner")).toBe(false);
    const db = createPostgres(gw.database.url, { connectionName: "test" });
    const left = await db.query("SELECT 1 FROM mcp_credentials WHERE server_id = $1", [id]);
    await db.close();
    expect(left.rowCount).toBe(0);
    const spicedb = new SpiceDBClient({
      endpoint: gw.spicedb.endpoint,
      presharedKey: gw.spicedb.presharedKey,
      insecure: true,
      deadlineMs: 5_000,
    });
    const tokens = new RedisConsistencyTokens(gw.redis, 1_000);
    const tools = new McpToolAuthorization(spicedb, tokens, new ResourceAuthorization(spicedb, tokens));
    expect((await tools.roles(o.org, id)).size).toBe(0);
    await expect(mcpClient(gw.url, id, o.secret, "alice")).rejects.toMatchObject({ code: 404 });
  });
});
