import { randomBytes } from "node:crypto";
import { openaiSchemaProblems } from "@gw/test-kit/openai-schemas";
import { describe, expect, it } from "vitest";
import { FILES, upload, uploaded } from "../../../test/files.ts";
import { llmError, useStack } from "../../../test/stack.ts";
import type { FileHooks } from "../files.ts";

const MiB = 1024 * 1024;
/** Called, by organization, once the first piece of an upload of theirs is stored. */
const firstPiece = new Map<string, () => void>();
const hooks: FileHooks = {
  afterStore(file) {
    firstPiece.get(file.org)?.();
  },
};
const stack = useStack({}, {}, undefined, "single", { fileHooks: hooks });

/** Asserts `value` is a valid OpenAI `schema`, showing what is not when it is not. */
function valid(schema: string, value: unknown): void {
  expect({ schema, problems: openaiSchemaProblems(schema, value) }).toEqual({ schema, problems: [] });
}

const check = async (secret: string, user: string, id: string, role = "owner") => {
  const query = new URLSearchParams({ resourceType: "file", resourceId: id, role });
  return (await (await stack.call(secret, `/api/v1/authorization/llm/check?${query}`, { user })).json())
    .allowed;
};

describe("files", () => {
  it("are uploaded as multipart, read back whole, listed and deleted, in OpenAI's shapes", async () => {
    const key = await stack.createKey();
    const res = await upload(stack, key.secret, {
      content: "hello, files",
      filename: "notes.txt",
      purpose: "assistants",
      user: "alice",
    });
    expect(res.status).toBe(200);
    const file = await res.json();
    expect(file).toEqual({
      id: expect.stringMatching(/^file_[0-9a-f]{32}$/),
      object: "file",
      bytes: 12,
      created_at: expect.any(Number),
      expires_at: file.created_at + 30 * 86_400,
      filename: "notes.txt",
      purpose: "assistants",
      status: "processed",
    });
    valid("OpenAIFile", file);
    // The end user of X-On-Behalf-Of owns it; the key's own owner does not.
    expect(await check(key.secret, "alice", file.id)).toBe(true);
    expect(await check(key.secret, "backend", file.id, "reader")).toBe(false);

    const got = await stack.call(key.secret, `${FILES}/${file.id}`, { user: "alice" });
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual(file);

    const content = await stack.call(key.secret, `${FILES}/${file.id}/content`, { user: "alice" });
    expect(content.status).toBe(200);
    expect(await content.text()).toBe("hello, files");
    expect(content.headers.get("content-type")).toBe("text/plain");
    expect(content.headers.get("content-length")).toBe("12");
    expect(content.headers.get("content-disposition")).toBe("attachment; filename=notes.txt");
    expect(content.headers.get("x-content-type-options")).toBe("nosniff");

    const listed = await stack.call(key.secret, FILES, { user: "alice" });
    const list = await listed.json();
    expect(list).toEqual({
      object: "list",
      data: [file],
      first_id: file.id,
      last_id: file.id,
      has_more: false,
    });
    valid("ListFilesResponse", list);

    const removed = await stack.call(key.secret, `${FILES}/${file.id}`, { method: "DELETE", user: "alice" });
    expect(removed.status).toBe(200);
    const deleted = await removed.json();
    expect(deleted).toEqual({ id: file.id, object: "file", deleted: true });
    valid("DeleteFileResponse", deleted);
    for (const path of ["", "/content"]) {
      const gone = await stack.call(key.secret, `${FILES}/${file.id}${path}`, { user: "alice" });
      expect(gone.status).toBe(404);
      expect(await gone.json()).toEqual(llmError("not_found", `No file ${file.id}`));
    }
    expect(await check(key.secret, "alice", file.id)).toBe(false);
    expect((await (await stack.call(key.secret, FILES, { user: "alice" })).json()).data).toEqual([]);
    const rows = await stack.db.query(
      "SELECT (SELECT count(*) FROM files WHERE org = $1) + (SELECT count(*) FROM file_chunks WHERE org = $1) AS n",
      [key.org],
    );
    expect(rows.rows[0]).toEqual({ n: "0" });
  });

  it("keep binary content and a name beyond ASCII byte for byte, in the media type they were sent with", async () => {
    const key = await stack.createKey();
    const bytes = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(70_000)]);
    const file = await uploaded(stack, key.secret, {
      content: bytes,
      filename: "résumé 2026.pdf",
      type: "application/pdf",
      purpose: "user_data",
    });
    expect(file).toMatchObject({ bytes: bytes.length, filename: "résumé 2026.pdf", purpose: "user_data" });
    const content = await stack.call(key.secret, `${FILES}/${file.id}/content`);
    expect(Buffer.from(await content.arrayBuffer()).equals(bytes)).toBe(true);
    expect(content.headers.get("content-type")).toBe("application/pdf");
    expect(content.headers.get("content-disposition")).toBe(
      `attachment; filename="r?sum? 2026.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%202026.pdf`,
    );
  });

  it("serve a media type that is not one as application/octet-stream", async () => {
    const key = await stack.createKey();
    const boundary = "b0undary";
    const body = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassistants\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.bin"\r\nContent-Type: application/${"x".repeat(70)}\r\n\r\nabc\r\n` +
        `--${boundary}--\r\n`,
    );
    const res = await fetch(`${stack.gatewayUrl}${FILES}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key.secret}`,
        "content-type": `multipart/form-data; boundary=${boundary}`,
      },
      body,
    });
    expect(res.status).toBe(200);
    const { id } = await res.json();
    const content = await stack.call(key.secret, `${FILES}/${id}/content`);
    expect(content.headers.get("content-type")).toBe("application/octet-stream");
    expect(await content.text()).toBe("abc");
  });

  it("expire expires_after[seconds] after they were created (60 to 2592000), else after FILE_RETENTION; their owner and grants end then in SpiceDB", async () => {
    const key = await stack.createKey();
    const expiring = (seconds: string) =>
      uploaded(stack, key.secret, {
        content: "x",
        user: "alice",
        fields: { "expires_after[anchor]": "created_at", "expires_after[seconds]": seconds },
      });
    const minute = await expiring("60");
    expect(minute.expires_at).toBe(minute.created_at + 60);
    const hour = await expiring("3600");
    expect(hour.expires_at).toBe(hour.created_at + 3600);
    const month = await expiring("2592000");
    expect(month.expires_at).toBe(month.created_at + 2_592_000);
    const kept = await uploaded(stack, key.secret, { content: "x", user: "alice" });
    expect(kept.expires_at).toBe(kept.created_at + 30 * 86_400);

    // SpiceDB ends the owner with the file (so checks and lookups stop at once), and any grant with it.
    const far = new Date((hour.created_at + 86_400) * 1000).toISOString();
    const grant = await stack.call(key.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "file", resourceId: hour.id, userId: "bob", role: "reader", expiresAt: far },
      user: "alice",
    });
    expect(grant.status).toBe(204);
    const grants = await stack.call(
      key.secret,
      `/api/v1/authorization/llm/resources/file/${hour.id}/grants`,
      {
        user: "alice",
      },
    );
    const ends = new Date(hour.expires_at * 1000).getTime();
    expect(
      ((await grants.json()).data as { userId: string; expiresAt: string }[]).map((g) => [
        g.userId,
        Math.floor(new Date(g.expiresAt).getTime() / 1000) * 1000,
      ]),
    ).toEqual([
      ["alice", ends],
      ["bob", ends],
    ]);
  });

  it("are stored while they arrive, through the gateway: a piece is stored before the client has sent the rest", async () => {
    const key = await stack.createKey();
    const stored = Promise.withResolvers<void>();
    firstPiece.set(key.org, stored.resolve);
    const boundary = "streamed-through";
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassistants\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
    );
    const bytes = randomBytes(3 * MiB);
    const parts: (Buffer | Promise<void>)[] = [
      head,
      bytes.subarray(0, 2 * MiB),
      // Nothing more is sent until the service has stored a piece: a gateway or service that waited for
      // the whole body would wait for ever (and the test time out).
      stored.promise,
      bytes.subarray(2 * MiB),
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ];
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = parts.shift();
        if (next === undefined) return controller.close();
        if (next instanceof Promise) await next;
        else controller.enqueue(next);
      },
    });
    const res = await fetch(`${stack.gatewayUrl}${FILES}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key.secret}`,
        "content-type": `multipart/form-data; boundary=${boundary}`,
      },
      body,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(200);
    const file = await res.json();
    expect(file.bytes).toBe(3 * MiB);
    const content = await stack.call(key.secret, `${FILES}/${file.id}/content`);
    expect(Buffer.from(await content.arrayBuffer()).equals(bytes)).toBe(true);
  });

  it("are listed newest first, paged by after and limit, oldest first with order=asc, and by purpose", async () => {
    const key = await stack.createKey();
    const ids: string[] = [];
    for (const purpose of ["assistants", "batch", "assistants", "user_data", "assistants"])
      ids.push((await uploaded(stack, key.secret, { content: purpose, purpose })).id);
    const list = async (query: string) => {
      const res = await stack.call(key.secret, `${FILES}${query}`);
      expect(res.status).toBe(200);
      const body = await res.json();
      return { ids: body.data.map((f: { id: string }) => f.id) as string[], more: body.has_more as boolean };
    };
    const newest = [...ids].reverse();
    expect(await list("")).toEqual({ ids: newest, more: false });
    expect(await list("?limit=2")).toEqual({ ids: newest.slice(0, 2), more: true });
    expect(await list(`?limit=2&after=${newest[1]}`)).toEqual({ ids: newest.slice(2, 4), more: true });
    expect(await list("?order=asc")).toEqual({ ids, more: false });
    expect(await list("?purpose=assistants&order=asc")).toEqual({
      ids: [ids[0], ids[2], ids[4]],
      more: false,
    });
    expect(await list("?purpose=fine-tune")).toEqual({ ids: [], more: false });
    for (const [query, type] of [
      ["?limit=0", "greater_than_equal"],
      ["?limit=10001", "less_than_equal"],
      ["?order=up", "enum"],
      ["?after=file_nope", "value_error"],
    ] as const) {
      const res = await stack.call(key.secret, `${FILES}${query}`);
      expect(res.status, query).toBe(422);
      expect((await res.json()).detail[0].type).toBe(type);
    }
  });
});
