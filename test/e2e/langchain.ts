import {
  AIMessage,
  type AIMessageChunk,
  type BaseMessage,
  HumanMessage,
  type ToolMessage,
} from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { expect, it } from "vitest";
import type { SdkTarget } from "./openai-sdk.ts";

/**
 * LangChain JS (`@langchain/openai`'s `ChatOpenAI`) against the gateway, as
 * its users point it there: `configuration.baseURL` the gateway's
 * `/api/v1/llm`, the API key, the end user in `defaultHeaders`; in chat mode
 * (Chat Completions) and in Responses mode (`useResponsesApi: true`):
 * invoke, stream, the tool loop (`bindTools`, the tool's `ToolMessage` sent
 * back, which carries `name`), structured output.
 */
export function langchainCases(target: () => SdkTarget): void {
  /** The bodies LangChain sent, newest last. */
  const sent: Record<string, unknown>[] = [];
  const model = async (useResponsesApi: boolean) =>
    new ChatOpenAI({
      model: "auto",
      apiKey: (await target().createKey()).secret,
      configuration: {
        baseURL: `${target().gatewayUrl}/api/v1/llm`,
        defaultHeaders: { "X-On-Behalf-Of": "alice" },
        fetch: (input: string | URL | Request, init?: RequestInit) => {
          if (typeof init?.body === "string") sent.push(JSON.parse(init.body));
          return fetch(input, init);
        },
      },
      useResponsesApi,
      maxRetries: 0,
    });
  const lastUpstream = () => target().llm.requests.at(-1)!.body;
  const WEATHER_SCHEMA = {
    type: "object" as const,
    properties: { text: { type: "string" as const } },
    required: ["text"],
    additionalProperties: false,
  };
  const weather = tool(async ({ text }: { text: string }) => `sunny in ${text}`, {
    name: "get_weather",
    description: "The weather in a city",
    schema: WEATHER_SCHEMA,
  });

  for (const [mode, responses] of [
    ["chat mode", false],
    ["Responses mode", true],
  ] as const) {
    it(`LangChain (${mode}): invoke and stream`, async () => {
      const chat = await model(responses);
      const answer = await chat.invoke("hello there");
      expect(answer.content).toEqual(
        responses
          ? [expect.objectContaining({ type: "text", text: "Echo: hello there" })]
          : "Echo: hello there",
      );
      expect(answer.usage_metadata).toMatchObject({ output_tokens: 3 });
      let text = "";
      for await (const chunk of await chat.stream("one two three")) text += chunk.text;
      expect(text).toBe("Echo: one two three");
    });

    it(`LangChain (${mode}): the tool loop with bindTools, its ToolMessage (with name) sent back`, async () => {
      const chat = (await model(responses)).bindTools([weather]);
      const messages: BaseMessage[] = [new HumanMessage("Paris")];
      const call = await chat.invoke(messages);
      expect(call.tool_calls).toEqual([
        expect.objectContaining({ name: "get_weather", args: { text: "Paris" }, id: expect.any(String) }),
      ]);
      messages.push(call);
      for (const toolCall of call.tool_calls ?? []) {
        // A tool invoked with the model's call answers with its ToolMessage (call id and tool name).
        const result = await (weather as unknown as { invoke(c: ToolCall): Promise<ToolMessage> }).invoke(
          toolCall,
        );
        expect(result.name).toBe("get_weather");
        messages.push(result);
      }
      const answer = await chat.invoke(messages);
      expect(answer).toBeInstanceOf(AIMessage);
      expect(answer.text).toBe("Echo: sunny in Paris");
      expect(lastUpstream().messages.at(-1)).toMatchObject({ role: "tool", content: "sunny in Paris" });
      // What broke LangChain's agents in chat mode: the tool message's `name`.
      if (!responses)
        expect((sent.at(-1)!.messages as unknown[]).at(-1)).toMatchObject({
          role: "tool",
          name: "get_weather",
        });
      // Streamed, the tool call arrives in pieces and LangChain joins them.
      let joined: AIMessageChunk | undefined;
      for await (const chunk of await chat.stream([new HumanMessage("Rome")]))
        joined = joined ? joined.concat(chunk) : chunk;
      expect(joined?.tool_calls).toEqual([
        expect.objectContaining({ name: "get_weather", args: { text: "Rome" } }),
      ]);
    });

    it(`LangChain (${mode}): structured output`, async () => {
      const chat = await model(responses);
      const structured = chat.withStructuredOutput(
        { title: "get_weather", description: "The weather in a city", ...WEATHER_SCHEMA },
        { method: "functionCalling", name: "get_weather" },
      );
      expect(await structured.invoke("Oslo")).toEqual({ text: "Oslo" });
      expect(lastUpstream().tool_choice).toEqual({ type: "function", function: { name: "get_weather" } });
    });
  }
}
