import { randomBytes } from "node:crypto";
import { describe, expect, it, vi } from "vitest";
import { FILES, multipartBody, upload, uploaded } from "../../../test/files.ts";
import { llmError, useStack } from "../../../test/stack.ts";
import type { FileHooks } from "../files.ts";

const MiB = 1024 * 1024;

/**
 * Of an organization with a gate, the first upload to be charged is held
 * before its charge commits until another upload's charge waits on it.
 */
const gates = new Map<string, { held: string[]; waiting: () => Promise<void> }>();
const hooks: FileHooks = {
  async whileCharging(file) {
    const gate = gates.get(file.org);
    if (!gate || gate.held.length > 0) return;
    gate.held.push(file.id);
    await gate.waiting();
  },
};
const stack = useStack(
  { FILE_MAX_BYTES: String(3 * MiB), FILE_STORAGE_QUOTA_BYTES: String(5 * MiB) },
  {},
  undefined,
  "single",
  { fileHooks: hooks },
);

/** What an organization has stored: file records, pieces, and its charged bytes. */
async function stored(org: string) {
  const { rows } = await stack.db.query<{ files: string; pieces: string }>(
    `SELECT (SELECT count(*) FROM files WHERE org = $1) AS files,
            (SELECT count(*) FROM file_chunks WHERE org = $1) AS pieces`,
    [org],
  );
  return {
    files: Number(rows[0]!.files),
    pieces: Number(rows[0]!.pieces),
    usage: await stack.files.usage(org),
  };
}
const NOTHING = { files: 0, pieces: 0, usage: 0 };

/** POSTs `body` to /files as it is, with `contentType`, through the gateway. */
const post = (secret: string, body: RequestInit["body"], contentType: string, init: RequestInit = {}) =>
  fetch(`${stack.gatewayUrl}${FILES}`, {
    method: "POST",
    headers: { authorization: `Bearer ${secret}`, "content-type": contentType },
    body,
    ...init,
  });

/** A body streamed in pieces of 256 KiB, so it goes chunked, with no length the server could refuse first. */
function streamed(bytes: Buffer): { body: ReadableStream<Uint8Array>; duplex: "half" } {
  let at = 0;
  return {
    body: new ReadableStream({
      pull(controller) {
        if (at >= bytes.length) return controller.close();
        controller.enqueue(bytes.subarray(at, at + 256 * 1024));
        at += 256 * 1024;
      },
    }),
    duplex: "half",
  };
}

const BOUNDARY = "----gwtest";
const FORM = `multipart/form-data; boundary=${BOUNDARY}`;
const field = (name: string, value: string) => ({
  headers: [`Content-Disposition: form-data; name="${name}"`],
  body: value,
});
const filePart = (body: string | Buffer, filename = "a.txt", name = "file") => ({
  headers: [
    `Content-Disposition: form-data; name="${name}"; filename="${filename}"`,
    "Content-Type: text/plain",
  ],
  body,
});

