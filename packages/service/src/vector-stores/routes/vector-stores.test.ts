import { openaiSchemaProblems } from "@gw/test-kit/openai-schemas";
import { describe, expect, it } from "vitest";
import { uploaded } from "../../../test/files.ts";
import { llmError } from "../../../test/stack.ts";
import { chunksOf, settled, useVectorStack, VECTOR_STORES } from "../../../test/vector-stores.ts";

const { stack, embedder } = useVectorStack();
const AUTHZ = "/api/v1/authorization/llm";

/** alice's key, her store (with `files` uploaded and put in it), and calls as anyone. */
async function aliceStore(
  files: { content: string; filename?: string }[] = [],
  body: Record<string, unknown> = {},
) {
  const key = await stack.createKey();
  const ids = [];
  for (const f of files) ids.push((await uploaded(stack, key.secret, { ...f, user: "alice" })).id);
  const res = await stack.call(key.secret, VECTOR_STORES, {
    json: { name: "handbook", file_ids: ids, ...body },
    user: "alice",
  });
  expect(res.status).toBe(200);
  const store = await res.json();
  const call = (user: string, path = "", init: { method?: string; json?: unknown } = {}) =>
    stack.call(key.secret, `${VECTOR_STORES}/${store.id}${path}`, { ...init, user });
  const grant = async (resourceType: string, resourceId: string, userId: string, role: string) =>
    expect(
      (
        await stack.call(key.secret, `${AUTHZ}/grant`, {
          json: { resourceType, resourceId, userId, role },
          user: "alice",
        })
      ).status,
    ).toBe(204);
  return { key, store, fileIds: ids, call, grant };
}

describe("vector stores", () => {
  it("are created with their files, which are indexed in the background, in OpenAI's shapes", async () => {
    const { key, store, fileIds, call } = await aliceStore([
      { content: "The holiday policy: twenty days of paid leave a year.", filename: "policy.md" },
    ]);
    expect(store).toMatchObject({
      id: expect.stringMatching(/^vs_[0-9a-f]{32}$/),
      object: "vector_store",
      name: "handbook",
      metadata: {},
      expires_at: null,
    });
    expect(openaiSchemaProblems("VectorStoreObject", store)).toEqual([]);
    const file = await settled(stack, key.secret, store.id, fileIds[0]!);
    expect(file).toMatchObject({
      id: fileIds[0],
      object: "vector_store.file",
      vector_store_id: store.id,
      status: "completed",
      last_error: null,
      chunking_strategy: {
        type: "static",
        static: { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 },
      },
      attributes: {},
    });
    expect(openaiSchemaProblems("VectorStoreFileObject", file)).toEqual([]);
    const got = await (await call("alice")).json();
    expect(got.file_counts).toEqual({ in_progress: 0, completed: 1, failed: 0, cancelled: 0, total: 1 });
    expect(got.status).toBe("completed");
    expect(got.usage_bytes).toBe(file.usage_bytes);
    expect(got.usage_bytes).toBeGreaterThan(0);
    expect(await chunksOf(stack, key.org, store.id)).toEqual([
      { fileId: fileIds[0], text: "The holiday policy: twenty days of paid leave a year.", attributes: {} },
    ]);
    // Embedded with the setting's model, as the key and end user that attached the file.
    const call0 = embedder.calls.find((c) => c.texts[0]?.startsWith("The holiday policy"))!;
    expect(call0.model).toBe("text-embedding-3-small");
    expect(call0.caller.principal).toMatchObject({ org: key.org, user: "alice", keyId: key.id });
  });
});
