import {
  Agent,
  hostedMcpTool,
  MCPServerStreamableHttp,
  OpenAIProvider,
  Runner,
  setTracingDisabled,
} from "@openai/agents";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { useHostedMcpStack } from "./hosted-mcp-stack.ts";

/**
 * The OpenAI Agents SDK with MCP: `MCPServerStreamableHttp` against the
 * gateway's MCP proxy, and `hostedMcpTool` through the gateway's responses.
 */
describe("the OpenAI Agents SDK and the MCP gateway", () => {
  setTracingDisabled(true);
  const { stack, upstream: upstreamOf, register } = useHostedMcpStack();

  async function setUp() {
    const { secret, id } = await register("agents-shared-token");
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
      const from = upstreamOf().calls.length;
      // The test provider calls the chosen function: the lookup tool.
      const result = await runner.run(agent, "trains", { maxTurns: 3 }).catch((e) => e);
      void result;
      const sent = stack.llm.requests.find((r) => (r.body.tools ?? []).length > 0)!.body;
      expect((sent.tools ?? []).map((t: { function: { name: string } }) => t.function.name).sort()).toEqual([
        "lookup",
        "read_file",
        "search",
      ]);
      const calls = upstreamOf().calls.slice(from);
      expect(calls.map((c) => c.tool)).toContain("lookup");
      for (const call of calls) expect(call.headers.authorization).toBe("Bearer agents-shared-token");
    } finally {
      upstreamOf().release();
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
      upstreamOf().calls.filter((c) => c.tool === "lookup" && c.arguments.text === "boats").length;
    expect(lookups()).toBe(0);
    asked.state.approve(asked.interruptions[0]!);
    const resumed = await runner.run(agent, asked.state);
    expect(resumed.finalOutput).toBe("Echo: looked up: boats");
    expect(lookups()).toBe(1);
  });
});
