import { hashedEmbedding } from "@gw/test-kit/llm-upstream";
import { describe, expect, it } from "vitest";
import { uploaded } from "../../../test/files.ts";
import { chunksOf, settled, useVectorStack, VECTOR_STORES } from "../../../test/vector-stores.ts";

// Embeddings through the model-call pipeline to the fake provider, as production makes them.
const { stack } = useVectorStack({ pipeline: true });

describe("a file's embeddings", () => {
  it("go through the pipeline as the key that attached the file, with VECTOR_STORE_EMBEDDING_MODEL", async () => {
    const key = await stack.createKey();
    const file = await uploaded(stack, key.secret, { content: "Expenses are filed monthly.", user: "alice" });
    const store = await (
      await stack.call(key.secret, VECTOR_STORES, { json: { file_ids: [file.id] }, user: "alice" })
    ).json();
    const done = await settled(stack, key.secret, store.id, file.id);
    expect(done).toMatchObject({ status: "completed" });
    // Its text and its embedding, 256 float32s wide (the fake provider's width when none is asked).
    expect(done.usage_bytes).toBe(Buffer.byteLength("Expenses are filed monthly.") + 4 * 256);
    const asked = stack.llm.requests.filter(
      (r) => r.kind === "embeddings" && JSON.stringify(r.body).includes("Expenses are filed monthly."),
    );
    expect(asked).toHaveLength(1);
    expect(asked[0]!.body).toMatchObject({
      model: "text-embedding-3-small",
      input: ["Expenses are filed monthly."],
    });
    // Searchable with the provider's own embedding of a question.
    const hits = await stack.vectorStores.index.search({
      org: key.org,
      vectorStoreIds: [store.id],
      embedding: hashedEmbedding("when are expenses filed"),
      limit: 10,
      readable: { kind: "files", fileIds: [file.id] },
    });
    expect(hits.map((h) => h.text)).toEqual(["Expenses are filed monthly."]);
  });

  it("fail the file when the key that attached it may not use the embedding model", async () => {
    const key = await stack.createKey({ models: ["echo-small"] });
    const file = await uploaded(stack, key.secret, { content: "Not to be embedded.", user: "alice" });
    const store = await (
      await stack.call(key.secret, VECTOR_STORES, { json: { file_ids: [file.id] }, user: "alice" })
    ).json();
    expect(await settled(stack, key.secret, store.id, file.id)).toMatchObject({
      status: "failed",
      last_error: { code: "server_error", message: expect.stringContaining("text-embedding-3-small") },
    });
    expect(await chunksOf(stack, key.org, store.id)).toEqual([]);
    expect(
      stack.llm.requests.some(
        (r) => r.kind === "embeddings" && JSON.stringify(r.body).includes("Not to be embedded."),
      ),
    ).toBe(false);
  });

  it("and a search's query go through the pipeline too, as the key that searches", async () => {
    const key = await stack.createKey();
    const file = await uploaded(stack, key.secret, {
      content: "Invoices are paid on Fridays.",
      user: "alice",
    });
    const store = await (
      await stack.call(key.secret, VECTOR_STORES, { json: { file_ids: [file.id] }, user: "alice" })
    ).json();
    expect(await settled(stack, key.secret, store.id, file.id)).toMatchObject({ status: "completed" });
    const searcher = await stack.createKey({ org: key.org });
    const res = await stack.call(searcher.secret, `${VECTOR_STORES}/${store.id}/search`, {
      json: { query: "when are invoices paid" },
      user: "alice",
    });
    expect(res.status).toBe(200);
    const page = await res.json();
    expect(page.data.map((r: { content: { text: string }[] }) => r.content[0]!.text)).toEqual([
      "Invoices are paid on Fridays.",
    ]);
    const asked = stack.llm.requests.filter(
      (r) => r.kind === "embeddings" && JSON.stringify(r.body).includes("when are invoices paid"),
    );
    expect(asked).toHaveLength(1);
    expect(asked[0]!.body).toMatchObject({ model: "text-embedding-3-small" });
  });
});
