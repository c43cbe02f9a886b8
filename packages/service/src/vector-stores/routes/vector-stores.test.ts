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

describe("who may do what", () => {
  it("the creator (X-On-Behalf-Of) owns the store; the key's own owner did not create it", async () => {
    const { key, store } = await aliceStore();
    const check = async (user: string | undefined, role: string) =>
      (
        await (
          await stack.call(
            key.secret,
            `${AUTHZ}/check?resourceType=vector_store&resourceId=${store.id}&role=${role}`,
            user ? { user } : {},
          )
        ).json()
      ).allowed;
    expect(await check("alice", "owner")).toBe(true);
    expect(await check(undefined, "reader")).toBe(false);
  });

  it.each([
    ["owner", "alice", { get: 200, modify: 200, files: 200, delete: 200 }],
    ["writer", "wendy", { get: 200, modify: 200, files: 200, delete: 403 }],
    ["reader", "rita", { get: 200, modify: 403, files: 200, delete: 403 }],
    ["no role", "nobody", { get: 404, modify: 404, files: 404, delete: 404 }],
  ] as const)("as %s: get, modify, list files, delete", async (role, user, expected) => {
    const { store, call, grant } = await aliceStore();
    if (role === "writer" || role === "reader") await grant("vector_store", store.id, user, role);
    const get = await call(user);
    const modify = await call(user, "", { json: { name: "renamed" } });
    const files = await call(user, "/files");
    const del = await call(user, "", { method: "DELETE" });
    expect({ get: get.status, modify: modify.status, files: files.status, delete: del.status }).toEqual(
      expected,
    );
    if (expected.get === 404) expect(await get.json()).toEqual(llmError("not_found"));
  });

  it("putting a file in a store needs writer on the store and reader on the file, both", async () => {
    const { key, store, call, grant } = await aliceStore();
    const alices = await uploaded(stack, key.secret, { content: "alice's notes", user: "alice" });
    const bobs = await uploaded(stack, key.secret, { content: "bob's notes", user: "bob" });
    // bob writes the store but may not read alice's file: as if it did not exist; nothing attached.
    await grant("vector_store", store.id, "bob", "writer");
    const refused = await call("bob", "/files", { json: { file_id: alices.id } });
    expect(refused.status).toBe(404);
    expect(await refused.json()).toEqual(llmError("not_found", `No file ${alices.id}`));
    // His own file goes in.
    expect((await call("bob", "/files", { json: { file_id: bobs.id } })).status).toBe(200);
    // A reader of the store cannot put in even a file it may read.
    await grant("file", alices.id, "rita", "reader");
    await grant("vector_store", store.id, "rita", "reader");
    expect((await call("rita", "/files", { json: { file_id: alices.id } })).status).toBe(403);
    // A batch with one unreadable file attaches none of them.
    const batch = await call("bob", "/file_batches", { json: { file_ids: [bobs.id, alices.id] } });
    expect(batch.status).toBe(404);
    const listed = await (await call("alice", "/files")).json();
    expect(listed.data.map((f: { id: string }) => f.id)).toEqual([bobs.id]);
    // Creating a store with a file one cannot read creates nothing.
    const before = await (await stack.call(key.secret, VECTOR_STORES, { user: "bob" })).json();
    const create = await stack.call(key.secret, VECTOR_STORES, {
      json: { file_ids: [alices.id] },
      user: "bob",
    });
    expect(create.status).toBe(404);
    const after = await (await stack.call(key.secret, VECTOR_STORES, { user: "bob" })).json();
    // The same stores by id: their file counts move on as the file bob added is indexed meanwhile.
    const ids = (page: { data: { id: string }[] }) => page.data.map((s) => s.id);
    expect(ids(after)).toEqual(ids(before));
  });

  it("a list holds only the stores the principal may read; another organization sees none", async () => {
    const { key, store, grant } = await aliceStore();
    const second = await (
      await stack.call(key.secret, VECTOR_STORES, { json: { name: "two" }, user: "alice" })
    ).json();
    await grant("vector_store", second.id, "bob", "reader");
    const ids = async (secret: string, user: string, query = "") =>
      (await (await stack.call(secret, `${VECTOR_STORES}${query}`, { user })).json()).data.map(
        (s: { id: string }) => s.id,
      );
    expect(await ids(key.secret, "alice")).toEqual([second.id, store.id]);
    expect(await ids(key.secret, "alice", "?order=asc")).toEqual([store.id, second.id]);
    expect(await ids(key.secret, "alice", "?limit=1")).toEqual([second.id]);
    expect(await ids(key.secret, "alice", `?after=${second.id}`)).toEqual([store.id]);
    expect(await ids(key.secret, "alice", `?before=${store.id}`)).toEqual([second.id]);
    expect(await ids(key.secret, "bob")).toEqual([second.id]);
    const other = await stack.createKey();
    expect(await ids(other.secret, "alice")).toEqual([]);
    expect((await stack.call(other.secret, `${VECTOR_STORES}/${store.id}`, { user: "alice" })).status).toBe(
      404,
    );
  });

  it("need vector_stores:write to change and vector_stores:read to read", async () => {
    const { key, store } = await aliceStore();
    const readOnly = await stack.createKey({ org: key.org, permissions: ["vector_stores:read"] });
    const create = await stack.call(readOnly.secret, VECTOR_STORES, { json: {}, user: "alice" });
    expect(create.status).toBe(403);
    expect((await create.json()).error.message).toContain("vector_stores:write");
    expect(
      (await stack.call(readOnly.secret, `${VECTOR_STORES}/${store.id}`, { user: "alice" })).status,
    ).toBe(200);
    const noRead = await stack.createKey({ org: key.org, permissions: ["files:read"] });
    expect((await stack.call(noRead.secret, `${VECTOR_STORES}/${store.id}`, { user: "alice" })).status).toBe(
      403,
    );
  });
});

