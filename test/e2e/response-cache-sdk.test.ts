import { randomBytes } from "node:crypto";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { useStack } from "../../packages/service/test/stack.ts";

/**
 * The official openai npm client, unchanged, against a key with the response
 * cache on: `.withResponse()` gives it `X-Gateway-Cache`, and a request
 * option's header asks for a refresh.
 */
const stack = useStack();

describe("the official openai SDK and the response cache", () => {
  it("reads x-gateway-cache through .withResponse(): miss, then hit without the provider; refresh asks again", async () => {
    const key = await stack.createKey({ cache: "principal" });
    const openai = new OpenAI({
      apiKey: key.secret,
      baseURL: `${stack.gatewayUrl}/api/v1/llm`,
      maxRetries: 0,
      defaultHeaders: { "X-On-Behalf-Of": "alice" },
    });
    const input = `what is ${randomBytes(6).toString("hex")}?`;
    const calls = () => stack.llm.requests.length;

    const before = calls();
    const first = await openai.responses.create({ model: "echo-small", input }).withResponse();
    expect(first.response.headers.get("x-gateway-cache")).toBe("miss");
    const second = await openai.responses.create({ model: "echo-small", input }).withResponse();
    expect(second.response.headers.get("x-gateway-cache")).toBe("hit");
    expect(second.data.output_text).toBe(first.data.output_text);
    expect(second.data.id).not.toBe(first.data.id);
    expect(calls() - before).toBe(1);

    const refreshed = await openai.responses
      .create({ model: "echo-small", input }, { headers: { "X-Gateway-Cache": "refresh" } })
      .withResponse();
    expect(refreshed.response.headers.get("x-gateway-cache")).toBe("miss");
    expect(calls() - before).toBe(2);

    const chat = await openai.chat.completions
      .create({ model: "echo-small", messages: [{ role: "user", content: input }] })
      .withResponse();
    expect(chat.response.headers.get("x-gateway-cache")).toBe("miss");
    const bob = new OpenAI({
      apiKey: key.secret,
      baseURL: `${stack.gatewayUrl}/api/v1/llm`,
      maxRetries: 0,
      defaultHeaders: { "X-On-Behalf-Of": "bob" },
    });
    const other = await bob.chat.completions
      .create({ model: "echo-small", messages: [{ role: "user", content: input }] })
      .withResponse();
    expect(other.response.headers.get("x-gateway-cache")).toBe("miss");
  });
});
