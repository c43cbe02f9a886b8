import { newVaultKeys } from "@gw/core/mcp";
import { type FakeMcpServer, startFakeMcpServer, startRelay } from "@gw/test-kit/mcp-upstream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { parseEvents, useStack } from "./stack.ts";

/**
 * Hosted MCP tools in responses: the service runs them through the gateway's
 * MCP proxy, as the principal. The service starts before the gateway (which
 * needs its URL), so it reaches the gateway through a relay started first.
 */
let relay: Awaited<ReturnType<typeof startRelay>>;
const serviceEnv: Record<string, string> = { GATEWAY_PUBLIC_URL: "https://gateway.test" };
beforeAll(async () => {
  relay = await startRelay();
  serviceEnv.GATEWAY_URL = relay.url;
});
afterAll(() => relay?.close());

const stack = useStack(serviceEnv, { MCP_ALLOW_PRIVATE_UPSTREAMS: "true", VAULT_KEYS: newVaultKeys() });
let upstream: FakeMcpServer;
beforeAll(async () => {
  relay.target = stack.gatewayUrl;
  upstream = await startFakeMcpServer();
});
afterAll(() => upstream?.close());

const SHARED = "shared-secret-3e9d1c";

/** alice registers the upstream and stores a shared credential; bob is a reader. */
async function setUp() {
  const { secret } = await stack.createKey();
  const created = await stack.call(secret, "/api/v1/mcp/servers", {
    user: "alice",
    json: { name: "docs", url: upstream.url },
  });
  expect(created.status).toBe(201);
  const { id } = await created.json();
  const put = await stack.call(secret, `/api/v1/mcp/servers/${id}/credentials/shared`, {
    method: "PUT",
    user: "alice",
    json: { type: "bearer", token: SHARED },
  });
  expect(put.status).toBe(200);
  const grant = await stack.call(secret, "/api/v1/authorization/llm/grant", {
    user: "alice",
    json: { resourceType: "mcp_server", resourceId: id, userId: "bob", role: "reader" },
  });
  expect(grant.status).toBe(204);
  return { secret, id, serverUrl: `https://gateway.test/api/v1/mcp/servers/${id}/mcp` };
}

