import { loadConfig } from "@gw/core/config";
import { describe, expect, it } from "vitest";
import { serviceConfigSchema } from "../config.ts";
import { costNanoUsd, parseModelList } from "./prices.ts";
import { countPromptTokens, countTokens, tokenizerOf } from "./tokens.ts";

describe("token counts", () => {
  it("use the model family's encoding, else the text's UTF-8 bytes", async () => {
    expect(tokenizerOf("gpt-4o-mini")).toBe("o200k_base");
    expect(tokenizerOf("openai/gpt-5")).toBe("o200k_base");
    expect(tokenizerOf("o3-mini")).toBe("o200k_base");
    expect(tokenizerOf("gpt-4-turbo")).toBe("cl100k_base");
    expect(tokenizerOf("gpt-3.5-turbo")).toBe("cl100k_base");
    expect(tokenizerOf("llama-3.1-70b")).toBe("utf8_bytes");
    expect(await countTokens("gpt-4o", "hello world")).toBe(2);
    expect(await countTokens("gpt-4", "hello world")).toBe(2);
    expect(await countTokens("gpt-4o", "antidisestablishmentarianism")).toBeGreaterThan(1);
    expect(await countTokens("llama-3", "tokenization")).toBe(12);
    expect(await countTokens("llama-3", "漢字")).toBe(6);
    expect(await countTokens("llama-3", "")).toBe(0);
  });

  it("count a prompt's messages with their framing, tool calls and everything else the model reads", async () => {
    const model = "gpt-4o";
    const messages = [
      { role: "system" as const, content: "Be brief." },
      { role: "user" as const, content: "hello world" },
    ];
    const system = await countTokens(model, "Be brief.");
    const plain = await countPromptTokens({ model, messages });
    expect(plain).toBe(3 + (4 + system) + (4 + 2));
    const tools = [{ name: "lookup", parameters: { type: "object" } }];
    expect(await countPromptTokens({ model, messages, tools })).toBe(
      plain +
        (await countTokens(
          model,
          JSON.stringify({
            tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }],
          }),
        )),
    );
    const withCall = [
      ...messages,
      {
        role: "assistant" as const,
        content: "",
        toolCalls: [{ id: "call_1", name: "lookup", arguments: '{"q":1}' }],
      },
    ];
    expect(await countPromptTokens({ model, messages: withCall })).toBeGreaterThan(plain + 4);
  });
});

describe("prices in LLM_MODELS", () => {
  it("parse MODEL=INPUT/CACHED/OUTPUT beside bare names, keeping the names a list", () => {
    const list = parseModelList("gpt-4o-mini=0.15/0.075/0.6, llama-3 ,o3=2/0.5/8");
    expect([...list]).toEqual(["gpt-4o-mini", "llama-3", "o3"]);
    expect(list.prices.get("gpt-4o-mini")).toEqual({ input: 0.15, cachedInput: 0.075, output: 0.6 });
    expect(list.prices.has("llama-3")).toBe(false);
  });

  it.each([["gpt-4o=0.15/0.6"], ["gpt-4o=a/b/c"], ["gpt-4o=0.0001/1/1"], ["gpt-4o=1/1/1=2"]])(
    "refuse %s at start-up, naming it",
    (value) => {
      expect(() => loadConfig(serviceConfigSchema, { LLM_MODELS: value })).toThrow(/LLM_MODELS/);
    },
  );

  it("cost exactly, in billionths of a dollar, with cached input at its own price", () => {
    const price = { input: 0.15, cachedInput: 0.075, output: 0.6 };
    // 1,000 input (400 cached) and 500 output: 600×150 + 400×75 + 500×600 nano-$.
    expect(costNanoUsd(price, { input_tokens: 1_000, output_tokens: 500, cached_tokens: 400 })).toBe(420_000);
    expect(
      costNanoUsd({ input: 2.5, cachedInput: 1.25, output: 10 }, { input_tokens: 3, output_tokens: 7 }),
    ).toBe(3 * 2_500 + 7 * 10_000);
  });
});