describe("uploads refused", () => {
  it("an empty file is 422 at file, and leaves nothing stored", async () => {
    const key = await stack.createKey();
    const res = await upload(stack, key.secret, { content: "", purpose: "assistants" });
    expect(res.status).toBe(422);
    expect((await res.json()).detail).toEqual([
      { loc: ["body", "file"], msg: "The file is empty", type: "value_error" },
    ]);
    expect(await stored(key.org)).toEqual(NOTHING);
  });

  it.each([
    [{ purpose: undefined }, ["body", "purpose"], "missing"],
    [{ purpose: "training" }, ["body", "purpose"], "enum"],
    [
      { fields: { "expires_after[anchor]": "created_at", "expires_after[seconds]": "59" } },
      ["body", "expires_after[seconds]"],
      "greater_than_equal",
    ],
    [
      { fields: { "expires_after[anchor]": "created_at", "expires_after[seconds]": "2592001" } },
      ["body", "expires_after[seconds]"],
      "less_than_equal",
    ],
    [
      { fields: { "expires_after[anchor]": "created_at", "expires_after[seconds]": "soon" } },
      ["body", "expires_after[seconds]"],
      "int_type",
    ],
    [
      { fields: { "expires_after[anchor]": "last_active_at", "expires_after[seconds]": "60" } },
      ["body", "expires_after[anchor]"],
      "enum",
    ],
    [{ fields: { "expires_after[seconds]": "60" } }, ["body", "expires_after[anchor]"], "missing"],
    [{ fields: { "expires_after[anchor]": "created_at" } }, ["body", "expires_after[seconds]"], "missing"],
    [{ fields: { colour: "red" } }, ["body", "colour"], "extra_forbidden"],
    [{ filename: "a\tb.txt" }, ["body", "file"], "value_error"],
    [{ filename: `${"n".repeat(256)}.txt` }, ["body", "file"], "value_error"],
  ] as const)("a form with %j is 422 at %j (%s), and leaves nothing stored", async (input, loc, type) => {
    const key = await stack.createKey();
    const res = await upload(stack, key.secret, { content: "some text", purpose: "assistants", ...input });
    expect(res.status).toBe(422);
    const body = await res.json();
    expect(body.detail).toEqual([expect.objectContaining({ loc, type })]);
    // OpenAI's error beside it, which the SDKs read.
    expect(body.error).toMatchObject({
      type: "invalid_request_error",
      param: loc.slice(1).join("."),
      code: type,
    });
    expect(await stored(key.org)).toEqual(NOTHING);
  });

  it("a form without a file part, or with file as text, or with two files, is 422 at file", async () => {
    const key = await stack.createKey();
    for (const parts of [
      [field("purpose", "assistants")],
      [field("purpose", "assistants"), field("file", "not a file")],
      [field("purpose", "assistants"), filePart("one"), filePart("two", "b.txt")],
    ]) {
      const res = await post(key.secret, multipartBody(BOUNDARY, parts), FORM);
      expect(res.status).toBe(422);
      expect((await res.json()).detail).toEqual([expect.objectContaining({ loc: ["body", "file"] })]);
    }
    expect(await stored(key.org)).toEqual(NOTHING);
  });

  it("a multipart body that cannot be read is a JSON 422, never busboy's text", async () => {
    const key = await stack.createKey();
    const whole = multipartBody(BOUNDARY, [field("purpose", "assistants"), filePart("x".repeat(10_000))]);
    const cut = whole.subarray(0, whole.length - 200);
    const cases: [Buffer | string, string, (string | number)[], string][] = [
      [cut, FORM, ["body"], "The multipart body ended before its closing boundary"],
      [
        Buffer.from(
          `--${BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\nBad header line\r\n\r\nx\r\n`,
        ),
        FORM,
        ["body"],
        "A part of the multipart body has a malformed header",
      ],
      [
        "anything",
        "multipart/form-data",
        ["header", "content-type"],
        "multipart/form-data needs a boundary parameter",
      ],
      [
        multipartBody(
          BOUNDARY,
          Array.from({ length: 11 }, (_, i) => field(`f${i}`, "v")),
        ),
        FORM,
        ["body"],
        "The form has more fields than the 8 it may have",
      ],
      [
        multipartBody(BOUNDARY, [field("purpose", "x".repeat(2000)), filePart("abc")]),
        FORM,
        ["body", "purpose"],
        "String should have at most 1024 bytes",
      ],
    ];
    for (const [body, type, loc, msg] of cases) {
      const res = await post(key.secret, body, type);
      expect(res.status, msg).toBe(422);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      expect((await res.json()).detail).toEqual([expect.objectContaining({ loc, msg })]);
    }
    expect(await stored(key.org)).toEqual(NOTHING);
  });

  it("a body that is not a multipart form is 415, in OpenAI's shape", async () => {
    const key = await stack.createKey();
    for (const [body, type] of [
      ['{"purpose":"assistants"}', "application/json"],
      ["purpose=assistants", "application/x-www-form-urlencoded"],
    ]) {
      const res = await post(key.secret, body!, type!);
      expect(res.status).toBe(415);
      expect(await res.json()).toEqual(
        llmError("unsupported_media_type", "Files are uploaded as multipart/form-data"),
      );
    }
  });

  it("a file past FILE_MAX_BYTES is 413 file_too_large, streamed or declared, and leaves nothing stored", async () => {
    const key = await stack.createKey();
    const big = multipartBody(BOUNDARY, [field("purpose", "assistants"), filePart(randomBytes(3 * MiB + 1))]);
    // Declared: refused before it is read.
    const declared = await post(key.secret, big, FORM);
    expect(declared.status).toBe(413);
    expect(await declared.json()).toEqual(
      llmError("file_too_large", `The file is larger than the ${3 * MiB} bytes a file may have`, "file"),
    );
    // Streamed without a length: refused once the bytes pass the limit, what was stored removed.
    const chunked = await post(key.secret, streamed(big).body, FORM, { duplex: "half" } as RequestInit);
    expect(chunked.status).toBe(413);
    expect((await chunked.json()).error.code).toBe("file_too_large");
    expect(await stored(key.org)).toEqual(NOTHING);
    // A file of exactly the limit is taken.
    const exact = multipartBody(BOUNDARY, [field("purpose", "assistants"), filePart(randomBytes(3 * MiB))]);
    const taken = await post(key.secret, streamed(exact).body, FORM, { duplex: "half" } as RequestInit);
    expect(taken.status).toBe(200);
    expect((await taken.json()).bytes).toBe(3 * MiB);
  });

  it("past the organization's quota is 413 storage_quota_exceeded; a delete frees its bytes; other organizations are not charged", async () => {
    const key = await stack.createKey();
    const first = await uploaded(stack, key.secret, { content: randomBytes(3 * MiB) });
    expect(await stack.files.usage(key.org)).toBe(3 * MiB);
    const over = await upload(stack, key.secret, {
      content: randomBytes(2 * MiB + 1),
      purpose: "assistants",
    });
    expect(over.status).toBe(413);
    expect(await over.json()).toEqual(
      llmError(
        "storage_quota_exceeded",
        `This file would take the organization's stored files past its quota of ${5 * MiB} bytes; delete files or wait for them to expire`,
        "file",
      ),
    );
    expect(await stored(key.org)).toEqual({ files: 1, pieces: 3, usage: 3 * MiB });
    const other = await stack.createKey();
    expect(
      (await upload(stack, other.secret, { content: randomBytes(3 * MiB), purpose: "assistants" })).status,
    ).toBe(200);
    // Exactly up to the quota is taken; then a delete gives its bytes back.
    await uploaded(stack, key.secret, { content: randomBytes(2 * MiB) });
    expect(await stack.files.usage(key.org)).toBe(5 * MiB);
    expect((await stack.call(key.secret, `${FILES}/${first.id}`, { method: "DELETE" })).status).toBe(200);
    expect(await stack.files.usage(key.org)).toBe(2 * MiB);
    expect(
      (await upload(stack, key.secret, { content: randomBytes(3 * MiB), purpose: "assistants" })).status,
    ).toBe(200);
  });

  it("two uploads racing for the quota's last bytes: one held charged but not committed while the other's charge waits, only one is taken", async () => {
    const key = await stack.createKey();
    await uploaded(stack, key.secret, { content: randomBytes(3 * MiB) });
    await uploaded(stack, key.secret, { content: randomBytes(MiB / 2) });
    // 3.5 MiB stored of 5: room for one more MiB, not two. Each upload is one piece, charged once.
    gates.set(key.org, {
      held: [],
      // The other upload's charge blocks on the organization's row, which the held one has raised.
      waiting: () =>
        vi.waitFor(
          async () => {
            const { rows } = await stack.db.query<{ n: string }>(
              `SELECT count(*) AS n FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock'`,
            );
            expect(Number(rows[0]!.n)).toBe(1);
          },
          { timeout: 20_000, interval: 20 },
        ),
    });
    const answers = await Promise.all(
      [0, 1].map(async () => {
        const res = await upload(stack, key.secret, { content: randomBytes(MiB), purpose: "assistants" });
        return { status: res.status, code: (await res.json()).error?.code as string | undefined };
      }),
    );
    expect(gates.get(key.org)!.held).toHaveLength(1);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 413]);
    expect(answers.find((a) => a.status === 413)!.code).toBe("storage_quota_exceeded");
    expect(await stored(key.org)).toEqual({ files: 3, pieces: 5, usage: 4.5 * MiB });
  });
});
