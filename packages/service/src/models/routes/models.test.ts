import { describe, expect, it } from "vitest";
import { llmError, useStack } from "../../../test/stack.ts";

const stack = useStack({ LLM_MODELS: "echo-large,echo-small,echo-xl" });
const MODELS = "/api/v1/llm/models";
const model = (id: string) => ({ id, object: "model", created: 0, owned_by: "gateway" });

describe("models", () => {
  it("lists the configured models, the default first, in OpenAI's list shape; retrieves each", async () => {
    const key = await stack.createKey();
    const list = await stack.call(key.secret, MODELS);
    expect(list.status).toBe(200);
    expect(await list.json()).toEqual({
      object: "list",
      data: [model("echo-small"), model("echo-large"), model("echo-xl")],
    });
    expect(await (await stack.call(key.secret, `${MODELS}/echo-xl`)).json()).toEqual(model("echo-xl"));
    const unknown = await stack.call(key.secret, `${MODELS}/gpt-nope`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual(llmError("not_found", "No model gpt-nope", "model"));
    // `auto`, which every model field takes, is retrieved as the default model under its own name.
    expect(await (await stack.call(key.secret, `${MODELS}/auto`)).json()).toEqual(model("auto"));
  });

  it("are limited to the key's allowlist: others are 404 to list and retrieve, 403 naming them to use", async () => {
    const key = await stack.createKey({ models: ["echo-large"] });
    expect((await (await stack.call(key.secret, MODELS)).json()).data).toEqual([model("echo-large")]);
    expect((await stack.call(key.secret, `${MODELS}/echo-small`)).status).toBe(404);
    // The default (echo-small) is not this key's: neither is `auto`.
    expect((await stack.call(key.secret, `${MODELS}/auto`)).status).toBe(404);

    const before = stack.llm.requests.length;
    for (const [asked, named] of [
      ["echo-small", "echo-small"],
      ["auto", "echo-small"],
    ]) {
      const res = await stack.call(key.secret, "/api/v1/llm/responses", {
        json: { model: asked, input: "hi" },
        user: "alice",
      });
      expect(res.status).toBe(403);
      expect(await res.json()).toEqual(
        llmError("forbidden", `This API key may not use the model '${named}'`, "model"),
      );
    }
    expect(stack.llm.requests.length).toBe(before);
    const allowed = await stack.call(key.secret, "/api/v1/llm/responses", {
      json: { model: "echo-large", input: "hi" },
      user: "alice",
    });
    expect(allowed.status).toBe(200);
  });

  it("the allowlist holds for tokens the key mints too", async () => {
    const key = await stack.createKey({ models: ["echo-large"] });
    const exchanged = await stack.call(key.secret, "/api/v1/authentication/api-keys/exchange-token", {
      json: { audience: "https://gateway.test", externalUserId: "alice" },
    });
    const { token } = await exchanged.json();
    expect((await (await stack.call(token, MODELS)).json()).data).toEqual([model("echo-large")]);
    const refused = await stack.call(token, "/api/v1/llm/responses", {
      json: { model: "echo-xl", input: "x" },
    });
    expect(refused.status).toBe(403);
  });

  it("needs responses:read or responses:write", async () => {
    const key = await stack.createKey({ permissions: ["conversations:read"] });
    const res = await stack.call(key.secret, MODELS);
    expect(res.status).toBe(403);
    expect((await res.json()).error.code).toBe("forbidden");
  });
});

describe("models of the development provider (`pnpm start` with no provider configured)", () => {
  const development = useStack({
    LLM_MODELS: "echo",
    LLM_DEFAULT_MODEL: "echo",
    LLM_DEVELOPMENT_PROVIDER: "true",
  });

  it("are listed and retrieved as owned by development", async () => {
    const key = await development.createKey();
    const echo = { id: "echo", object: "model", created: 0, owned_by: "development" };
    expect(await (await development.call(key.secret, MODELS)).json()).toEqual({
      object: "list",
      data: [echo],
    });
    expect(await (await development.call(key.secret, `${MODELS}/echo`)).json()).toEqual(echo);
  });
});
