import { hashedEmbedding } from "@gw/test-kit/llm-upstream";
import { pythonPrints, useOpenaiPython } from "@gw/test-kit/python-venv";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { useStack } from "../../packages/service/test/stack.ts";

/**
 * The OpenAI client libraries' `embeddings.create`, unchanged, through the
 * gateway to the test provider: both ask for base64 unless told otherwise
 * and decode it themselves, so what they hand back is the provider's
 * vectors as float32s, whichever encoding they used.
 */
const stack = useStack({ LLM_MODELS: "text-embedding-3-small" });
const MODEL = "text-embedding-3-small";
const TEXTS = ["the cat sat on the mat", "stock prices fell"];
/** The provider's vector of `text` as float32s. */
const expected = (text: string, dimensions?: number) =>
  Array.from(Float32Array.from(hashedEmbedding(text, dimensions)));

describe("the official openai SDK's embeddings", () => {
  it("gets one vector per input, decoded from base64 by the client, and floats when it asks for them", async () => {
    const openai = new OpenAI({
      apiKey: (await stack.createKey()).secret,
      baseURL: `${stack.gatewayUrl}/api/v1/llm`,
      maxRetries: 0,
    });
    const answer = await openai.embeddings.create({ model: MODEL, input: TEXTS });
    expect(stack.llm.requests.at(-1)?.body).toMatchObject({ encoding_format: "base64" });
    expect(answer.data.map((d) => d.embedding)).toEqual(TEXTS.map((t) => expected(t)));
    expect(answer.usage).toEqual({ prompt_tokens: 9, total_tokens: 9 });
    const floats = await openai.embeddings.create({
      model: MODEL,
      input: TEXTS[0]!,
      encoding_format: "float",
      dimensions: 32,
    });
    expect(floats.data[0]?.embedding).toEqual(expected(TEXTS[0]!, 32));
  });
});

describe("openai-python's embeddings", () => {
  const openaiPython = useOpenaiPython();
  it("gets one vector per input, as base64 (decoded by the client) and as floats", async (ctx) => {
    const python = openaiPython(ctx);
    if (!python) return;
    const key = await stack.createKey();
    const script = [
      "import json, os, openai",
      "client = openai.OpenAI(api_key=os.environ['GATEWAY_KEY'], base_url=os.environ['GATEWAY_URL'] + '/api/v1/llm', max_retries=0)",
      "texts = json.loads(os.environ['TEXTS'])",
      "e = client.embeddings.create(model='text-embedding-3-small', input=texts)",
      "f = client.embeddings.create(model='text-embedding-3-small', input=texts[0], encoding_format='float', dimensions=32)",
      "print(json.dumps({'base64': [list(d.embedding) for d in e.data], 'float': f.data[0].embedding, 'usage': e.usage.model_dump()}))",
    ].join("\n");
    const stdout = await pythonPrints(python, ["-c", script], {
      GATEWAY_URL: stack.gatewayUrl,
      GATEWAY_KEY: key.secret,
      TEXTS: JSON.stringify(TEXTS),
    });
    const got = JSON.parse(stdout);
    expect(got.base64).toEqual(TEXTS.map((t) => expected(t)));
    expect(got.float).toEqual(expected(TEXTS[0]!, 32));
    expect(got.usage).toEqual({ prompt_tokens: 9, total_tokens: 9 });
  });
});