describe("a store's files", () => {
  it("are listed by status, given attributes (on their chunks too), and taken out leaving the file", async () => {
    const { key, store, fileIds, call } = await aliceStore([
      { content: "first file", filename: "a.txt" },
      { content: "second file", filename: "b.txt" },
    ]);
    for (const id of fileIds) await settled(stack, key.secret, store.id, id);
    const listed = await (await call("alice", "/files?filter=completed&order=asc")).json();
    expect(listed).toMatchObject({ object: "list", has_more: false });
    expect(new Set(listed.data.map((f: { id: string }) => f.id))).toEqual(new Set(fileIds));
    expect((await (await call("alice", "/files?filter=failed")).json()).data).toEqual([]);
    const updated = await call("alice", `/files/${fileIds[0]}`, {
      json: { attributes: { team: "hr", year: 2026 } },
    });
    expect(updated.status).toBe(200);
    expect((await updated.json()).attributes).toEqual({ team: "hr", year: 2026 });
    expect(
      (await chunksOf(stack, key.org, store.id)).find((c) => c.fileId === fileIds[0])?.attributes,
    ).toEqual({
      team: "hr",
      year: 2026,
    });
    const removed = await call("alice", `/files/${fileIds[0]}`, { method: "DELETE" });
    expect(await removed.json()).toEqual({
      id: fileIds[0],
      object: "vector_store.file.deleted",
      deleted: true,
    });
    expect((await chunksOf(stack, key.org, store.id)).map((c) => c.fileId)).toEqual([fileIds[1]]);
    expect((await (await call("alice")).json()).file_counts).toEqual({
      in_progress: 0,
      completed: 1,
      failed: 0,
      cancelled: 0,
      total: 1,
    });
    // The file itself stays.
    expect((await stack.call(key.secret, `/api/v1/llm/files/${fileIds[0]}`, { user: "alice" })).status).toBe(
      200,
    );
    expect((await call("alice", `/files/${fileIds[0]}`)).status).toBe(404);
  });

  it("are cut into chunks of the static strategy's tokens, each overlapping the one before", async () => {
    const words = Array.from({ length: 300 }, (_, i) => `word${i}`).join(" ");
    const { key, store, fileIds } = await aliceStore([{ content: words }], {
      chunking_strategy: { type: "static", static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 50 } },
    });
    const file = await settled(stack, key.secret, store.id, fileIds[0]!);
    expect(file.chunking_strategy).toEqual({
      type: "static",
      static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 50 },
    });
    const chunks = await chunksOf(stack, key.org, store.id);
    expect(chunks.length).toBeGreaterThan(3);
    // Every word is in some chunk, and neighbouring chunks share text.
    const all = chunks.map((c) => c.text).join(" ");
    for (const i of [0, 150, 299]) expect(all).toContain(`word${i}`);
    const tail = chunks[0]!.text.trim().split(" ").at(-1)!;
    expect(chunks[1]!.text).toContain(tail);
  });

  it("a file that is not text, and a PDF that does not parse, fail with their last_error; a PDF's text is indexed", async () => {
    const { key, store, call } = await aliceStore();
    const png = await uploaded(stack, key.secret, {
      content: new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      filename: "image.png",
      type: "image/png",
      user: "alice",
    });
    const broken = await uploaded(stack, key.secret, {
      content: "%PDF-1.7 this is not really a PDF",
      filename: "broken.pdf",
      type: "application/pdf",
      user: "alice",
    });
    const pdf = await uploaded(stack, key.secret, {
      content: MINIMAL_PDF,
      filename: "guide.pdf",
      type: "application/pdf",
      user: "alice",
    });
    for (const f of [png, broken, pdf])
      expect((await call("alice", "/files", { json: { file_id: f.id } })).status).toBe(200);
    expect(await settled(stack, key.secret, store.id, png.id)).toMatchObject({
      status: "failed",
      last_error: { code: "unsupported_file", message: expect.any(String) },
      usage_bytes: 0,
    });
    expect(await settled(stack, key.secret, store.id, broken.id)).toMatchObject({
      status: "failed",
      last_error: { code: "invalid_file", message: "The PDF could not be read" },
    });
    expect(await settled(stack, key.secret, store.id, pdf.id)).toMatchObject({ status: "completed" });
    expect(await chunksOf(stack, key.org, store.id)).toEqual([
      { fileId: pdf.id, text: "Vacation requests go to the people team", attributes: {} },
    ]);
    expect((await (await call("alice")).json()).file_counts).toEqual({
      in_progress: 0,
      completed: 1,
      failed: 2,
      cancelled: 0,
      total: 3,
    });
  });

  it("HTML is indexed without its markup, scripts and styles", async () => {
    const { key, store, fileIds } = await aliceStore([
      {
        content:
          "<html><head><title>x</title><style>p{color:red}</style></head><body><h1>Welcome</h1><script>alert(1)</script><p>Fish &amp; chips</p><!-- hidden --></body></html>",
        filename: "page.html",
      },
    ]);
    await settled(stack, key.secret, store.id, fileIds[0]!);
    expect((await chunksOf(stack, key.org, store.id)).map((c) => c.text)).toEqual([
      "Welcome\n\nFish & chips",
    ]);
  });

  it("a file deleted leaves every store it was in, and its chunks with it", async () => {
    const { key, store, fileIds } = await aliceStore([{ content: "shared between two stores" }]);
    const second = await (
      await stack.call(key.secret, VECTOR_STORES, { json: { file_ids: fileIds }, user: "alice" })
    ).json();
    await settled(stack, key.secret, store.id, fileIds[0]!);
    await settled(stack, key.secret, second.id, fileIds[0]!);
    expect(await chunksOf(stack, key.org, second.id)).toHaveLength(1);
    expect(
      (await stack.call(key.secret, `/api/v1/llm/files/${fileIds[0]}`, { method: "DELETE", user: "alice" }))
        .status,
    ).toBe(200);
    for (const id of [store.id, second.id]) {
      expect(await chunksOf(stack, key.org, id)).toEqual([]);
      const got = await (await stack.call(key.secret, `${VECTOR_STORES}/${id}`, { user: "alice" })).json();
      expect(got.file_counts.total).toBe(0);
      expect(got.usage_bytes).toBe(0);
    }
  });

  it("a file that expired is gone from every store it was in at once, before the sweep: counts, bytes, list, reads and writes", async () => {
    const { key, store, fileIds, call } = await aliceStore([
      { content: "kept for a while" },
      { content: "kept for good" },
    ]);
    const [soon, kept] = fileIds as [string, string];
    await settled(stack, key.secret, store.id, soon);
    await settled(stack, key.secret, store.id, kept);
    const before = await (await call("alice")).json();
    expect(before.file_counts).toMatchObject({ completed: 2, total: 2 });
    // Its expiry passes (moved, not waited for: the sweep is not what is tested).
    await stack.db.query(
      "UPDATE files SET expires_at = now() - interval '1 second' WHERE org = $1 AND id = $2",
      [key.org, soon],
    );
    const after = await (await call("alice")).json();
    expect(after.file_counts).toEqual({ in_progress: 0, completed: 1, failed: 0, cancelled: 0, total: 1 });
    expect(after.usage_bytes).toBeGreaterThan(0);
    expect(after.usage_bytes).toBeLessThan(before.usage_bytes);
    const listed = await (await call("alice", "/files")).json();
    expect(listed.data.map((f: { id: string }) => f.id)).toEqual([kept]);
    expect((await call("alice", `/files/${soon}`)).status).toBe(404);
    const update = await call("alice", `/files/${soon}`, {
      method: "POST",
      json: { attributes: { a: "b" } },
    });
    expect(update.status).toBe(404);
    // The file that did not expire is untouched.
    expect((await call("alice", `/files/${kept}`)).status).toBe(200);
  });

  it("a store deleted takes its chunks and relationships; its files stay", async () => {
    const { key, store, fileIds, call } = await aliceStore([{ content: "to be deleted" }]);
    await settled(stack, key.secret, store.id, fileIds[0]!);
    const del = await call("alice", "", { method: "DELETE" });
    expect(await del.json()).toEqual({ id: store.id, object: "vector_store.deleted", deleted: true });
    expect(await chunksOf(stack, key.org, store.id)).toEqual([]);
    expect((await call("alice")).status).toBe(404);
    expect((await stack.call(key.secret, `/api/v1/llm/files/${fileIds[0]}`, { user: "alice" })).status).toBe(
      200,
    );
  });
});

