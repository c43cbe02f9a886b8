import type { Limits } from "@gw/core/limits";
import { newVaultKeys } from "@gw/core/mcp";
import { PERMISSIONS } from "@gw/core/permissions";
import { CountingWindows } from "@gw/core/windows";
import { scanKeys } from "@gw/test-kit";
import { type FakeMcpServer, startFakeMcpServer, startRelay } from "@gw/test-kit/mcp-upstream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { llmError, parseEvents, useStack } from "../../test/stack.ts";

/**
 * Hosted MCP tools in responses: the service runs them through the gateway's
 * MCP proxy, as the principal. The service starts before the gateway (which
 * needs its URL), so it reaches the gateway through a relay started first.
 */
let relay: Awaited<ReturnType<typeof startRelay>>;
const serviceEnv: Record<string, string> = {
  GATEWAY_PUBLIC_URL: "https://gateway.test",
  // Below the gateway's (4 MiB by default), so that the service's own limit is the one an answer meets.
  MCP_MAX_ANSWER_BYTES: "262144",
};
beforeAll(async () => {
  relay = await startRelay();
  serviceEnv.GATEWAY_URL = relay.url;
});
afterAll(() => relay?.close());

/** Where a test holds the answer to one approval request between its steps, by the request's id. */
const gates = new Map<string, { beforeClaim?: () => Promise<void>; afterClaim?: () => Promise<void> }>();
const stack = useStack(
  serviceEnv,
  { MCP_ALLOW_PRIVATE_UPSTREAMS: "true", VAULT_KEYS: newVaultKeys() },
  undefined,
  "single",
  {
    approvalHooks: {
      beforeClaim: async (ids) => {
        for (const id of ids) await gates.get(id)?.beforeClaim?.();
      },
      afterClaim: async (ids) => {
        for (const id of ids) await gates.get(id)?.afterClaim?.();
      },
    },
  },
);
let upstream: FakeMcpServer;
beforeAll(async () => {
  relay.target = stack.gatewayUrl;
  upstream = await startFakeMcpServer();
});
afterAll(() => upstream?.close());

const SHARED = "shared-secret-3e9d1c";

/** alice registers the upstream and stores a shared credential; bob is a reader. */
async function setUp(limits?: Limits) {
  const { secret, id: keyId, org } = await stack.createKey(limits ? { limits } : {});
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
  return { secret, keyId, org, id, serverUrl: `https://gateway.test/api/v1/mcp/servers/${id}/mcp` };
}

/** The hosted tools of a request that offers the model `lookup` alone, run without asking. */
const lookupWithoutApproval = (serverUrl: string) => [
  {
    type: "mcp",
    server_label: "docs",
    server_url: serverUrl,
    allowed_tools: ["lookup"],
    require_approval: "never",
  },
];

/** The calls of `lookup` the upstream ran with this text. */
const lookups = (text: string) =>
  upstream.calls.filter((c) => c.tool === "lookup" && c.arguments.text === text).length;

