import { createOpenAI } from "@ai-sdk/openai";
import { APICallError, generateText, jsonSchema, type ModelMessage, stepCountIs, streamText, tool } from "ai";
import { expect, it } from "vitest";
import type { SdkTarget } from "./openai-sdk.ts";

/**
 * The Vercel AI SDK (`ai` with `@ai-sdk/openai`) against the gateway, as its
 * users point it there: `baseURL` the gateway's `/api/v1/llm`, the API key,
 * the end user in `headers`. `openai(model)` speaks Responses (with `store`
 * on, so later turns send `item_reference`s), `openai.chat(model)` Chat
 * Completions.
 */
export function aiSdkCases(target: () => SdkTarget): void {
  /** The bodies the AI SDK sent, newest last. */
  const sent: Record<string, unknown>[] = [];
  const provider = (secret: string, user: string) =>
    createOpenAI({
      baseURL: `${target().gatewayUrl}/api/v1/llm`,
      apiKey: secret,
      headers: { "X-On-Behalf-Of": user },
      fetch: (input, init) => {
        if (typeof init?.body === "string") sent.push(JSON.parse(init.body));
        return fetch(input, init);
      },
    });
  const lastUpstream = () => target().llm.requests.at(-1)!.body;
  const weather = tool({
    description: "The weather in a city",
    inputSchema: jsonSchema<{ text: string }>({
      type: "object",
      properties: { text: { type: "string" } },
      required: ["text"],
    }),
    execute: async ({ text }) => `sunny in ${text}`,
  });

  it("AI SDK: generateText and a multi-turn chat with the response messages pushed back (item references)", async () => {
    const openai = provider((await target().createKey()).secret, "alice");
    const messages: ModelMessage[] = [{ role: "user", content: "hello there" }];
    const first = await generateText({ model: openai("auto"), messages, maxRetries: 0 });
    expect(first.text).toBe("Echo: hello there");
    messages.push(...first.response.messages, { role: "user", content: "and then?" });
    const second = await generateText({ model: openai("auto"), messages, maxRetries: 0 });
    expect(second.text).toBe("Echo: and then?");
    // The earlier answer went by reference to the stored item.
    expect(sent.at(-1)!.input).toContainEqual({ type: "item_reference", id: expect.stringMatching(/^msg_/) });
    expect(lastUpstream().messages).toEqual([
      { role: "user", content: "hello there" },
      { role: "assistant", content: "Echo: hello there" },
      { role: "user", content: "and then?" },
    ]);
    expect(second.usage.outputTokens).toBe(3);
  });

  it("AI SDK: streamText over Responses and over Chat Completions", async () => {
    const openai = provider((await target().createKey()).secret, "alice");
    for (const model of [openai("auto"), openai.chat("auto")]) {
      const result = streamText({ model, prompt: "one two three", maxRetries: 0 });
      let text = "";
      for await (const piece of result.textStream) text += piece;
      expect(text).toBe("Echo: one two three");
      expect((await result.usage).outputTokens).toBe(4);
    }
  });

  it("AI SDK: a tool loop over Responses and over Chat Completions runs the tool and answers with its output", async () => {
    const openai = provider((await target().createKey()).secret, "alice");
    for (const model of [openai("auto"), openai.chat("auto")]) {
      const result = await generateText({
        model,
        prompt: "Paris",
        tools: { get_weather: weather },
        stopWhen: stepCountIs(3),
        maxRetries: 0,
      });
      expect(result.steps[0]!.toolCalls).toMatchObject([
        { toolName: "get_weather", input: { text: "Paris" } },
      ]);
      expect(result.text).toBe("Echo: sunny in Paris");
    }
  });

  it("AI SDK: a refusal's APICallError carries the gateway's reason", async () => {
    const openai = provider((await target().createKey({ models: ["echo-only"] })).secret, "alice");
    for (const model of [openai("not-allowed"), openai.chat("not-allowed")]) {
      const error = await generateText({ model, prompt: "x", maxRetries: 0 }).catch((e: unknown) => e);
      expect(APICallError.isInstance(error)).toBe(true);
      expect(error).toMatchObject({
        statusCode: 403,
        message: "This API key may not use the model 'not-allowed'",
      });
    }
  });
}