describe("file batches", () => {
  it("put files in at once with shared or per-file attributes, counted as their files settle", async () => {
    const { key, store, call } = await aliceStore();
    const a = await uploaded(stack, key.secret, { content: "batch file a", user: "alice" });
    const b = await uploaded(stack, key.secret, { content: "batch file b", user: "alice" });
    const res = await call("alice", "/file_batches", {
      json: { file_ids: [a.id, b.id], attributes: { kind: "memo" } },
    });
    expect(res.status).toBe(200);
    const batch = await res.json();
    expect(batch).toMatchObject({
      id: expect.stringMatching(/^vsfb_[0-9a-f]{32}$/),
      object: "vector_store.files_batch",
      vector_store_id: store.id,
    });
    expect(openaiSchemaProblems("VectorStoreFileBatchObject", batch)).toEqual([]);
    for (const f of [a, b]) await settled(stack, key.secret, store.id, f.id);
    const got = await (await call("alice", `/file_batches/${batch.id}`)).json();
    expect(got).toMatchObject({
      status: "completed",
      file_counts: { in_progress: 0, completed: 2, failed: 0, cancelled: 0, total: 2 },
    });
    const files = await (await call("alice", `/file_batches/${batch.id}/files`)).json();
    expect(files.data.map((f: { attributes: unknown }) => f.attributes)).toEqual([
      { kind: "memo" },
      { kind: "memo" },
    ]);
    const perFile = await call("alice", "/file_batches", {
      json: { files: [{ file_id: a.id, attributes: { n: 1 } }] },
    });
    expect(perFile.status).toBe(200);
    const second = await perFile.json();
    const listed = await (await call("alice", `/file_batches/${second.id}/files`)).json();
    expect(listed.data.map((f: { id: string; attributes: unknown }) => [f.id, f.attributes])).toEqual([
      [a.id, { n: 1 }],
    ]);
  });

  it.each([
    [{}, ["body", "file_ids"]],
    [{ file_ids: ["file_x"], files: [{ file_id: "file_x" }] }, ["body", "files"]],
    [{ file_ids: [] }, ["body", "file_ids"]],
  ])("a batch of %j is 422 at %j", async (body, loc) => {
    const { call } = await aliceStore();
    const res = await call("alice", "/file_batches", { json: body });
    expect(res.status).toBe(422);
    expect((await res.json()).detail).toEqual([expect.objectContaining({ loc })]);
  });
});

