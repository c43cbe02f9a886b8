import { randomBytes } from "node:crypto";
import { text } from "node:stream/consumers";
import { scopedId } from "@gw/core/authz";
import { readRelationshipLines } from "@gw/test-kit";
import { describe, expect, it, vi } from "vitest";
import { FILES, upload, uploaded } from "../../../test/files.ts";
import { useStack } from "../../../test/stack.ts";
import type { FileRef } from "../contents.ts";

// Real time: SpiceDB's own clock ends the owner relationship, as it would in production.
// Long enough for the steps before it on a busy machine.
const stack = useStack({ FILE_RETENTION: "10s", RETENTION_SWEEP_INTERVAL: "1h" });
const AUTHZ = "/api/v1/authorization/llm";

describe("a file past its expiry", () => {
  it("is gone at once from checks, lookups, listings and reads for everyone, before any sweep; the sweep then deletes its bytes, record and relationships and tells the removal listeners", async () => {
    const key = await stack.createKey();
    const removed: FileRef[] = [];
    stack.files.onRemove(async (files) => {
      removed.push(...files.filter((f) => f.org === key.org));
    });
    const as = (user: string, path: string, json?: unknown) => stack.call(key.secret, path, { json, user });
    const file = await uploaded(stack, key.secret, { content: "short-lived notes", user: "alice" });
    expect(file.expires_at).toBe(file.created_at + 10);
    const far = new Date(Date.now() + 86_400_000).toISOString();
    const grant = (userId: string) =>
      as("alice", `${AUTHZ}/grant`, {
        resourceType: "file",
        resourceId: file.id,
        userId,
        role: "reader",
        expiresAt: far,
      });
    expect((await grant("bob")).status).toBe(204);
    const check = async (user: string) =>
      (await (await as(user, `${AUTHZ}/check?resourceType=file&resourceId=${file.id}&role=reader`)).json())
        .allowed as boolean;
    const lookup = async (user: string) =>
      (
        (await (await as(user, `${AUTHZ}/resources?resourceType=file&role=reader`)).json()).data as {
          resourceId: string;
        }[]
      ).map((r) => r.resourceId);
    const listed = async (user: string) =>
      ((await (await as(user, FILES)).json()).data as { id: string }[]).map((f) => f.id);
    for (const user of ["alice", "bob"]) {
      expect(await check(user)).toBe(true);
      expect(await lookup(user)).toEqual([file.id]);
      expect(await listed(user)).toEqual([file.id]);
    }
    // What ingestion reads: the live file's bytes, as a stream.
    const opened = await stack.files.open(key.org, file.id);
    expect(opened?.file.id).toBe(file.id);
    expect(await text(opened!.stream)).toBe("short-lived notes");

    await vi.waitFor(async () => expect(await check("alice")).toBe(false), {
      timeout: 30_000,
      interval: 200,
    });
    for (const user of ["alice", "bob"]) {
      expect(await check(user)).toBe(false);
      expect(await lookup(user)).toEqual([]);
      expect(await listed(user)).toEqual([]);
      for (const path of ["", "/content"])
        expect((await as(user, `${FILES}/${file.id}${path}`)).status, `${user} ${path}`).toBe(404);
    }
    expect((await grant("dave")).status).toBe(403);
    expect(await stack.files.open(key.org, file.id)).toBeUndefined();
    // Nothing is deleted yet: only the sweep deletes.
    expect(removed).toEqual([]);
    expect(await readRelationshipLines(stack.spicedb, relationshipsOf(key.org, file.id))).not.toEqual([]);

    const fresh = await uploaded(stack, key.secret, { content: "new", user: "alice" });
    const report = await stack.sweep();
    expect(report?.files).toBeGreaterThanOrEqual(1);
    expect(removed).toEqual([{ org: key.org, id: file.id }]);
    expect(await readRelationshipLines(stack.spicedb, relationshipsOf(key.org, file.id))).toEqual([]);
    const { rows } = await stack.db.query<{ files: string; pieces: string }>(
      `SELECT (SELECT count(*) FROM files WHERE org = $1 AND id = $2) AS files,
              (SELECT count(*) FROM file_chunks WHERE org = $1 AND file_id = $2) AS pieces`,
      [key.org, file.id],
    );
    expect(rows[0]).toEqual({ files: "0", pieces: "0" });
    // The quota is given back; the file uploaded since is untouched.
    expect(await stack.files.usage(key.org)).toBe(fresh.bytes);
    expect((await as("alice", `${FILES}/${fresh.id}`)).status).toBe(200);
  }, 60_000);

  it("an owner's delete tells the removal listeners too; an upload that never became a file does not", async () => {
    const key = await stack.createKey();
    const removed: FileRef[] = [];
    stack.files.onRemove(async (files) => {
      removed.push(...files.filter((f) => f.org === key.org));
    });
    const empty = await upload(stack, key.secret, { content: "", purpose: "assistants", user: "alice" });
    expect(empty.status).toBe(422);
    expect(removed).toEqual([]);
    const file = await uploaded(stack, key.secret, { content: "x", user: "alice" });
    const res = await stack.call(key.secret, `${FILES}/${file.id}`, { method: "DELETE", user: "alice" });
    expect(res.status).toBe(200);
    expect(removed).toEqual([{ org: key.org, id: file.id }]);
  });
});

describe("a file read whole (Files.open, as ingestion reads it)", () => {
  it("deleted while it is read, fails the reader rather than end short", async () => {
    const key = await stack.createKey();
    const bytes = randomBytes(4 * 1024 * 1024);
    const file = await uploaded(stack, key.secret, { content: bytes, user: "alice" });
    const opened = await stack.files.open(key.org, file.id);
    const pieces = opened!.stream[Symbol.asyncIterator]();
    const first = (await pieces.next()).value as Buffer;
    expect(first.equals(bytes.subarray(0, first.length))).toBe(true);
    const res = await stack.call(key.secret, `${FILES}/${file.id}`, { method: "DELETE", user: "alice" });
    expect(res.status).toBe(200);
    const rest = (async () => {
      for (let next = await pieces.next(); !next.done; next = await pieces.next());
    })();
    await expect(rest).rejects.toThrow(`The file ${file.id} was deleted while it was read`);
  });
});

const relationshipsOf = (org: string, id: string) => ({
  resourceType: "file",
  optionalResourceId: scopedId(org, id),
});