describe("hosted MCP tools in responses", () => {
  it("lists the principal's tools, runs the model's call through the proxy with the vault's credential, and answers with mcp_list_tools, mcp_call and the message", async () => {
    const { secret, serverUrl } = await setUp();
    const from = upstream.calls.length;
    const pending = stack.call(secret, "/api/v1/llm/responses", {
      user: "bob",
      json: {
        model: "echo-small",
        input: "hello",
        tools: [{ type: "mcp", server_label: "docs", server_url: serverUrl, require_approval: "never" }],
      },
    });
    // The model calls every tool it is given, `slow` too, which answers once released.
    await vi.waitFor(() => expect(upstream.calls.slice(from).map((c) => c.tool)).toContain("slow"), {
      timeout: 10_000,
    });
    upstream.release();
    const res = await pending;
    expect(res.status).toBe(200);
    const response = await res.json();
    const [list, ...rest] = response.output;
    expect(list).toMatchObject({ type: "mcp_list_tools", server_label: "docs", error: null });
    // bob is a reader: only the read-only tools.
    expect(list.tools.map((t: { name: string }) => t.name).sort()).toEqual(
      ["lookup", "read_file", "search", "slow"].sort(),
    );
    const calls = rest.filter((i: { type: string }) => i.type === "mcp_call");
    expect(calls.length).toBeGreaterThan(0);
    const lookup = calls.find((c: { name: string }) => c.name === "lookup");
    expect(lookup).toMatchObject({
      type: "mcp_call",
      server_label: "docs",
      status: "completed",
      output: "looked up: hello",
      error: null,
    });
    expect(rest.at(-1)).toMatchObject({ type: "message", role: "assistant" });
    const seen = upstream.calls.slice(from);
    expect(seen.map((c) => c.tool)).toContain("lookup");
    for (const call of seen) expect(call.headers.authorization).toBe(`Bearer ${SHARED}`);
    for (const request of upstream.requests) expect(JSON.stringify(request.headers)).not.toContain(secret);
    expect(JSON.stringify(response)).not.toContain(SHARED);
  });

  it("allowed_tools narrows the list; require_approval (unset: always) ends the turn with mcp_approval_request and calls nothing", async () => {
    const { secret, serverUrl } = await setUp();
    const from = upstream.calls.length;
    const res = await stack.call(secret, "/api/v1/llm/responses", {
      user: "bob",
      json: {
        input: "hi",
        tools: [{ type: "mcp", server_label: "docs", server_url: serverUrl, allowed_tools: ["lookup"] }],
      },
    });
    expect(res.status).toBe(200);
    const response = await res.json();
    expect(response.output.map((i: { type: string }) => i.type)).toEqual([
      "mcp_list_tools",
      "mcp_approval_request",
    ]);
    expect(response.output[0].tools.map((t: { name: string }) => t.name)).toEqual(["lookup"]);
    expect(response.output[1]).toMatchObject({
      server_label: "docs",
      name: "lookup",
      arguments: JSON.stringify({ text: "hi" }),
    });
    expect(upstream.calls.length).toBe(from);
  });

  it("only the principal who got an approval request may answer it, with previous_response_id; approved, the call runs", async () => {
    const { secret, serverUrl } = await setUp();
    const tools = [{ type: "mcp", server_label: "docs", server_url: serverUrl, allowed_tools: ["lookup"] }];
    const first = await (
      await stack.call(secret, "/api/v1/llm/responses", { user: "bob", json: { input: "approve me", tools } })
    ).json();
    const request = first.output.find((i: { type: string }) => i.type === "mcp_approval_request");
    const answer = (user: string, approve: boolean) =>
      stack.call(secret, "/api/v1/llm/responses", {
        user,
        json: {
          previous_response_id: first.id,
          input: [{ type: "mcp_approval_response", approval_request_id: request.id, approve }],
          tools,
        },
      });
    const from = upstream.calls.length;
    expect((await answer("alice", true)).status).not.toBe(200);
    expect(upstream.calls.length).toBe(from);
    const declined = await answer("bob", false);
    expect(declined.status).toBe(200);
    expect((await declined.json()).output.some((i: { type: string }) => i.type === "mcp_call")).toBe(false);
    expect(upstream.calls.length).toBe(from);
    const approved = await answer("bob", true);
    expect(approved.status).toBe(200);
    const body = await approved.json();
    const call = body.output.find((i: { type: string }) => i.type === "mcp_call");
    expect(call).toMatchObject({
      name: "lookup",
      approval_request_id: request.id,
      output: "looked up: approve me",
    });
    expect(body.output.at(-1)).toMatchObject({ type: "message" });
    expect(upstream.calls.slice(from).map((c) => c.tool)).toEqual(["lookup"]);
  });

  it("streams the items with their events", async () => {
    const { secret, serverUrl } = await setUp();
    const res = await stack.call(secret, "/api/v1/llm/responses", {
      user: "bob",
      json: {
        input: "streamed",
        stream: true,
        tools: [
          {
            type: "mcp",
            server_label: "docs",
            server_url: serverUrl,
            allowed_tools: ["lookup"],
            require_approval: "never",
          },
        ],
      },
    });
    expect(res.status).toBe(200);
    const types = parseEvents(await res.text()).map((e) => e.type);
    for (const type of [
      "response.created",
      "response.mcp_list_tools.in_progress",
      "response.mcp_list_tools.completed",
      "response.mcp_call.in_progress",
      "response.mcp_call_arguments.done",
      "response.mcp_call.completed",
      "response.output_text.done",
      "response.completed",
    ])
      expect(types, type).toContain(type);
  });

  it("a server_url that is not a registered server's proxy URL, headers or authorization: 422 at its loc; an unreadable server likewise", async () => {
    const { secret, serverUrl } = await setUp();
    const post = (tool: Record<string, unknown>, user = "bob") =>
      stack.call(secret, "/api/v1/llm/responses", {
        user,
        json: { input: "x", tools: [{ type: "mcp", server_label: "docs", ...tool }] },
      });
    for (const url of [
      "http://169.254.169.254/latest",
      `${upstream.url}`,
      "https://gateway.test/api/v1/mcp/servers/mcp_x/mcp",
    ]) {
      const res = await post({ server_url: url });
      expect(res.status, url).toBe(422);
      expect((await res.json()).detail[0].loc).toEqual(["body", "tools", 0, "server_url"]);
    }
    // A credential sent here is refused, and never echoed back (the 422's `input` leaves it out).
    const credential = "sk-hosted-credential-7c1f";
    for (const field of ["headers", "authorization"]) {
      const res = await post({
        server_url: serverUrl,
        [field]: field === "headers" ? { "x-api-key": credential } : `Bearer ${credential}`,
      });
      expect(res.status).toBe(422);
      const text = await res.text();
      expect(JSON.parse(text).detail[0]).toEqual({
        loc: ["body", "tools", 0, field],
        msg: expect.stringContaining("credentials come from the gateway's vault"),
        type: "value_error",
      });
      expect(text).not.toContain(credential);
    }
    const stranger = await post({ server_url: serverUrl }, "dave");
    expect(stranger.status).toBe(422);
  });
});