describe("requests refused", () => {
  it.each([
    [
      {
        chunking_strategy: { type: "static", static: { max_chunk_size_tokens: 99, chunk_overlap_tokens: 0 } },
      },
      ["body", "chunking_strategy", "static", "max_chunk_size_tokens"],
    ],
    [
      {
        chunking_strategy: {
          type: "static",
          static: { max_chunk_size_tokens: 4097, chunk_overlap_tokens: 0 },
        },
      },
      ["body", "chunking_strategy", "static", "max_chunk_size_tokens"],
    ],
    [
      {
        chunking_strategy: {
          type: "static",
          static: { max_chunk_size_tokens: 800, chunk_overlap_tokens: 401 },
        },
      },
      ["body", "chunking_strategy", "static", "chunk_overlap_tokens"],
    ],
    [{ chunking_strategy: { type: "semantic" } }, ["body", "chunking_strategy", "type"]],
    [{ expires_after: { anchor: "created_at", days: 1 } }, ["body", "expires_after", "anchor"]],
    [{ expires_after: { anchor: "last_active_at", days: 366 } }, ["body", "expires_after", "days"]],
    [{ metadata: { k: "v".repeat(513) } }, ["body", "metadata", "k"]],
    [{ name: "a\u0000b" }, ["body", "name"]],
    [{ file_ids: Array.from({ length: 501 }, (_, i) => `file_${i}`) }, ["body", "file_ids"]],
    [{ colour: "red" }, ["body", "colour"]],
  ])("a store of %j is 422 at %j", async (body, loc) => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, VECTOR_STORES, { json: body, user: "alice" });
    expect(res.status).toBe(422);
    expect((await res.json()).detail).toEqual([expect.objectContaining({ loc })]);
  });

  it("attributes beyond OpenAI's limits are 422", async () => {
    const { call, key } = await aliceStore();
    const f = await uploaded(stack, key.secret, { content: "x", user: "alice" });
    for (const attributes of [
      Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, i])),
      { k: { nested: true } },
      { k: "v".repeat(513) },
    ]) {
      const res = await call("alice", "/files", { json: { file_id: f.id, attributes } });
      expect(res.status, JSON.stringify(attributes).slice(0, 40)).toBe(422);
    }
  });

  it("a cursor that is not in the list is 422, and after with before is 422", async () => {
    const { call } = await aliceStore();
    expect((await call("alice", "/files?after=file_nope")).status).toBe(422);
    expect((await call("alice", "/files?after=a&before=b")).status).toBe(422);
  });
});

/** A one-page PDF whose text is "Vacation requests go to the people team". */
const MINIMAL_PDF = (() => {
  const content = "BT /F1 12 Tf 10 100 Td (Vacation requests go to the people team) Tj ET";
  const objects = [
    "<</Type/Catalog/Pages 2 0 R>>",
    "<</Type/Pages/Kids[3 0 R]/Count 1>>",
    "<</Type/Page/Parent 2 0 R/MediaBox[0 0 400 144]/Contents 4 0 R/Resources<</Font<</F1 5 0 R>>>>>>",
    `<</Length ${content.length}>>stream\n${content}\nendstream`,
    "<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>",
  ];
  let pdf = "%PDF-1.4\n";
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(pdf.length);
    pdf += `${i + 1} 0 obj${body}endobj\n`;
  });
  const xref = pdf.length;
  pdf += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const at of offsets) pdf += `${String(at).padStart(10, "0")} 00000 n \n`;
  pdf += `trailer<</Size ${objects.length + 1}/Root 1 0 R>>\nstartxref\n${xref}\n%%EOF\n`;
  return pdf;
})();
