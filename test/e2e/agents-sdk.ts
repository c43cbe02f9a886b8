import {
  Agent,
  OpenAIConversationsSession,
  OpenAIProvider,
  Runner,
  setTracingDisabled,
  tool,
} from "@openai/agents";
import OpenAI from "openai";
import { expect, it } from "vitest";
import type { SdkTarget } from "./openai-sdk.ts";

/**
 * The OpenAI Agents SDK (`@openai/agents`) against the gateway: its model
 * provider given an `openai` client pointed at the gateway's `/api/v1/llm`
 * (the end user in `defaultHeaders`), in Responses mode and in Chat
 * Completions mode; agents on the SDK's default model (which sends
 * `reasoning` and `text.verbosity`); conversation sessions.
 */
export function agentsSdkCases(target: () => SdkTarget): void {
  // Traces would go to OpenAI's own endpoint.
  setTracingDisabled(true);
  const client = (secret: string, user: string) =>
    new OpenAI({
      apiKey: secret,
      baseURL: `${target().gatewayUrl}/api/v1/llm`,
      defaultHeaders: { "X-On-Behalf-Of": user },
      maxRetries: 0,
    });
  const runner = (openAIClient: OpenAI, useResponses = true) =>
    new Runner({ modelProvider: new OpenAIProvider({ openAIClient, useResponses }), tracingDisabled: true });
  const lastUpstream = () => target().llm.requests.at(-1)!.body;
  const weather = tool({
    name: "get_weather",
    description: "The weather in a city",
    parameters: {
      type: "object",
      properties: { text: { type: "string" } },
      required: ["text"],
      additionalProperties: false,
    },
    strict: true,
    execute: async (input) => `sunny in ${(input as { text: string }).text}`,
  });

  it("Agents SDK: an agent on the SDK's default model answers; its reasoning and verbosity reach the provider", async () => {
    const openai = client((await target().createKey()).secret, "alice");
    const agent = new Agent({ name: "echo", instructions: "Be brief." });
    const result = await runner(openai).run(agent, "hello there");
    expect(result.finalOutput).toBe("Echo: hello there");
    const sent = lastUpstream();
    expect(sent.model).toMatch(/^gpt-/);
    expect(sent.messages[0]).toEqual({ role: "system", content: "Be brief." });
    expect(sent).toHaveProperty("reasoning_effort");
    expect(sent).toHaveProperty("verbosity");
  });

  it("Agents SDK: a tool loop in Responses mode and in Chat Completions mode", async () => {
    const openai = client((await target().createKey()).secret, "alice");
    const agent = new Agent({ name: "weather", instructions: "Use the tool.", tools: [weather] });
    for (const useResponses of [true, false]) {
      const result = await runner(openai, useResponses).run(agent, "Paris");
      expect(result.finalOutput).toBe("Echo: sunny in Paris");
      expect(lastUpstream().messages.at(-1)).toMatchObject({ role: "tool", content: "sunny in Paris" });
    }
  });

  it("Agents SDK: OpenAIConversationsSession keeps the conversation on the gateway across runs", async () => {
    const openai = client((await target().createKey()).secret, "alice");
    const session = new OpenAIConversationsSession({ client: openai });
    const agent = new Agent({ name: "echo", instructions: "Be brief." });
    const first = await runner(openai).run(agent, "I like trains.", { session });
    expect(first.finalOutput).toBe("Echo: I like trains.");
    const second = await runner(openai).run(agent, "Where to?", { session });
    expect(second.finalOutput).toBe("Echo: Where to?");
    expect(lastUpstream().messages.map((m) => m.content)).toEqual([
      "Be brief.",
      "I like trains.",
      "Echo: I like trains.",
      "Where to?",
    ]);
    const id = await session.getSessionId();
    expect(id).toMatch(/^conv_/);
    const items = await openai.conversations.items.list(id, { order: "asc" });
    expect(items.data.map((i) => i.type)).toEqual(["message", "message", "message", "message"]);
  });

  it("Agents SDK: a bad key surfaces as the SDK's AuthenticationError with the gateway's reason", async () => {
    const openai = client("gwsk_not-a-real-key-not-a-real-key-not-a-real-k", "alice");
    const error = await runner(openai)
      .run(new Agent({ name: "echo" }), "hi")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((error as Error).message).toBe("401 Invalid API key");
  });
}
