import { fileURLToPath } from "node:url";
import { runPython, useOpenaiPython } from "@gw/test-kit/python-venv";
import { describe, expect, it } from "vitest";
import { uploaded } from "../../../test/files.ts";
import { parseEvents } from "../../../test/stack.ts";
import { useVectorStack } from "../../../test/vector-stores.ts";

const AUTHZ = "/api/v1/authorization/llm";
const STORES = "/api/v1/llm/vector_stores";

const { stack, embedder } = useVectorStack();
const embedded = embedder.calls;

type Page = { object: string; data: { file_id: string; filename: string; content: { text: string }[] }[] };

/**
 * alice's store with two files (the first about the orchard's schedule, the second its secret
 * merger), shared with bob with the first file only; ingested.
 */
async function aliceStore() {
  const key = await stack.createKey();
  const call = (user: string, path: string, json?: unknown, method = "POST") =>
    stack.call(key.secret, path, { method, user, ...(json === undefined ? {} : { json }) });
  const shared = await uploaded(stack, key.secret, {
    content: "apple orchard harvest schedule for the autumn",
    filename: "schedule.txt",
    user: "alice",
  });
  const secret = await uploaded(stack, key.secret, {
    content: "apple orchard harvest secret merger plans",
    filename: "merger.txt",
    user: "alice",
  });
  const created = await call("alice", STORES, { name: "orchard", file_ids: [shared.id, secret.id] });
  expect(created.status).toBe(200);
  const store = (await created.json()) as { id: string };
  for (let i = 0; ; i++) {
    const got = (await (await call("alice", `${STORES}/${store.id}`, undefined, "GET")).json()) as {
      file_counts: { completed: number; in_progress: number };
    };
    if (got.file_counts.completed === 2) break;
    if (got.file_counts.in_progress === 0 || i > 200) throw new Error(`ingestion: ${JSON.stringify(got)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const grant = async (resourceType: string, resourceId: string, userId: string) =>
    expect(
      (await call("alice", `${AUTHZ}/grant`, { resourceType, resourceId, userId, role: "reader" })).status,
    ).toBe(204);
  await grant("vector_store", store.id, "bob");
  await grant("file", shared.id, "bob");
  const search = (user: string, body: Record<string, unknown> = {}, id = store.id) =>
    call(user, `${STORES}/${id}/search`, { query: "apple orchard harvest", ...body });
  const found = async (user: string, body?: Record<string, unknown>) => {
    const res = await search(user, body);
    expect(res.status).toBe(200);
    return ((await res.json()) as Page).data.map((r) => r.file_id);
  };
  return { key, call, store, shared, secret, search, found, grant };
}

describe("POST /vector_stores/{id}/search through the gateway", () => {
  it("answers OpenAI's page with bob's readable chunks only; alice's with both files", async () => {
    const { shared, secret, search, found } = await aliceStore();
    const res = await search("bob");
    expect(res.status).toBe(200);
    const page = (await res.json()) as Page & Record<string, unknown>;
    expect(page).toMatchObject({
      object: "vector_store.search_results.page",
      search_query: ["apple orchard harvest"],
      has_more: false,
      next_page: null,
    });
    expect(page.data).toEqual([
      expect.objectContaining({
        file_id: shared.id,
        filename: "schedule.txt",
        content: [{ type: "text", text: "apple orchard harvest schedule for the autumn" }],
      }),
    ]);
    expect(new Set(await found("alice"))).toEqual(new Set([shared.id, secret.id]));
  });

  it("a revoke of bob's read takes the file out of his next search", async () => {
    const { key, shared, found } = await aliceStore();
    expect(await found("bob")).toEqual([shared.id]);
    const revoke = await stack.call(key.secret, `${AUTHZ}/revoke`, {
      json: { resourceType: "file", resourceId: shared.id, userId: "bob", role: "reader" },
      user: "alice",
    });
    expect(revoke.status).toBe(204);
    expect(await found("bob")).toEqual([]);
  });

  it("a public reader of the secret file opens it alone to carol, once she may read the store", async () => {
    const { store, secret, grant, found } = await aliceStore();
    await grant("vector_store", store.id, "carol");
    expect(await found("carol")).toEqual([]);
    await grant("file", secret.id, "*");
    expect(await found("carol")).toEqual([secret.id]);
  });

  it("without reader on the store, or from another organization: 404, nothing embedded", async () => {
    const { store, search } = await aliceStore();
    embedded.length = 0;
    expect((await search("carol")).status).toBe(404);
    const stranger = await stack.createKey();
    const res = await stack.call(stranger.secret, `${STORES}/${store.id}/search`, {
      json: { query: "apple" },
      user: "alice",
    });
    expect(res.status).toBe(404);
    expect(embedded).toEqual([]);
  });

  it("a key without responses:write may read stores but not search them: the query's embedding is a model call (403, nothing embedded or billed)", async () => {
    const { key, store } = await aliceStore();
    const readOnly = await stack.createKey({
      org: key.org,
      permissions: ["files:read", "files:write", "vector_stores:read", "vector_stores:write"],
    });
    embedded.length = 0;
    const asAlice = (path: string, json?: unknown) =>
      stack.call(readOnly.secret, path, {
        user: "alice",
        ...(json === undefined ? { method: "GET" } : { json }),
      });
    expect((await asAlice(`${STORES}/${store.id}`)).status).toBe(200);
    const res = await asAlice(`${STORES}/${store.id}/search`, { query: "apple" });
    expect(res.status).toBe(403);
    expect((await res.json()).error).toMatchObject({
      code: "forbidden",
      message: "This credential lacks the 'responses:write' permission, which the query's embedding needs",
    });
    expect(embedded).toEqual([]);
  });

  it("refuses what it does not do with a 422 naming the field", async () => {
    const { search } = await aliceStore();
    for (const [body, loc] of [
      [{ rewrite_query: true }, ["body", "rewrite_query"]],
      [{ max_num_results: 51 }, ["body", "max_num_results"]],
      [{ filters: { type: "near", key: "a", value: 1 } }, ["body", "filters"]],
      [{ ranking_options: { ranker: "default-2024-11-15" } }, ["body", "ranking_options", "ranker"]],
    ] as const) {
      const res = await search("alice", body);
      expect(res.status).toBe(422);
      expect(((await res.json()) as { detail: { loc: unknown[] }[] }).detail[0]!.loc).toEqual(loc);
    }
    // Too many queries says so, at the list.
    const many = await search("alice", { query: Array.from({ length: 17 }, (_, i) => `q${i}`) });
    expect(many.status).toBe(422);
    expect((await many.json()).detail).toEqual([
      expect.objectContaining({ loc: ["body", "query"], type: "too_long", ctx: { max_length: 16 } }),
    ]);
  });
});

describe("the Responses file_search tool", () => {
  it("gives the model only bob's readable chunks, cites only that file, and shows results when included", async () => {
    const { store, shared, call } = await aliceStore();
    const before = stack.llm.requests.length;
    const res = await call("bob", "/api/v1/llm/responses", {
      model: "gpt-4o-mini",
      input: "apple orchard harvest",
      tools: [{ type: "file_search", vector_store_ids: [store.id] }],
      include: ["file_search_call.results"],
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { output: Record<string, unknown>[] };
    const sent = JSON.stringify(stack.llm.requests.slice(before).map((r) => r.body.messages));
    expect(sent).toContain("harvest schedule for the autumn");
    expect(sent).not.toContain("merger");
    expect(body.output[0]).toMatchObject({
      type: "file_search_call",
      status: "completed",
      queries: ["apple orchard harvest"],
      results: [expect.objectContaining({ file_id: shared.id, filename: "schedule.txt" })],
    });
    const message = body.output[1] as { content: { annotations: unknown[]; text: string }[] };
    expect(message.content[0]!.annotations).toEqual([
      {
        type: "file_citation",
        file_id: shared.id,
        filename: "schedule.txt",
        index: message.content[0]!.text.length,
      },
    ]);
  });

  it("takes tool_choice file_search, or required with only file_search: the search runs, the model is asked no tool call", async () => {
    const { store, call } = await aliceStore();
    const tools = [{ type: "file_search", vector_store_ids: [store.id] }];
    for (const tool_choice of [{ type: "file_search" }, "required"]) {
      const before = stack.llm.requests.length;
      const res = await call("bob", "/api/v1/llm/responses", {
        model: "gpt-4o-mini",
        input: "apple orchard harvest",
        tools,
        tool_choice,
      });
      expect(res.status, JSON.stringify(tool_choice)).toBe(200);
      const body = (await res.json()) as { tool_choice: unknown; output: { type: string }[] };
      expect(body.tool_choice).toEqual(tool_choice);
      expect(body.output.map((o) => o.type)).toEqual(["file_search_call", "message"]);
      const asked = stack.llm.requests.slice(before).map((r) => r.body);
      expect(asked).toHaveLength(1);
      expect(asked[0]).not.toHaveProperty("tool_choice");
    }
    // Without a file_search tool, it names nothing to choose.
    const none = await call("bob", "/api/v1/llm/responses", {
      model: "gpt-4o-mini",
      input: "x",
      tool_choice: { type: "file_search" },
    });
    expect(none.status).toBe(422);
    expect((await none.json()).detail[0]).toMatchObject({ loc: ["body", "tool_choice", "type"] });
  });

  it("an input of only a file_search_call (by reference) gives the model nothing to read: 422 at input, not the provider's refusal", async () => {
    const { store, call } = await aliceStore();
    const first = await call("bob", "/api/v1/llm/responses", {
      model: "gpt-4o-mini",
      input: "apple orchard harvest",
      tools: [{ type: "file_search", vector_store_ids: [store.id] }],
    });
    const search = ((await first.json()) as { output: { type: string; id: string }[] }).output[0]!;
    expect(search.type).toBe("file_search_call");
    const before = stack.llm.requests.length;
    const res = await call("bob", "/api/v1/llm/responses", {
      model: "gpt-4o-mini",
      input: [{ type: "item_reference", id: search.id }],
    });
    expect(res.status).toBe(422);
    expect((await res.json()).detail[0]).toMatchObject({ loc: ["body", "input"], type: "value_error" });
    expect(stack.llm.requests.length).toBe(before);
    // Before a message, it is taken (and not sent).
    const withMessage = await call("bob", "/api/v1/llm/responses", {
      model: "gpt-4o-mini",
      input: [
        { type: "item_reference", id: search.id },
        { role: "user", content: "and then?" },
      ],
    });
    expect(withMessage.status).toBe(200);
  });

  it("leaves results out unless include asks; streams OpenAI's file_search_call events", async () => {
    const { store, call } = await aliceStore();
    const plain = await call("bob", "/api/v1/llm/responses", {
      model: "gpt-4o-mini",
      input: "apple orchard harvest",
      tools: [{ type: "file_search", vector_store_ids: [store.id] }],
    });
    expect(((await plain.json()) as { output: { results?: unknown }[] }).output[0]!.results).toBeNull();
    const streamed = await call("bob", "/api/v1/llm/responses", {
      model: "gpt-4o-mini",
      input: "apple orchard harvest",
      stream: true,
      tools: [{ type: "file_search", vector_store_ids: [store.id] }],
    });
    const types = parseEvents(await streamed.text()).map((e) => e.type);
    expect(types.slice(0, 7)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.file_search_call.in_progress",
      "response.file_search_call.searching",
      "response.file_search_call.completed",
      "response.output_item.done",
    ]);
    expect(types).toContain("response.output_text.annotation.added");
    expect(types.at(-1)).toBe("response.completed");
  });

  it("a store bob may not read is a 404 before the model is called", async () => {
    const { store, call } = await aliceStore();
    const before = stack.llm.requests.length;
    const res = await call("carol", "/api/v1/llm/responses", {
      model: "gpt-4o-mini",
      input: "apple",
      tools: [{ type: "file_search", vector_store_ids: [store.id] }],
    });
    expect(res.status).toBe(404);
    expect(stack.llm.requests.length).toBe(before);
  });
});

describe("openai-python", () => {
  const openaiPython = useOpenaiPython();
  it("vector_stores.search and responses.create(tools=[file_search]) as bob find and cite only his file", async (ctx) => {
    const python = openaiPython(ctx);
    if (!python) return;
    const { key, store, shared, secret } = await aliceStore();
    const script = fileURLToPath(new URL("../../../test/openai_python_vector_search.py", import.meta.url));
    const result = await runPython(python, ["-W", "ignore::UserWarning", script], {
      GATEWAY_URL: stack.gatewayUrl,
      GATEWAY_KEY: key.secret,
      STORE_ID: store.id,
      SHARED_FILE: shared.id,
      SECRET_FILE: secret.id,
    });
    expect({ code: result.code, stderr: result.code === 0 ? "" : result.stderr }).toEqual({
      code: 0,
      stderr: "",
    });
    expect(result.stdout.match(/^ok /gm)).toHaveLength(3);
  }, 600_000);
});
