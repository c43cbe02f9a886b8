import { createOpenAI } from "@ai-sdk/openai";
import { pythonPrints, useOpenaiPython } from "@gw/test-kit/python-venv";
import { generateText, streamText } from "ai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { useHostedMcpStack } from "./hosted-mcp-stack.ts";

/**
 * Clients that keep their own history, unchanged, with hosted MCP tools
 * through the gateway's responses: they send a response's output back
 * (`mcp_list_tools`, `mcp_approval_request`) with their answer, without
 * `previous_response_id`, and read the items the gateway sends.
 */
describe("hosted MCP items sent back by the clients", () => {
  const openaiPython = useOpenaiPython();
  const { stack, upstream: upstreamOf, register } = useHostedMcpStack();

  const setUp = () => register("history-shared-token");
  const lookups = (text: string) =>
    upstreamOf().calls.filter((c) => c.tool === "lookup" && c.arguments.text === text).length;

  it("openai-python: input=r1.output + [approval] runs the approved call once; the next turn with the whole history runs nothing again", async (ctx) => {
    const python = openaiPython(ctx);
    if (!python) return;
    const { secret, serverUrl } = await setUp();
    const script = [
      "import json, os, openai",
      "client = openai.OpenAI(api_key=os.environ['GATEWAY_KEY'], base_url=os.environ['GATEWAY_URL'] + '/api/v1/llm', max_retries=0, default_headers={'X-On-Behalf-Of': 'bob'})",
      "tools = [{'type': 'mcp', 'server_label': 'docs', 'server_url': os.environ['SERVER_URL'], 'allowed_tools': ['lookup']}]",
      "history = [{'role': 'user', 'content': 'python history'}]",
      "r1 = client.responses.create(model='auto', input=history, tools=tools)",
      "ask = next(i for i in r1.output if i.type == 'mcp_approval_request')",
      "history += r1.output + [{'type': 'mcp_approval_response', 'approval_request_id': ask.id, 'approve': True}]",
      "r2 = client.responses.create(model='auto', input=history, tools=tools)",
      "history += r2.output + [{'role': 'user', 'content': 'thanks'}]",
      "r3 = client.responses.create(model='auto', input=history, tools=tools)",
      "print(json.dumps({'r1': [i.type for i in r1.output], 'r2': [i.model_dump() for i in r2.output], 'r3': [i.type for i in r3.output], 'asked': ask.id}))",
    ].join("\n");
    const got = JSON.parse(
      await pythonPrints(python, ["-c", script], {
        GATEWAY_URL: stack.gatewayUrl,
        GATEWAY_KEY: secret,
        SERVER_URL: serverUrl,
      }),
    );
    expect(got.r1).toEqual(["mcp_list_tools", "mcp_approval_request"]);
    expect(got.r2.map((i: { type: string }) => i.type)).toEqual(["mcp_list_tools", "mcp_call", "message"]);
    expect(got.r2[1]).toMatchObject({ approval_request_id: got.asked, output: "looked up: python history" });
    expect(got.r3).toContain("mcp_list_tools");
    expect(lookups("python history")).toBe(1);
  });

  it("the openai JS SDK: the same, with r1.output sent back as it came", async () => {
    const { secret, serverUrl } = await setUp();
    const client = new OpenAI({
      apiKey: secret,
      baseURL: `${stack.gatewayUrl}/api/v1/llm`,
      defaultHeaders: { "X-On-Behalf-Of": "bob" },
      maxRetries: 0,
    });
    const tools: OpenAI.Responses.Tool[] = [
      { type: "mcp", server_label: "docs", server_url: serverUrl, allowed_tools: ["lookup"] },
    ];
    const history: OpenAI.Responses.ResponseInputItem[] = [{ role: "user", content: "js history" }];
    const r1 = await client.responses.create({ model: "auto", input: history, tools });
    const ask = r1.output.find((i) => i.type === "mcp_approval_request")!;
    history.push(...(r1.output as OpenAI.Responses.ResponseInputItem[]), {
      type: "mcp_approval_response",
      approval_request_id: ask.id,
      approve: true,
    });
    const r2 = await client.responses.create({ model: "auto", input: history, tools });
    expect(r2.output.map((i) => i.type)).toEqual(["mcp_list_tools", "mcp_call", "message"]);
    expect(lookups("js history")).toBe(1);
  });

  it("the Vercel AI SDK's openai.tools.mcp: generateText and streamText complete with the tool's call and result", async () => {
    const { secret, serverUrl } = await setUp();
    const openai = createOpenAI({
      baseURL: `${stack.gatewayUrl}/api/v1/llm`,
      apiKey: secret,
      headers: { "X-On-Behalf-Of": "bob" },
    });
    const tools = {
      docs: openai.tools.mcp({
        serverLabel: "docs",
        serverUrl,
        allowedTools: ["lookup"],
        requireApproval: "never",
      }),
    };
    const generated = await generateText({ model: openai("auto"), prompt: "ai sdk", tools, maxRetries: 0 });
    expect(generated.text).toBe("Echo: looked up: ai sdk");
    expect(JSON.stringify(generated.toolResults)).toContain("looked up: ai sdk");

    const streamed = streamText({ model: openai("auto"), prompt: "ai sdk stream", tools, maxRetries: 0 });
    const parts: string[] = [];
    for await (const part of streamed.fullStream)
      parts.push(part.type === "error" ? `error: ${String(part.error)}` : part.type);
    expect(parts.filter((p) => p.startsWith("error"))).toEqual([]);
    expect(await streamed.finishReason).toBe("stop");
    expect(await streamed.text).toBe("Echo: looked up: ai sdk stream");
  });
});