/** bob asks, with `lookup` needing approval: the response and its approval request; `answer` answers it. */
async function approvalAsked(secret: string, serverUrl: string, text: string) {
  const tools = [{ type: "mcp", server_label: "docs", server_url: serverUrl, allowed_tools: ["lookup"] }];
  const res = await stack.call(secret, "/api/v1/llm/responses", {
    user: "bob",
    json: { input: text, tools },
  });
  expect(res.status).toBe(200);
  const response = await res.json();
  const request = response.output.find((i: { type: string }) => i.type === "mcp_approval_request");
  expect(request).toMatchObject({ name: "lookup", server_label: "docs" });
  const answer = (user: string, approve: boolean, answerTools: unknown[] = tools) =>
    stack.call(secret, "/api/v1/llm/responses", {
      user,
      json: {
        previous_response_id: response.id,
        input: [{ type: "mcp_approval_response", approval_request_id: request.id, approve }],
        tools: answerTools,
      },
    });
  return { response, request, tools, answer };
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
    expect(list).toMatchObject({ type: "mcp_list_tools", server_label: "docs" });
    // As OpenAI sends it: no `error` when the listing worked, no null description or annotations.
    expect(list).not.toHaveProperty("error");
    for (const tool of list.tools) {
      expect(tool.description === undefined || typeof tool.description === "string").toBe(true);
      expect(tool.annotations === undefined || typeof tool.annotations === "object").toBe(true);
      expect(tool.annotations).not.toBeNull();
    }
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

  it("tool_choice names a hosted server's tool, or any of its tools, or 'required': the first round must call it, the next answers; a server or tool the request does not offer is refused by name", async () => {
    const { secret, serverUrl } = await setUp();
    const tools = [
      {
        type: "mcp",
        server_label: "docs",
        server_url: serverUrl,
        allowed_tools: ["lookup", "search", "delete_file"],
        require_approval: "never",
      },
    ];
    const ask = (tool_choice: unknown, input: string) =>
      stack.call(secret, "/api/v1/llm/responses", {
        user: "bob",
        json: { model: "echo-small", input, tools, tool_choice },
      });
    const calledIn = (response: { output: { type: string; name?: string }[] }) =>
      response.output.filter((i) => i.type === "mcp_call").map((i) => i.name);

    const named = await ask({ type: "mcp", server_label: "docs", name: "lookup" }, "named");
    expect(named.status).toBe(200);
    const response = await named.json();
    // Echoed as asked; the first round was offered `lookup` alone and made to call it, the second
    // (with its result) chose to answer.
    expect(response.tool_choice).toEqual({ type: "mcp", server_label: "docs", name: "lookup" });
    expect(calledIn(response)).toEqual(["lookup"]);
    expect(response.output.at(-1)).toMatchObject({ type: "message", role: "assistant" });
    expect(lookups("named")).toBe(1);

    for (const choice of [{ type: "mcp", server_label: "docs" }, "required"]) {
      const res = await ask(choice, `any ${JSON.stringify(choice)}`);
      expect(res.status, JSON.stringify(choice)).toBe(200);
      const answered = await res.json();
      // The fake model calls every tool it is offered when made to call one: bob's two, once each, in
      // the first round only.
      expect(calledIn(answered).sort()).toEqual(["lookup", "search"]);
      expect(answered.output.at(-1)).toMatchObject({ type: "message", role: "assistant" });
    }

    const otherServer = await ask({ type: "mcp", server_label: "mail" }, "x");
    expect(otherServer.status).toBe(422);
    expect(await otherServer.json()).toMatchObject({
      detail: [
        { loc: ["body", "tool_choice", "server_label"], msg: "No mcp tool with this server_label in tools" },
      ],
    });
    // bob reads the server: `delete_file`, a writer's, is not his to call, so it cannot be chosen.
    const notHis = await ask({ type: "mcp", server_label: "docs", name: "delete_file" }, "x");
    expect(notHis.status).toBe(422);
    expect(await notHis.json()).toMatchObject({
      detail: [
        {
          loc: ["body", "tool_choice"],
          msg: "Value error, the MCP server 'docs' has no tool 'delete_file' that you may call",
        },
      ],
    });
    expect(upstream.calls.some((c) => c.tool === "delete_file" && c.arguments.text === "x")).toBe(false);
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

  it("an approval request is answered once, only by the principal it was asked of (not by a new owner of the response); approved, the call runs once", async () => {
    const { secret, serverUrl } = await setUp();
    const declined = await approvalAsked(secret, serverUrl, "decline me");
    // bob makes alice an owner of the response: she still may not answer what was asked of bob.
    const grant = await stack.call(secret, "/api/v1/authorization/llm/grant", {
      user: "bob",
      json: { resourceType: "response", resourceId: declined.response.id, userId: "alice", role: "owner" },
    });
    expect(grant.status).toBe(204);
    const byAlice = await declined.answer("alice", true);
    expect(byAlice.status).toBe(403);
    expect(await byAlice.json()).toEqual(
      llmError("forbidden", expect.stringContaining("another user"), "input"),
    );
    expect(lookups("decline me")).toBe(0);

    const no = await declined.answer("bob", false);
    expect(no.status).toBe(200);
    expect((await no.json()).output.some((i: { type: string }) => i.type === "mcp_call")).toBe(false);
    // Declined is answered: approving it afterwards is a conflict, and nothing runs.
    const late = await declined.answer("bob", true);
    expect(late.status).toBe(409);
    expect(await late.json()).toEqual(
      llmError("conflict", expect.stringContaining("answered already"), "input"),
    );
    expect(lookups("decline me")).toBe(0);

    const approved = await approvalAsked(secret, serverUrl, "approve me");
    const yes = await approved.answer("bob", true);
    expect(yes.status).toBe(200);
    const body = await yes.json();
    expect(body.output.find((i: { type: string }) => i.type === "mcp_call")).toMatchObject({
      name: "lookup",
      approval_request_id: approved.request.id,
      output: "looked up: approve me",
    });
    expect(body.output.at(-1)).toMatchObject({ type: "message" });
    for (const again of [true, false]) {
      const res = await approved.answer("bob", again);
      expect(res.status).toBe(409);
      expect(await res.json()).toEqual(llmError("conflict", expect.any(String), "input"));
    }
    expect(lookups("approve me")).toBe(1);
  });

  it("an approval runs on the registered server it named: a server deleted and registered again under the same label does not receive the call", async () => {
    const { secret, id, serverUrl } = await setUp();
    const { answer } = await approvalAsked(secret, serverUrl, "which server");
    expect(
      (await stack.call(secret, `/api/v1/mcp/servers/${id}`, { method: "DELETE", user: "alice" })).status,
    ).toBe(200);
    const again = await stack.call(secret, "/api/v1/mcp/servers", {
      user: "alice",
      json: { name: "docs", url: upstream.url },
    });
    expect(again.status).toBe(201);
    const other = (await again.json()).id;
    const grant = await stack.call(secret, "/api/v1/authorization/llm/grant", {
      user: "alice",
      json: { resourceType: "mcp_server", resourceId: other, userId: "bob", role: "reader" },
    });
    expect(grant.status).toBe(204);
    const otherUrl = `https://gateway.test/api/v1/mcp/servers/${other}/mcp`;
    const res = await answer("bob", true, [
      { type: "mcp", server_label: "docs", server_url: otherUrl, allowed_tools: ["lookup"] },
    ]);
    expect(res.status).toBe(422);
    expect((await res.json()).detail[0].msg).toContain("is not among this request's tools");
    expect(lookups("which server")).toBe(0);
  });

  it("two answers to one approval request at once, both checked before either claims it: one runs the call, the other is 409", async () => {
    const { secret, serverUrl } = await setUp();
    const { request, answer } = await approvalAsked(secret, serverUrl, "race before claim");
    let arrived = 0;
    let open!: () => void;
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    // Both answers have read the request (unanswered) and been admitted; only then may either claim it.
    gates.set(request.id, {
      beforeClaim: async () => {
        if (++arrived === 2) open();
        await opened;
      },
    });
    const statuses = (await Promise.all([answer("bob", true), answer("bob", true)])).map((r) => r.status);
    expect(statuses.sort()).toEqual([200, 409]);
    expect(arrived).toBe(2);
    expect(lookups("race before claim")).toBe(1);
  });

  it("an answer that comes while the first answer's claimed call has not run yet is 409, and the call runs once", async () => {
    const { secret, serverUrl } = await setUp();
    const { request, answer } = await approvalAsked(secret, serverUrl, "race after claim");
    let claimed!: () => void;
    const isClaimed = new Promise<void>((resolve) => {
      claimed = resolve;
    });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    gates.set(request.id, {
      afterClaim: async () => {
        claimed();
        await released;
      },
    });
    const first = answer("bob", true);
    await Promise.race([
      isClaimed,
      first.then((res) => {
        throw new Error(`answered (${res.status}) without holding the approval between claim and run`);
      }),
    ]);
    const second = await answer("bob", true);
    expect(second.status).toBe(409);
    expect(lookups("race after claim")).toBe(0);
    release();
    expect((await first).status).toBe(200);
    expect(lookups("race after claim")).toBe(1);
  });

  it("a tool runs only once the model round that carries its result is admitted: under a budget of one round, the refused round runs nothing, and a retry nothing either", async () => {
    const { secret, serverUrl } = await setUp({ endUser: { day: 1 } });
    const post = () =>
      stack.call(secret, "/api/v1/llm/responses", {
        user: "bob",
        json: {
          input: "one round only",
          tools: lookupWithoutApproval(serverUrl),
        },
      });
    // The first round is admitted and calls `lookup`; the second, which would carry its result, is refused.
    const first = await post();
    expect(first.status).toBe(429);
    expect(lookups("one round only")).toBe(0);
    const retry = await post();
    expect(retry.status).toBe(429);
    expect(lookups("one round only")).toBe(0);
  });

  it("a tool's result, which the round that carries it was admitted without, is charged to the token budget as the provider counted it", async () => {
    const limits: Limits = { tokens: { day: 1_000_000 } };
    const { secret, keyId, serverUrl } = await setUp(limits);
    // `lookup` answers with its text, so its result is as long as the question: thousands of tokens.
    const text = `charged results ${"the quick brown fox jumps over the lazy dog ".repeat(100)}`;
    const res = await stack.call(secret, "/api/v1/llm/responses", {
      user: "bob",
      json: {
        // Counted with the model's own tokenizer (a word a token here), so the counts are close to the provider's.
        model: "gpt-4o-mini",
        input: text,
        // Room for the model's call of `lookup` (its text) and for its answer, less than the result's tokens.
        max_output_tokens: 1_000,
        tools: lookupWithoutApproval(serverUrl),
      },
    });
    expect(res.status).toBe(200);
    const response = await res.json();
    const call = response.output.find((i: { type: string }) => i.type === "mcp_call");
    expect(call.output.length).toBeGreaterThan(text.length);
    const [window] = await new CountingWindows(stack.redis).peek(keyId, undefined, limits);
    expect(window!.used).toBe(response.usage.total_tokens);
  });

  it("an approved call refused by the budget neither runs nor uses up the approval: answered again once the budget allows, it runs once", async () => {
    const { secret, keyId, serverUrl } = await setUp({ endUser: { day: 1 } });
    // Asking used bob's one round of the day.
    const { answer } = await approvalAsked(secret, serverUrl, "approve on budget");
    const refused = await answer("bob", true);
    expect(refused.status).toBe(429);
    expect(lookups("approve on budget")).toBe(0);
    // A new day for bob's window (its key deleted, as a window ends).
    const windows = await scanKeys(stack.redis, `*${keyId}*:eu:bob:*`);
    expect(windows.length).toBeGreaterThan(0);
    await stack.redis.del(...windows);
    const approved = await answer("bob", true);
    expect(approved.status).toBe(200);
    expect(lookups("approve on budget")).toBe(1);
    expect((await answer("bob", true)).status).toBe(409);
    expect(lookups("approve on budget")).toBe(1);
  });

  it("streams the items with their events", async () => {
    const { secret, serverUrl } = await setUp();
    const res = await stack.call(secret, "/api/v1/llm/responses", {
      user: "bob",
      json: {
        input: "streamed",
        stream: true,
        tools: lookupWithoutApproval(serverUrl),
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

  it("streams each listing and tool call as it happens, in OpenAI's order: a call still running has sent its in_progress and arguments, not its result", async () => {
    const { secret, serverUrl } = await setUp();
    const from = upstream.calls.length;
    const res = await stack.call(secret, "/api/v1/llm/responses", {
      user: "bob",
      json: {
        input: "live",
        stream: true,
        tools: [
          {
            type: "mcp",
            server_label: "docs",
            server_url: serverUrl,
            allowed_tools: ["lookup", "slow"],
            require_approval: "never",
          },
        ],
      },
    });
    try {
      expect(res.status).toBe(200);
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      const events = () => parseEvents(text.slice(0, text.lastIndexOf("\n\n") + 2));
      const slowCall = () =>
        events().find((e) => e.type === "response.output_item.added" && e.data.item.name === "slow");
      // Read while `slow` is held by the upstream: its call must already show.
      while (
        !events().some(
          (e) => e.type === "response.mcp_call_arguments.done" && e.data.item_id === slowCall()?.data.item.id,
        )
      ) {
        const { value, done } = await reader.read();
        if (done) throw new Error("the stream ended before the held call showed");
        text += value;
      }
      const slowId = slowCall()!.data.item.id;
      expect(
        events().some((e) => e.data.item_id === slowId && e.type === "response.mcp_call.completed"),
      ).toBe(false);
      // The upstream holds `slow` (the events above left before the proxy's request did).
      await vi.waitFor(() => expect(upstream.calls.slice(from).map((c) => c.tool)).toContain("slow"));
      upstream.release();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += value;
      }
      const all = parseEvents(text);
      expect(all.map((e) => e.data.sequence_number)).toEqual(all.map((_, i) => i));
      const call = (name: string) => [
        ["response.output_item.added", name],
        ["response.mcp_call.in_progress", name],
        ["response.mcp_call_arguments.delta", name],
        ["response.mcp_call_arguments.done", name],
        ["response.mcp_call.completed", name],
        ["response.output_item.done", name],
      ];
      const names = new Map<string, string>();
      for (const e of all)
        if (e.data.item?.id) names.set(e.data.item.id, e.data.item.name ?? e.data.item.type);
      expect(all.map((e) => [e.type, names.get(e.data.item_id ?? e.data.item?.id) ?? ""])).toEqual([
        ["response.created", ""],
        ["response.in_progress", ""],
        ["response.output_item.added", "mcp_list_tools"],
        ["response.mcp_list_tools.in_progress", "mcp_list_tools"],
        ["response.mcp_list_tools.completed", "mcp_list_tools"],
        ["response.output_item.done", "mcp_list_tools"],
        ...call("lookup"),
        ...call("slow"),
        ["response.output_item.added", "message"],
        ["response.content_part.added", "message"],
        ["response.output_text.delta", "message"],
        ["response.output_text.done", "message"],
        ["response.content_part.done", "message"],
        ["response.output_item.done", "message"],
        ["response.completed", ""],
      ]);
      expect(
        all.find((e) => e.type === "response.output_item.added" && e.data.item.type === "mcp_list_tools")!
          .data.item,
      ).toEqual(expect.objectContaining({ tools: [] }));
      const completed = all.at(-1)!.data.response;
      expect(completed.output.map((i: { type: string }) => i.type)).toEqual([
        "mcp_list_tools",
        "mcp_call",
        "mcp_call",
        "message",
      ]);
    } finally {
      upstream.release();
    }
  }, 30_000);

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
    // A URL with a password in it: refused without showing the password.
    const withPassword = await post({ server_url: `https://user:${credential}@mcp.example/mcp` });
    expect(withPassword.status).toBe(422);
    const refusedText = await withPassword.text();
    expect(JSON.parse(refusedText).detail[0]).toMatchObject({
      loc: ["body", "tools", 0, "server_url"],
      input: "https://mcp.example/mcp",
    });
    expect(refusedText).not.toContain(credential);
  });

  it("a tool answer past the service's MCP_MAX_ANSWER_BYTES fails its mcp_call with a message naming the limit, the rest unread", async () => {
    const { secret, serverUrl } = await setUp();
    upstream.hugeAnswer = { method: "tools/call", bytes: 1024 * 1024, format: "json" };
    try {
      const res = await stack.call(secret, "/api/v1/llm/responses", {
        user: "bob",
        json: {
          model: "echo-small",
          input: "hello",
          tools: [
            {
              type: "mcp",
              server_label: "docs",
              server_url: serverUrl,
              require_approval: "never",
              allowed_tools: ["lookup"],
            },
          ],
        },
      });
      expect(res.status).toBe(200);
      const response = await res.json();
      const call = response.output.find((i: { type: string }) => i.type === "mcp_call");
      expect(call).toMatchObject({
        name: "lookup",
        status: "failed",
        output: null,
        error: "The gateway's MCP proxy answered more than 262144 bytes (MCP_MAX_ANSWER_BYTES)",
      });
    } finally {
      upstream.hugeAnswer = undefined;
    }
  });

  it("a key without mcp:call: the proxy's 403 (a JSON-RPC body) is the mcp_list_tools item's error, and nothing is offered to the model", async () => {
    const { org, serverUrl } = await setUp();
    const { secret } = await stack.createKey({
      org,
      owner: "bob",
      permissions: PERMISSIONS.filter((p) => p !== "mcp:call"),
    });
    const res = await stack.call(secret, "/api/v1/llm/responses", {
      json: { model: "echo-small", input: "no call", tools: lookupWithoutApproval(serverUrl) },
    });
    expect(res.status).toBe(200);
    const response = await res.json();
    expect(response.output[0]).toEqual({
      type: "mcp_list_tools",
      id: expect.any(String),
      server_label: "docs",
      tools: [],
      error: "This credential lacks the 'mcp:call' permission",
    });
    expect(response.output.some((i: { type: string }) => i.type === "mcp_call")).toBe(false);
  });

  it("each request to the proxy carries an assertion of its own, and none is accepted twice: the tool call's request sent again, as it was or with other arguments, is refused and runs nothing", async () => {
    const { secret, serverUrl } = await setUp();
    const from = relay.requests.length;
    const res = await stack.call(secret, "/api/v1/llm/responses", {
      user: "bob",
      json: { model: "echo-small", input: "replayed", tools: lookupWithoutApproval(serverUrl) },
    });
    expect(res.status).toBe(200);
    expect(lookups("replayed")).toBe(1);
    const sent = relay.requests.slice(from);
    expect(new Set(sent.map((r) => r.headers["x-gateway-assertion"])).size).toBe(sent.length);
    expect(new Set(sent.map((r) => r.headers["x-request-id"])).size).toBe(sent.length);
    const call = sent.find((r) => r.body.includes('"tools/call"'));
    if (!call) throw new Error("the tool call did not go through the relay");
    const replay = (body: string) =>
      fetch(`${stack.gatewayUrl}${call.url}`, { method: call.method, headers: call.headers, body });
    for (const body of [call.body, call.body.replace('"replayed"', '"forged"')]) {
      const again = await replay(body);
      expect(again.status).toBe(401);
      expect(await again.json()).toMatchObject({
        jsonrpc: "2.0",
        error: { message: "Gateway assertion refused: already used" },
      });
    }
    expect(lookups("replayed")).toBe(1);
    expect(lookups("forged")).toBe(0);
  });
});

describe("hosted MCP items sent back as input (clients that keep their own history)", () => {
  /** bob's first turn, with `lookup` needing approval: what the client keeps (its input and the response's output). */
  async function firstTurn(secret: string, serverUrl: string, text: string) {
    const tools = [{ type: "mcp", server_label: "docs", server_url: serverUrl, allowed_tools: ["lookup"] }];
    const res = await stack.call(secret, "/api/v1/llm/responses", {
      user: "bob",
      json: { input: text, tools },
    });
    expect(res.status).toBe(200);
    const response = await res.json();
    const request = response.output.find((i: { type: string }) => i.type === "mcp_approval_request");
    expect(request).toBeDefined();
    const history = [{ role: "user", content: text }, ...response.output];
    return { tools, request, history };
  }

  it("r1.output and the answer sent back without previous_response_id: the approved call runs once; the whole history sent back with the next turn runs nothing again and shows the model the call's result", async () => {
    const { secret, serverUrl } = await setUp();
    const { tools, request, history } = await firstTurn(secret, serverUrl, "own history");
    const second = await stack.call(secret, "/api/v1/llm/responses", {
      user: "bob",
      json: {
        input: [
          ...history,
          { type: "mcp_approval_response", approval_request_id: request.id, approve: true },
        ],
        tools,
      },
    });
    expect(second.status).toBe(200);
    const r2 = await second.json();
    expect(r2.output.find((i: { type: string }) => i.type === "mcp_call")).toMatchObject({
      name: "lookup",
      approval_request_id: request.id,
      output: "looked up: own history",
    });
    expect(lookups("own history")).toBe(1);

    const answer = { type: "mcp_approval_response", approval_request_id: request.id, approve: true };
    const third = await stack.call(secret, "/api/v1/llm/responses", {
      user: "bob",
      json: {
        input: [...history, answer, ...r2.output, { role: "user", content: "and then" }],
        tools,
      },
    });
    expect(third.status).toBe(200);
    expect(lookups("own history")).toBe(1);
    // The earlier call is context: the model was shown it and its result.
    const sent = stack.llm.requests.at(-1)!.body;
    expect(sent.messages).toContainEqual(
      expect.objectContaining({ role: "tool", content: "looked up: own history" }),
    );
    expect(sent.messages.filter((m: { role: string }) => m.role === "assistant").length).toBeGreaterThan(0);
  });

  it("an answer to an approval request this gateway never asked runs nothing (422); one asked of another user is 403; one for a tool the caller may no longer call runs nothing", async () => {
    const { secret, id, serverUrl } = await setUp();
    const { tools, request, history } = await firstTurn(secret, serverUrl, "never asked");
    const answerAs = (user: string, approvalId: string) =>
      stack.call(secret, "/api/v1/llm/responses", {
        user,
        json: {
          input: [
            ...history,
            { type: "mcp_approval_response", approval_request_id: approvalId, approve: true },
          ],
          tools,
        },
      });
    const forged = await answerAs("bob", `mcpr_${"0".repeat(32)}`);
    expect(forged.status).toBe(422);
    expect((await forged.json()).detail[0].msg).toContain("no approval request with this id");
    const byAlice = await answerAs("alice", request.id);
    expect(byAlice.status).toBe(403);
    expect(lookups("never asked")).toBe(0);

    // bob loses his role on the server: his approval is no longer enough.
    const revoke = await stack.call(secret, "/api/v1/authorization/llm/revoke", {
      user: "alice",
      json: { resourceType: "mcp_server", resourceId: id, userId: "bob", role: "reader" },
    });
    expect(revoke.status).toBe(204);
    const revoked = await answerAs("bob", request.id);
    expect(revoked.status).toBe(422);
    expect(lookups("never asked")).toBe(0);
  });

  it("a conversation takes a response's hosted MCP items, at creation and added later, and lists them back", async () => {
    const { secret, serverUrl } = await setUp();
    const { request, history } = await firstTurn(secret, serverUrl, "kept in a conversation");
    const created = await stack.call(secret, "/api/v1/llm/conversations", {
      user: "bob",
      json: { items: history },
    });
    expect(created.status).toBe(200);
    const { id } = await created.json();
    const added = await stack.call(secret, `/api/v1/llm/conversations/${id}/items`, {
      user: "bob",
      json: {
        items: [
          { type: "mcp_approval_response", approval_request_id: request.id, approve: false },
          {
            type: "mcp_call",
            id: "mcp_earlier",
            server_label: "docs",
            name: "lookup",
            arguments: "{}",
            output: "an earlier result",
            error: null,
            status: "completed",
            approval_request_id: null,
          },
        ],
      },
    });
    expect(added.status).toBe(200);
    const list = await stack.call(secret, `/api/v1/llm/conversations/${id}/items?order=asc`, { user: "bob" });
    expect(list.status).toBe(200);
    const types = (await list.json()).data.map((i: { type: string }) => i.type);
    expect(types).toEqual([
      "message",
      "mcp_list_tools",
      "mcp_approval_request",
      "mcp_approval_response",
      "mcp_call",
    ]);
    // Stored, the answer ran nothing.
    expect(lookups("kept in a conversation")).toBe(0);
  });
});
