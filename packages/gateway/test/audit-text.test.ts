import { copyFile, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type AuditIntent, AuditLog } from "@gw/core/audit";
import { createPostgres, MIGRATIONS_DIR, migrate, type Postgres } from "@gw/core/postgres";
import { useTestDatabase } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const database = useTestDatabase();
let db: Postgres;
beforeAll(() => {
  db = createPostgres(database.url, { connectionName: "test" });
});
afterAll(() => db?.close());

/** Text PostgreSQL's `text` cannot hold (U+0000; a lone surrogate it would turn into U+FFFD), look-alikes, and a long one. */
const TEXTS: [string, string][] = [
  ["U+0000", "a\u0000b"],
  ["a lone high surrogate", "a\ud800b"],
  ["a lone low surrogate", "\udc00"],
  ["\\u0000 as written", "a\\u0000b"],
  ["U+FFFD", "a\ufffdb"],
  ["600 emoji", "😀".repeat(600)],
];

describe("the audit trail records and reads back any text, in every field", () => {
  it.each(TEXTS)(
    "%s: begin, settle and record keep it exactly; every filter reads the record",
    async (what, text) => {
      const audit = new AuditLog(db, { retentionMs: 86_400_000 });
      const org = `org-text-${TEXTS.findIndex(([w]) => w === what)}`;
      const intent: AuditIntent = {
        organization: org,
        actor: { userId: text, keyId: text, credential: "api_key" },
        action: "grant",
        resourceType: "file",
        resourceId: text,
        subject: text,
        requestId: text,
      };
      const begun = await audit.begin(intent);
      const settled = await audit.settle(begun, "allowed", "zed-token");
      const called = await audit.record(
        { ...intent, action: "call", resourceType: "mcp_server", tool: text, decision: "denied" },
        "denied",
      );
      const expected = [{ ...called, durationMs: undefined, argumentsSha256: undefined }, settled];
      const read = async (filters: Parameters<AuditLog["forOrganization"]>[2]) =>
        (await audit.forOrganization(org, { limit: 10 }, filters)).data;
      expect(await read({})).toEqual(expected);
      expect(await read({ actor: text })).toEqual(expected);
      expect(await read({ action: "call" })).toEqual([expected[0]]);
      expect(await read({ action: "grant", actor: text })).toEqual([expected[1]]);
      expect(await read({ resourceType: "file", resourceId: text })).toEqual([expected[1]]);
      expect(await read({ resourceType: "mcp_server" })).toEqual([expected[0]]);
      expect((await audit.forResource(org, { type: "file", id: text }, { limit: 10 })).data).toEqual([
        expected[1],
      ]);
    },
  );

  it("one record holding U+0000 leaves every filtered read of its organization working", async () => {
    const audit = new AuditLog(db, { retentionMs: 86_400_000 });
    const base: AuditIntent = {
      organization: "org-nul-neighbour",
      actor: { userId: "alice", keyId: "key_1", credential: "api_key" },
      action: "register",
      resourceType: "file",
      resourceId: "f_plain",
      requestId: "req-1",
    };
    await audit.settle(await audit.begin(base), "allowed");
    await audit.record({ ...base, action: "call", resourceType: "mcp_server", tool: "x\u0000y" }, "denied");
    const page = await audit.forOrganization(
      "org-nul-neighbour",
      { limit: 10 },
      { actor: "alice", action: "register" },
    );
    expect(page.data.map((r) => r.resourceId)).toEqual(["f_plain"]);
  });

  it("a filter by resource id needs the resource's type: without it, nothing is read", async () => {
    const audit = new AuditLog(db, { retentionMs: 86_400_000 });
    await expect(audit.forOrganization("org-x", { limit: 10 }, { resourceId: "f_1" })).rejects.toThrow(
      "An audit filter by resource id needs the resource's type",
    );
  });
});

describe("the migration that gives the trail its actor and action columns", () => {
  const empty = useTestDatabase({ migrated: false });

  it("fills them for records written before, also those holding U+0000, lone surrogates or \\u0000 as written", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-audit-migrations-"));
    const old = createPostgres(empty.url, { connectionName: "test" });
    try {
      const files = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith(".sql")).sort();
      const before = files.filter((f) => f < "0101_audit_filter_columns.sql");
      for (const file of before) await copyFile(join(MIGRATIONS_DIR, file), join(dir, file));
      await migrate(empty.url, dir);
      // As gateways wrote them before: no actor or action column yet.
      const tools = ["x\u0000y", "x\ud800y", "\udc00", "x\\u0000y", "x\\\u0000y"];
      for (const [i, tool] of tools.entries()) {
        const intent = {
          organization: "org-old",
          actor: { userId: `user-${i}"\\`, keyId: "key_1", credential: "api_key" },
          action: "call",
          resourceType: "mcp_server",
          resourceId: "mcp_1",
          tool,
          requestId: `req-${i}`,
        };
        await old.query(
          `INSERT INTO audit_records (org, at, resource_type, resource_id, record, outcome)
           VALUES ('org-old', now(), 'mcp_server', 'mcp_1', $1, 'denied')`,
          [JSON.stringify(intent)],
        );
      }
      await copyFile(
        join(MIGRATIONS_DIR, "0101_audit_filter_columns.sql"),
        join(dir, "0101_audit_filter_columns.sql"),
      );
      expect(await migrate(empty.url, dir)).toEqual(["0101_audit_filter_columns"]);
      const { rows } = await old.query<{ actor: string; action: string }>(
        "SELECT actor, action FROM audit_records ORDER BY seq",
      );
      expect(rows).toEqual(tools.map((_, i) => ({ actor: `user-${i}"\\`, action: "call" })));
      const audit = new AuditLog(old, { retentionMs: 86_400_000 });
      const read = await audit.forOrganization(
        "org-old",
        { limit: 10 },
        { actor: 'user-1"\\', action: "call" },
      );
      expect(read.data.map((r) => r.tool)).toEqual([tools[1]]);
    } finally {
      await old.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
