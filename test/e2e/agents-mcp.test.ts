import { newVaultKeys } from "@gw/core/mcp";
import { type FakeMcpServer, startFakeMcpServer, startRelay } from "@gw/test-kit/mcp-upstream";
import {
  Agent,
  hostedMcpTool,
  MCPServerStreamableHttp,
  OpenAIProvider,
  Runner,
  setTracingDisabled,
} from "@openai/agents";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useStack } from "../../packages/service/test/stack.ts";

/**
 * The OpenAI Agents SDK with MCP: `MCPServerStreamableHttp` against the
 * gateway's MCP proxy, and `hostedMcpTool` through the gateway's responses.
 */
describe("the OpenAI Agents SDK and the MCP gateway", () => {
  setTracingDisabled(true);
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

  async function setUp() {
    const { secret } = await stack.createKey();
    const { id } = await (
      await stack.call(secret, "/api/v1/mcp/servers", {
        user: "alice",
        json: { name: "docs", url: upstream.url },
      })
    ).json();
    await stack.call(secret, `/api/v1/mcp/servers/${id}/credentials/shared`, {
      method: "PUT",
      user: "alice",
      json: { type: "bearer", token: "agents-shared-token" },
    });
    await stack.call(secret, "/api/v1/authorization/llm/grant", {
      user: "alice",
      json: { resourceType: "mcp_server", resourceId: id, userId: "bob", role: "reader" },
    });
    const runner = new Runner({
      modelProvider: new OpenAIProvider({
        openAIClient: new OpenAI({
          apiKey: secret,
          baseURL: `${stack.gatewayUrl}/api/v1/llm`,
          defaultHeaders: { "X-On-Behalf-Of": "bob" },
          maxRetries: 0,
        }),
        useResponses: true,
      }),
      tracingDisabled: true,
    });
    return { secret, id, runner };
  }

  it("MCPServerStreamableHttp against the proxy: bob's agent is given only his tools and its calls reach the upstream with the vault's credential", async () => {
    const { secret, id, runner } = await setUp();
    const server = new MCPServerStreamableHttp({
      url: `${stack.gatewayUrl}/api/v1/mcp/servers/${id}/mcp`,
      name: "docs",
      requestInit: { headers: { authorization: `Bearer ${secret}`, "x-on-behalf-of": "bob" } },
      // `slow` answers only when released: the agent is not given it.
      toolFilter: { blockedToolNames: ["slow"] },
    });
    await server.connect();
    try {
      expect((await server.listTools()).map((t) => t.name).sort()).toEqual([
        "lookup",
        "read_file",
        "search",
        "slow",
      ]);
      const agent = new Agent({
        name: "docs",
        instructions: "Use the tools.",
        mcpServers: [server],
        toolUseBehavior: "run_llm_again",
      });
      const from = upstream.calls.length;
      // The test provider calls the chosen function: the lookup tool.
      const result = await runner.run(agent, "trains", { maxTurns: 3 }).catch((e) => e);
      void result;
      const sent = stack.llm.requests.find((r) => (r.body.tools ?? []).length > 0)!.body;
      expect((sent.tools ?? []).map((t: { function: { name: string } }) => t.function.name).sort()).toEqual([
        "lookup",
        "read_file",
        "search",
      ]);
      const calls = upstream.calls.slice(from);
      expect(calls.map((c) => c.tool)).toContain("lookup");
      for (const call of calls) expect(call.headers.authorization).toBe("Bearer agents-shared-token");
    } finally {
      upstream.release();
      await server.close();
    }
  });

  it("hostedMcpTool through responses: mcp_list_tools and mcp_call items, the answer from the tool's output", async () => {
    const { id, runner } = await setUp();
    const agent = new Agent({
      name: "docs",
      instructions: "Use the tools.",
      tools: [
        hostedMcpTool({
          serverLabel: "docs",
          serverUrl: `https://gateway.test/api/v1/mcp/servers/${id}/mcp`,
          allowedTools: ["lookup"],
          requireApproval: "never",
        }),
      ],
    });
    const result = await runner.run(agent, "planes");
    expect(result.finalOutput).toBe("Echo: looked up: planes");
    const types = result.rawResponses.flatMap((r) => r.output.map((o) => o.type));
    expect(types).toContain("hosted_tool_call");
  });

  it("hostedMcpTool with approvals: the run stops at the approval, and resumes from its own state to run the call once", async () => {
    const { id, runner } = await setUp();
    const agent = new Agent({
      name: "docs",
      instructions: "Use the tools.",
      tools: [
        hostedMcpTool({
          serverLabel: "docs",
          serverUrl: `https://gateway.test/api/v1/mcp/servers/${id}/mcp`,
          allowedTools: ["lookup"],
          requireApproval: "always",
        }),
      ],
    });
    const asked = await runner.run(agent, "boats");
    expect(asked.interruptions.length).toBe(1);
    const lookups = () =>
      upstream.calls.filter((c) => c.tool === "lookup" && c.arguments.text === "boats").length;
    expect(lookups()).toBe(0);
    asked.state.approve(asked.interruptions[0]!);
    const resumed = await runner.run(agent, asked.state);
    expect(resumed.finalOutput).toBe("Echo: looked up: boats");
    expect(lookups()).toBe(1);
  });
});
